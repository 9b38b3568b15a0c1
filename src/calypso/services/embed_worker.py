"""Embedding workers: give completed documents their passage vectors, in the background.

A document is keyword-searchable as soon as it is parsed; embedding is 20 to 50 times slower than
parsing, so it is a second job (``EmbeddingStore``) that any process with the model can take: the
worker claims a document, embeds the passages that still lack a vector in batches, and stores each
batch in its own transaction with an ``embedded`` change, so hybrid search uses each batch as it lands
(a document reports how far it is: ``DocumentService.embedding_progress``). A worker that dies leaves
the job to another once the lease expires; vectors already stored are not computed again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from calypso.errors import CalypsoError
from calypso.models import EmbeddingJob
from calypso.services.ingest_worker import worker_id

if TYPE_CHECKING:
    from calypso.services.documents import DocumentService

log = logging.getLogger("calypso.embed.worker")

BATCH = 32  # passages per stored batch: a few seconds of the local model, then search sees them
Progress = Callable[[int, int], None]  # (documents done, passages embedded)


def embed_document(service: DocumentService, job: EmbeddingJob, owner: str, stopping: threading.Event) -> int:
    """Embed a claimed document's missing passages; returns how many were stored (the job ends when none are left)."""
    embedder, embeddings = service.embedder, service.embeddings
    assert embedder is not None and embeddings is not None
    lease = service.settings.job_lease_seconds
    missing = embeddings.missing_chunks(job.document_key, job.model)
    stored = 0
    for start in range(0, len(missing), BATCH):
        if stopping.is_set():
            embeddings.release(job.document_key, owner)
            return stored
        batch = missing[start : start + BATCH]
        vectors = np.asarray(embedder.embed([text for _, text in batch]), dtype=np.float32)
        if not embeddings.store_vectors(job, owner, [key for key, _ in batch], vectors):
            return stored  # deleted, or the lease went to another worker
        stored += len(batch)
        if not embeddings.renew(job.document_key, owner, lease):
            return stored
    embeddings.finish(job.document_key, owner)
    service.catch_up()  # this process's search sees the vectors at once
    return stored


class EmbedWorkers:
    """``count`` threads embedding queued documents until ``stop``: inside `calypso serve` or `calypso worker`."""

    def __init__(self, service: DocumentService, count: int = 1, role: str = "embed") -> None:
        self.service, self.count, self.role = service, count, role
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        if self.service.embedder is None or self.count <= 0:
            return
        for n in range(self.count):
            thread = threading.Thread(target=self._loop, args=(worker_id(f"{self.role}{n}"),), daemon=True)
            thread.name = f"embed-{self.role}-{n}"
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop at the next batch. Joined without a timeout: a thread left inside onnxruntime when the
        interpreter exits aborts the process ("terminate called without an active exception")."""
        self.stopping.set()
        for thread in self._threads:
            thread.join()

    def _loop(self, owner: str) -> None:
        while not self.stopping.is_set():
            if run_once(self.service, owner, self.stopping) is None:
                self.stopping.wait(self.service.settings.job_poll_seconds)


def run_once(service: DocumentService, owner: str, stopping: threading.Event) -> int | None:
    """Claim and embed one document; None when there was nothing to claim (or the store is away)."""
    embedder, embeddings = service.embedder, service.embeddings
    if embedder is None or embeddings is None:
        return None
    try:
        job = embeddings.claim(owner, service.settings.job_lease_seconds, embedder.name)
        if job is None:
            return None
        started = time.perf_counter()
        stored = embed_document(service, job, owner, stopping)
        log.info(
            "embedded %d passages of document %s in %.1fs", stored, job.document_key, time.perf_counter() - started
        )
        return stored
    except CalypsoError as exc:  # the store or the embeddings server is away: the lease expires, the job returns
        log.warning("embedding stopped: %s", exc.message)
        stopping.wait(service.settings.job_poll_seconds)
        return 0


def embed_all(
    service: DocumentService, stopping: threading.Event | None = None, on_progress: Progress | None = None
) -> int:
    """Embed every queued document in this thread (``calypso reindex``); returns passages embedded."""
    stopping = stopping or threading.Event()
    owner = worker_id("reindex")
    total = docs = 0
    while not stopping.is_set():
        stored = run_once(service, owner, stopping)
        if stored is None:
            if service.embedder is None or service.embeddings is None:
                return total
            if service.embeddings.pending(service.embedder.name) == 0:
                return total
            stopping.wait(service.settings.job_poll_seconds)  # others hold the remaining jobs
            continue
        total += stored
        docs += 1
        if on_progress is not None:
            on_progress(docs, total)
    return total
