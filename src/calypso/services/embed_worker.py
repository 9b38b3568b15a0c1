"""Embedding workers: give completed documents their passage vectors, in the background.

A document is keyword-searchable as soon as it is parsed; embedding is 20 to 50 times slower than
parsing, so it is a second job (``EmbeddingStore``) that any process with the model can take: the
worker claims a document, embeds the passages that still lack a vector in batches, and stores each
batch in its own transaction with an ``embedded`` change, so hybrid search uses each batch as it lands
(a document reports how far it is: ``VectorService.progress``). A worker that dies leaves
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
    from calypso.services.vectors import VectorService

log = logging.getLogger("calypso.embed.worker")

BATCH = 32  # passages per stored batch: a few seconds of the local model, then search sees them
Progress = Callable[[int, int], None]  # (documents done, passages embedded)


def embed_document(
    service: VectorService,
    job: EmbeddingJob,
    owner: str,
    stopping: threading.Event,
    missing: list[tuple[int, str]] | None = None,
) -> int:
    """Embed a claimed document's missing passages; returns how many were stored (the job ends when none are left)."""
    embedder, embeddings = service.embedder, service.embeddings
    assert embedder is not None and embeddings is not None
    lease = service.settings.job_lease_seconds
    if missing is None:
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

    def __init__(self, service: VectorService, count: int = 1, role: str = "embed") -> None:
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

    def alive(self) -> tuple[int, int]:
        """(threads running, threads started): a thread that died of a bug shows here before users notice."""
        return sum(thread.is_alive() for thread in self._threads), len(self._threads)

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


def embed_small_documents(
    service: VectorService, claimed: list[tuple[EmbeddingJob, list[tuple[int, str]]]], owner: str
) -> int:
    """Embed several small claimed documents in one model call (one passage at a time runs the local model at a
    third of its batched speed), then store and finish each; returns passages stored."""
    embedder, embeddings = service.embedder, service.embeddings
    assert embedder is not None and embeddings is not None
    texts = [text for _, missing in claimed for _, text in missing]
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32) if texts else np.zeros((0, embedder.dimension))
    stored = start = 0
    for job, missing in claimed:
        rows = vectors[start : start + len(missing)]
        start += len(missing)
        if missing and not embeddings.store_vectors(job, owner, [key for key, _ in missing], rows):
            continue  # deleted meanwhile, or its lease lost
        stored += len(missing)
        embeddings.finish(job.document_key, owner)
    service.catch_up()
    return stored


def run_once(service: VectorService, owner: str, stopping: threading.Event) -> int | None:
    """Claim and embed one document, or several small ones together; None when there was nothing to claim."""
    embedder, embeddings = service.embedder, service.embeddings
    if embedder is None or embeddings is None:
        return None
    lease = service.settings.job_lease_seconds
    try:
        job = embeddings.claim(owner, lease, embedder.name)
        if job is None:
            return None
        started = time.perf_counter()
        claimed = [(job, embeddings.missing_chunks(job.document_key, job.model))]
        waiting = len(claimed[0][1])
        while waiting < BATCH and not stopping.is_set():  # small documents fill one batch together
            more = embeddings.claim(owner, lease, embedder.name)
            if more is None:
                break
            claimed.append((more, embeddings.missing_chunks(more.document_key, more.model)))
            waiting += len(claimed[-1][1])
        if len(claimed) == 1:
            stored = embed_document(service, job, owner, stopping, claimed[0][1])
        else:
            stored = embed_small_documents(service, claimed, owner)
        log.info("embedded %d passages of %d document(s) in %.1fs", stored, len(claimed), time.perf_counter() - started)
        return stored
    except CalypsoError as exc:  # the store or the embeddings server is away: the lease expires, the job returns
        log.warning("embedding stopped: %s", exc.message)
        stopping.wait(service.settings.job_poll_seconds)
        return 0


def embed_all(
    service: VectorService, stopping: threading.Event | None = None, on_progress: Progress | None = None
) -> int:
    """Embed every queued document in this thread (``calypso reindex``); returns passages embedded."""
    stopping = stopping or threading.Event()
    if service.embedder is None or service.embeddings is None:
        return 0
    owner = worker_id("reindex")
    model = service.embedder.name
    queued = service.embeddings.pending(model)
    total = 0
    while not stopping.is_set():
        stored = run_once(service, owner, stopping)
        left = service.embeddings.pending(model)
        if stored is None:
            if left == 0:
                return total
            stopping.wait(service.settings.job_poll_seconds)  # others hold the remaining jobs
            continue
        total += stored
        if on_progress is not None:
            on_progress(max(queued - left, 0), total)
    return total
