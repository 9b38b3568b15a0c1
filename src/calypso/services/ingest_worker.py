"""Ingestion jobs: claim one, run the pipeline (``ingest/pipeline.py``), complete; any process, any number of them.

A job runs under a lease that the process's lease keeper renews every third of ``job_lease_seconds``
(``services/leases.py``). Nothing of the document is written until ``JobStore.complete``, one
transaction that also checks the lease is still this worker's, so a worker killed at any point leaves
an ``in_progress`` document with no pages or chunks, which another worker claims once the lease
expires. Errors end the job ``failed`` with ``last_error = {code, message}`` in OpenAI's vector store
file codes (see ``error_record``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from calypso import errors
from calypso.config import Settings
from calypso.errors import (
    CalypsoError,
    InsufficientStorage,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    StorageError,
    UnprocessableDocument,
    UnsupportedMediaType,
)
from calypso.ingest.pipeline import PipelineOptions, Prepared, prepare
from calypso.models import Document, IngestJob
from calypso.services.index_sync import NamespaceIndexes
from calypso.services.leases import Heartbeat
from calypso.store.base import DocumentStore, JobStore
from calypso.text.tokenize import encode_terms

log = logging.getLogger("calypso.ingest.worker")

# Least time between two progress writes of one job: a document ingested faster (a page of text: about a
# millisecond) writes none, and its job is only claimed and completed; a long one is still seen moving.
PROGRESS_SECONDS = 0.25
Progress = Callable[[int, int, int], None]  # (pages parsed, passages written, passages in all)


def worker_id(role: str) -> str:
    """A name no other worker anywhere has: host, process, role and a random tail."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}:{uuid.uuid4().hex[:8]}"


def workers_can_take_jobs(settings: Settings) -> bool:
    """Whether anything can take a queued job: a server's own workers (on SQLite only they can: the server
    holds the data directory), or on PostgreSQL `calypso worker` processes."""
    return bool(settings.database_url) or settings.ingest_workers > 0


def error_record(exc: BaseException, filename: str) -> dict[str, Any]:
    """``last_error`` for a failed job: OpenAI's code and a message for the client, plus the original
    error's class, code and param (``error``) so a caller that waited can raise the same error again."""
    if isinstance(exc, UnsupportedMediaType):
        code = "unsupported_file"
    elif isinstance(exc, (InvalidRequest, UnprocessableDocument, PayloadTooLarge)):
        code = "invalid_file"  # empty, corrupt, no text, or past a parse limit (bombs, time, memory)
    elif isinstance(exc, InsufficientStorage):
        code = "insufficient_storage"
    else:
        code = "server_error"
    if isinstance(exc, CalypsoError) and code != "server_error":
        return {
            "code": code,
            "message": exc.message,
            "error": {"class": type(exc).__name__, "code": exc.code, "param": exc.param},
        }
    log.error("ingesting %r failed", filename, exc_info=exc)
    message = f"Ingesting {filename!r} failed on the server; try again later, or ask the operator to check the log."
    return {"code": "server_error", "message": message, "error": {"class": "CalypsoError", "code": None}}


def error_from_record(record: dict[str, Any] | None) -> CalypsoError:
    """The error a failed job's ``last_error`` stands for, to raise where a caller waited for it."""
    record = record or {}
    detail = record.get("error") or {}
    cls = getattr(errors, str(detail.get("class")), None)
    if not (isinstance(cls, type) and issubclass(cls, CalypsoError)):
        cls = CalypsoError
    return cls(str(record.get("message") or "Ingestion failed."), param=detail.get("param"), code=detail.get("code"))


@dataclass
class JobOutcome:
    """How a job ended for this worker: a completed document, an error (the job failed), or neither
    (the job was lost: cancelled, deleted, claimed by another after the lease expired, or released)."""

    document: Document | None = None
    error: CalypsoError | None = None


def job_error(exc: BaseException, record: dict[str, Any]) -> CalypsoError:
    """The error a waiting caller is told of a job that failed with ``exc`` (``record``: its ``error_record``):
    the document's own error as raised, anything else as the server error the record describes."""
    if isinstance(exc, CalypsoError) and record["code"] != "server_error":
        return exc
    return error_from_record(record)


def _stored_terms(prepared: Prepared) -> list[str]:
    """Each chunk's analysed terms as the store keeps them."""
    return [encode_terms(terms, language) for language, terms in prepared.terms]


