"""Ingestion workers: claim a job, parse, chunk, analyse, complete; any process, any number of them.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from calypso import errors
from calypso.errors import (
    CalypsoError,
    EmptyDocument,
    InsufficientStorage,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    StorageError,
    UnprocessableDocument,
    UnsupportedMediaType,
)
from calypso.ingest.chunking import chunk_document
from calypso.models import Document, IngestJob
from calypso.retrieval.tokenize import analyze_many
from calypso.services.leases import Heartbeat
from calypso.store.base import JobStore

if TYPE_CHECKING:
    from calypso.config import Settings
    from calypso.models import Chunk, Page, ParsedDocument
    from calypso.store.base import DocumentStore

log = logging.getLogger("calypso.ingest.worker")

PASSAGE_BATCH = 256  # passages analysed between progress reports (and checks that the lease still holds)
# Least time between two progress writes of one job: a document ingested faster (a page of text: about a
# millisecond) writes none, and its job is only claimed and completed; a long one is still seen moving.
PROGRESS_SECONDS = 0.25
Progress = Callable[[int, int, int], None]  # (pages parsed, passages written, passages in all)


def worker_id(role: str) -> str:
    """A name no other worker anywhere has: host, process, role and a random tail."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}:{uuid.uuid4().hex[:8]}"


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


class JobHost(Protocol):
    """What a job needs of the documents service that hosts it (``DocumentService`` is one): its settings,
    stores, parser, and the one call that stores a finished job."""

    settings: Settings
    store: DocumentStore
    jobs: JobStore
    jobs_waiting: threading.Event  # set when a job is submitted: wakes idle workers

    def parse(
        self,
        data: bytes,
        filename: str,
        media_type: str | None,
        on_pages: Callable[[int, int], None] | None = None,
    ) -> tuple[ParsedDocument, str]: ...

    def complete_job(
        self,
        document_key: int,
        owner: str,
        document: Document,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        terms: list[tuple[str, list[str]]],
    ) -> list[int] | None: ...


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


@dataclass
class Prepared:
    """A document ready to store: completed (detected type, title, metadata, counts), with its pages, chunks and
    their analysed terms, ``(language, terms)`` per chunk."""

    document: Document
    pages: Sequence[Page]
    chunks: list[Chunk]
    terms: list[tuple[str, list[str]]]


def prepare(service: JobHost, doc: Document, data: bytes, progress: Callable[[int, int, int], bool]) -> Prepared | None:
    """Parse, chunk and analyse ``doc``'s bytes, writing nothing; None once ``progress`` says stop.

    ``progress(pages parsed, passages analysed, passages in all)`` runs after chunking and after each batch of
    PASSAGE_BATCH passages analysed; it returns False to stop there. While a scan is recognised, it runs after
    each page with the pages read so far (and no passages yet): a stop then waits for the parse to end.
    """
    settings = service.settings

    def pages_read(read: int, total: int) -> None:
        progress(read, 0, 0)

    parsed, detected = service.parse(data, doc.filename, doc.media_type, on_pages=pages_read)
    if doc.chunking is not None:  # a static strategy asked for when attached to a vector store
        static = doc.chunking
        chunks = chunk_document(parsed, static.max_chunk_size_tokens, static.chunk_overlap_tokens, "tokens")
    else:
        chunks = chunk_document(parsed, settings.chunk_size, settings.chunk_overlap)
    if not chunks:
        raise EmptyDocument(f"{doc.filename} contains no text to index.", param="file")
    if not progress(len(parsed.pages), 0, len(chunks)):
        return None
    terms: list[tuple[str, list[str]]] = []
    # Analysed once here, stored with the chunks, indexed from the store; in batches, to report progress.
    for start in range(0, len(chunks), PASSAGE_BATCH):
        terms.extend(analyze_many(c.text for c in chunks[start : start + PASSAGE_BATCH]))
        if not progress(len(parsed.pages), len(terms), len(chunks)):
            return None
    finished = replace(
        doc,
        media_type=detected,
        title=parsed.title,
        metadata={**parsed.metadata, **doc.metadata},
        page_count=len(parsed.pages),
        chunk_count=len(chunks),
        status="completed",
    )
    return Prepared(finished, parsed.pages, chunks, terms)


def _content(store: DocumentStore, doc: Document) -> bytes | None:
    """The document's bytes from the store; None when it is gone."""
    try:
        return store.read_content(doc.workspace, doc.id)
    except NotFound:
        return None


def run_job(
    service: JobHost,
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
    settings, jobs, key, doc = service.settings, service.jobs, job.document_key, job.document
    stopping = stopping or threading.Event()
    reported = time.monotonic()  # the claim's time: nothing to report yet

    with Heartbeat(jobs, job, owner, settings.job_lease_seconds) as beat:

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
                return True  # a lost job is found by the lease keeper, the next report, or complete (writes nothing)
            reported = time.monotonic()
            return jobs.report_progress(key, owner, pages, written)

        try:
            if data is None and (data := _content(service.store, doc)) is None:
                return JobOutcome()  # deleted since the claim: nothing left to ingest, nothing to report
            prepared = prepare(service, doc, data, progress)
            if prepared is None:
                return JobOutcome()
            finished = prepared.document
            if service.complete_job(key, owner, finished, prepared.pages, prepared.chunks, prepared.terms) is None:
                return JobOutcome()
            return JobOutcome(document=finished)
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

    def __init__(self, service: JobHost, count: int, role: str = "worker") -> None:
        self.service, self.count, self.role = service, count, role
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
        self.service.jobs_waiting.set()
        for thread in self._threads:
            thread.join(timeout)

    def _loop(self, owner: str) -> None:
        settings = self.service.settings
        while not self.stopping.is_set():
            try:
                job = self.service.jobs.claim(owner, settings.job_lease_seconds)
            except CalypsoError as exc:  # the database is away, or closing: try again later
                log.warning("claiming an ingestion job failed: %s", exc.message)
                self.stopping.wait(settings.job_poll_seconds)
                continue
            if job is None:
                # Woken at once by an upload in this process; otherwise look again after the poll interval.
                if self.service.jobs_waiting.wait(settings.job_poll_seconds):
                    self.service.jobs_waiting.clear()
                continue
            try:
                outcome = run_job(self.service, job, owner, stopping=self.stopping)
            except CalypsoError as exc:  # the store failed mid-job: the lease expires and the job comes back
                log.warning("ingestion job %s stopped: %s", job.document_key, exc.message)
                continue
            state = "completed" if outcome.document else "failed" if outcome.error else "given up"
            log.info("job %s (%s) %s by %s", job.document_key, job.document.filename, state, owner)