class JobRunner:
    """Runs claimed ingestion jobs through the pipeline and stores what they made. The writes reach this
    process's indexes through the change feed (``catch_up`` after each), so the writer reads its own writes."""

    def __init__(
        self,
        settings: Settings,
        documents: DocumentStore,
        jobs: JobStore,
        indexes: NamespaceIndexes,
        embed_model: str | None,
    ) -> None:
        """``embed_model``: the model a completed document is queued for (an embedding job), if any."""
        self.settings = settings
        self.jobs = jobs
        self._documents = documents
        self._indexes = indexes
        self._embed_model = embed_model

    @property
    def options(self) -> PipelineOptions:
        """Read at each job, as the settings stand then (tests and operators' reloads change them in place)."""
        return PipelineOptions.from_settings(self.settings)

    def claim(self, owner: str) -> IngestJob | None:
        return self.jobs.claim(owner, self.settings.job_lease_seconds)

    def store_at_once(self, prepared: Prepared, data: bytes) -> None:
        """Store a document prepared before anything was stored, completed, in one transaction
        (``JobStore.add_completed``); raises DuplicateContent when the same bytes landed meanwhile."""
        self.jobs.add_completed(
            prepared.document, data, prepared.pages, prepared.chunks, _stored_terms(prepared), self._embed_model
        )
        self._indexes.catch_up()

    def _complete(self, key: int, owner: str, prepared: Prepared) -> bool:
        """Store a finished job; False when the worker lost it (nothing written)."""
        chunk_keys = self.jobs.complete(
            key, owner, prepared.document, prepared.pages, prepared.chunks, _stored_terms(prepared), self._embed_model
        )
        if chunk_keys is None:
            return False
        self._indexes.catch_up()
        return True

    def _content(self, doc: Document) -> bytes | None:
        """The document's bytes from the store; None when it is gone."""
        try:
            return self._documents.read_content(doc.workspace, doc.id)
        except NotFound:
            return None

    def run(
        self,
        job: IngestJob,
        owner: str,
        *,
        on_progress: Progress | None = None,
        stopping: threading.Event | None = None,
        data: bytes | None = None,
    ) -> JobOutcome:
        """Run one claimed job to its end; never raises for the document's own faults (they fail the job).

        ``data``: the document's bytes when the caller holds them (it just submitted them), else read from the store.
        """
        jobs, key, doc = self.jobs, job.document_key, job.document
        stopping = stopping or threading.Event()
        reported = time.monotonic()  # the claim's time: nothing to report yet

        with Heartbeat(jobs, job, owner, self.settings.job_lease_seconds) as beat:

            def progress(pages: int, written: int, total: int) -> bool:
                """Report to ``on_progress``, and to the store at most every PROGRESS_SECONDS; False to stop: the
                job was lost, or this worker is stopping with passages left (the job is released)."""
                nonlocal reported
                if on_progress is not None:
                    on_progress(pages, written, total)
                if beat.lost.is_set():
                    return False
                if stopping.is_set() and written < total:
                    jobs.release(key, owner)
                    return False
                if time.monotonic() - reported < PROGRESS_SECONDS:
                    return (
                        True  # a lost job is found by the lease keeper, the next report, or complete (writes nothing)
                    )
                reported = time.monotonic()
                return jobs.report_progress(key, owner, pages, written)

            try:
                if data is None and (data := self._content(doc)) is None:
                    return JobOutcome()  # deleted since the claim: nothing left to ingest, nothing to report
                prepared = prepare(doc, data, self.options, progress)
                if prepared is None or not self._complete(key, owner, prepared):
                    return JobOutcome()
                return JobOutcome(document=prepared.document)
            except InsufficientStorage as exc:
                # Retrying will not free a disk: the job fails saying so (the client sees why, and can retry
                # once space is freed); that small write may still fit, thanks to the store's headroom.
                record = error_record(exc, doc.filename)
                try:
                    if not jobs.fail(key, owner, record):
                        return JobOutcome()
                except StorageError:
                    pass  # not even that fits: the lease expires and the job is tried again
                return JobOutcome(error=exc)
            except StorageError:
                raise  # the database, not the document: the lease expires and the job is tried again
            except Exception as exc:  # noqa: BLE001 - the job fails with a code; the worker lives on
                record = error_record(exc, doc.filename)
                if not jobs.fail(key, owner, record):
                    return JobOutcome()
                return JobOutcome(error=job_error(exc, record))


class IngestWorkers:
    """``count`` threads that claim and run jobs until ``stop``: inside `calypso serve` or `calypso worker`."""

    def __init__(self, runner: JobRunner, waiting: threading.Event, count: int, role: str = "worker") -> None:
        """``waiting``: set when a job is submitted in this process, to wake idle workers at once."""
        self.runner, self.waiting, self.count, self.role = runner, waiting, count, role
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for n in range(self.count):
            thread = threading.Thread(target=self._loop, args=(worker_id(f"{self.role}{n}"),), daemon=True)
            thread.name = f"ingest-{self.role}-{n}"
            thread.start()
            self._threads.append(thread)

    def alive(self) -> tuple[int, int]:
        """(threads running, threads started): a thread that died of a bug shows here before users notice."""
        return sum(thread.is_alive() for thread in self._threads), len(self._threads)

    def stop(self, timeout: float | None = None) -> None:
        """Stop claiming; a running job finishes, or is released at its next batch, within ``timeout``."""
        self.stopping.set()
        self.waiting.set()
        for thread in self._threads:
            thread.join(timeout)

    def _loop(self, owner: str) -> None:
        poll = self.runner.settings.job_poll_seconds
        while not self.stopping.is_set():
            try:
                job = self.runner.claim(owner)
            except CalypsoError as exc:  # the database is away, or closing: try again later
                log.warning("claiming an ingestion job failed: %s", exc.message)
                self.stopping.wait(poll)
                continue
            if job is None:
                # Woken at once by an upload in this process; otherwise look again after the poll interval.
                if self.waiting.wait(poll):
                    self.waiting.clear()
                continue
            try:
                outcome = self.runner.run(job, owner, stopping=self.stopping)
            except CalypsoError as exc:  # the store failed mid-job: the lease expires and the job comes back
                log.warning("ingestion job %s stopped: %s", job.document_key, exc.message)
                continue
            state = "completed" if outcome.document else "failed" if outcome.error else "given up"
            log.info("job %s (%s) %s by %s", job.document_key, job.document.filename, state, owner)
