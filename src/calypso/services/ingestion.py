"""The ingestion service: what an upload becomes, and following it to its end.

An upload becomes an ``in_progress`` document with an ingestion job (``submit``) that a worker
(``services/ingest_worker.py``) finishes; ``ingest(wait=True)`` runs or follows the job to its end, or,
for a small text upload, stores it completed in one transaction. The media type is detected here, once:
every later step reads the document's. Writes reach this process's indexes (and every other process's)
through the store's change feed (``services/index_sync.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from calypso.config import Settings
from calypso.errors import CalypsoError, Conflict, EmptyDocument, NotFound, PayloadTooLarge
from calypso.ingest.crawl import fetch_page
from calypso.ingest.filenames import check_filename, display_filename, display_url
from calypso.ingest.isolation import parses_in_place
from calypso.ingest.parsers import detect_media_type
from calypso.ingest.pipeline import prepare
from calypso.models import Document, IngestJob, QueueStats, StaticChunking
from calypso.scope import DEFAULT_WORKSPACE, check_namespace
from calypso.services.ingest_worker import (
    IngestWorkers,
    JobRunner,
    Progress,
    error_from_record,
    error_record,
    job_error,
    worker_id,
    workers_can_take_jobs,
)
from calypso.store.base import DocumentStore, DuplicateContent, JobStore

log = logging.getLogger("calypso.ingestion")


@dataclass(frozen=True)
class Upload:
    """One upload as a surface received it: the bytes, the name it came under, and where and how to keep it."""

    data: bytes
    filename: str
    namespace: str | None = None  # None: the server's default namespace
    media_type: str | None = None  # the client's claim; the type is detected from the bytes and the name
    metadata: dict[str, Any] = field(default_factory=dict)
    source_url: str | None = None  # a crawled page: its URL is the name shown
    workspace: str = DEFAULT_WORKSPACE
    purpose: str | None = None  # the Files API's purpose
    chunking: StaticChunking | None = None  # a static strategy in tokens instead of the server's chunk settings
    file_id: str | None = None  # the id a client already holds for these bytes (a keyless gRPC upload)
    # The Files API's expires_after, anchored at creation; the same bytes already stored keep their own expiry.
    expires_after_seconds: int | None = None


@dataclass
class IngestResult:
    document: Document
    created: bool  # False when identical bytes were already in the namespace


class IngestionService:
    """Submit, ingest (waiting or not), crawl, cancel; the jobs' progress and queue; the worker threads."""

    def __init__(self, settings: Settings, documents: DocumentStore, jobs: JobStore, runner: JobRunner) -> None:
        self.settings = settings
        self._documents = documents
        self._jobs = jobs
        self._runner = runner
        self._waiting = threading.Event()  # set on submit: wakes this process's idle workers

    def workers(self, count: int, role: str) -> IngestWorkers:
        """``count`` worker threads over this service's jobs (started by the caller)."""
        return IngestWorkers(self._runner, self._waiting, count, role)

    # -- submitting ------------------------------------------------------
    def submit(self, upload: Upload, *, wake_workers: bool = True) -> IngestResult:
        """Check an upload cheaply and store it as an ``in_progress`` document with its ingestion job.

        Refuses at once what needs no parsing to refuse (namespace, empty, too large, unknown type);
        the same bytes already in the namespace (in progress or completed) return that document.
        """
        document = self._queued(upload)
        try:
            stored = self._jobs.submit(document, upload.data)
        except DuplicateContent as duplicate:  # already here, or landed meanwhile (a concurrent upload)
            return IngestResult(duplicate.existing, created=False)
        if wake_workers:
            self._waiting.set()
        return IngestResult(stored, created=True)

    def ingest(self, upload: Upload, *, wait: bool = True, on_progress: Progress | None = None) -> IngestResult:
        """Submit one document; with ``wait``, return only when its job ended: all or nothing.

        Waiting, a small text upload (``parses_in_place``) is parsed before anything is stored, then stored
        completed in one transaction; any other is stored with its job already claimed, which this thread
        runs. Bytes already in progress here are followed: their job claimed when it can be, else polled
        until another worker ends it. A failed job's document is deleted and its error raised, as if parsed
        right here.
        """
        if not wait:
            return self.submit(upload)
        document = self._queued(upload)
        if parses_in_place(upload.data, document.filename, document.media_type):
            return self._ingest_at_once(document, upload.data, on_progress)
        owner = worker_id("inline")
        try:  # stored with its job already claimed by this thread: one transaction, and no worker woken
            job = self._jobs.submit_claimed(document, upload.data, owner, self.settings.job_lease_seconds)
        except DuplicateContent as duplicate:  # already here, or landed meanwhile (a concurrent upload)
            return self._existing(duplicate.existing, on_progress)
        return self._run(IngestResult(job.document, created=True), job, owner, upload.data, on_progress)

    def crawl(
        self,
        url: str,
        namespace: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        workspace: str = DEFAULT_WORKSPACE,
        wait: bool = True,
    ) -> IngestResult:
        """Fetch one http(s) page (refusing private addresses unless allowed) and ingest it under its URL."""
        check_namespace(self.settings.namespace_or_default(namespace))  # before fetching anything
        page = fetch_page(
            url,
            timeout=self.settings.crawl_timeout_seconds,
            max_bytes=self.settings.max_upload_bytes,
            allow_private=self.settings.crawl_allow_private,
        )
        fetched = Upload(
            page.content,
            page.url,
            namespace,
            media_type=page.media_type,
            metadata=dict(metadata or {}),
            source_url=page.url,
            workspace=workspace,
        )
        return self.ingest(fetched, wait=wait)

    def _queued(self, upload: Upload) -> Document:
        """The upload as an ``in_progress`` document, once the checks that need no parsing pass."""
        namespace = check_namespace(self.settings.namespace_or_default(upload.namespace))
        filename = _display_name(upload.filename, upload.source_url)
        data = upload.data
        if not data:
            raise EmptyDocument(
                f"{filename or 'The upload'} is empty (0 bytes); upload a file with content.", param="file"
            )
        if len(data) > self.settings.max_upload_bytes:
            raise PayloadTooLarge(
                f"{filename} is {len(data):,} bytes; the limit is {self.settings.max_upload_bytes:,} "
                "(setting CALYPSO_MAX_UPLOAD_BYTES).",
                param="file",
            )
        detected_type = detect_media_type(data, filename, upload.media_type)  # magic bytes and names: no parsing
        doc_uuid = uuid.uuid4()
        created_at = int(time.time())
        expires = upload.expires_after_seconds
        return Document(
            id=str(doc_uuid),
            file_id=upload.file_id or f"file-{doc_uuid.hex}",
            workspace=upload.workspace,
            namespace=namespace,
            filename=filename,
            media_type=detected_type,
            bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            created_at=created_at,
            page_count=0,
            chunk_count=0,
            source_url=upload.source_url,
            metadata=dict(upload.metadata),
            status="in_progress",
            chunking=upload.chunking,
            purpose=upload.purpose,
            expires_at=created_at + expires if expires is not None else None,
        )

    # -- running and following -------------------------------------------
    def _ingest_at_once(self, document: Document, data: bytes, on_progress: Progress | None) -> IngestResult:
        """A small text upload (``parses_in_place``): parsed, chunked and analysed before anything is stored, then
        stored completed in one transaction. A failure stores nothing; its error is the one a failed job would give."""
        existing = self._documents.find_duplicate(document.workspace, document.namespace, document.sha256)
        if existing is not None and existing.status in ("in_progress", "completed"):
            return self._existing(existing, on_progress)  # as submit would find it: not parsed again

        def progress(pages: int, written: int, total: int) -> bool:
            if on_progress is not None:
                on_progress(pages, written, total)
            return True

        try:
            prepared = prepare(document, data, self._runner.options, progress)
        except Exception as exc:  # noqa: BLE001 - told as a failed job's error is
            error = job_error(exc, error_record(exc, document.filename))
            if error is exc:
                raise
            raise error from exc
        assert prepared is not None  # only progress stops it, and this one never does
        try:
            self._runner.store_at_once(prepared, data)
        except DuplicateContent as duplicate:  # landed meanwhile (a concurrent upload)
            return self._existing(duplicate.existing, on_progress)
        return IngestResult(prepared.document, created=True)

    def _existing(self, document: Document, on_progress: Progress | None) -> IngestResult:
        """The document already holding an upload's bytes, followed to its end when it is in progress."""
        result = IngestResult(document, created=False)
        return result if document.status != "in_progress" else self._wait(result, on_progress)

    def _wait(self, result: IngestResult, on_progress: Progress | None) -> IngestResult:
        """Follow an in-progress document to its end: run its job here when it can be claimed, else poll."""
        doc = result.document
        key = self._documents.document_key(doc.workspace, doc.id)
        owner = worker_id("inline")
        job = self._jobs.claim_document(key, owner, self.settings.job_lease_seconds) if key is not None else None
        if job is not None:
            return self._run(result, job, owner, None, on_progress)
        return self._follow(result)

    def _run(
        self, result: IngestResult, job: IngestJob, owner: str, data: bytes | None, on_progress: Progress | None
    ) -> IngestResult:
        """Run a job this thread claimed (``data``: the upload's bytes, when at hand); all or nothing."""
        try:
            outcome = self._runner.run(job, owner, on_progress=on_progress, data=data)
        except CalypsoError:  # the store failed: a waiting caller is promised nothing half-stored
            if result.created:
                with contextlib.suppress(CalypsoError):  # still down: the job is retried after its lease
                    self._discard(result.document)
            raise
        if outcome.document is not None:
            return IngestResult(outcome.document, result.created)
        if outcome.error is not None:
            if result.created:
                self._discard(result.document)
            raise outcome.error
        return self._follow(result)  # another worker took the job from us

    def _follow(self, result: IngestResult) -> IngestResult:
        """Poll a document another worker is ingesting until it ends."""
        doc = result.document
        delay = 0.02
        while True:
            current = self._documents.get_document(doc.workspace, doc.id)
            if current is None:
                raise NotFound(f"Document {doc.id} was deleted while it was being ingested.", param="document_id")
            if current.status == "completed":
                return IngestResult(current, result.created)
            if current.status == "failed":
                if result.created:
                    self._discard(doc)
                raise error_from_record(current.last_error)
            if current.status == "cancelled":
                raise Conflict(f"The ingestion of {doc.filename!r} was cancelled.", param="document_id")
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def _discard(self, doc: Document) -> None:
        """Delete a document this caller created and waited for in vain: waiting promises all or nothing."""
        self._documents.delete_document(doc.workspace, doc.id)

    # -- jobs ------------------------------------------------------------
    def cancel(self, document_id: str, workspace: str = DEFAULT_WORKSPACE) -> Document:
        """Cancel an in-progress document; Conflict (409) when it already ended."""
        cancelled = self._jobs.cancel(workspace, document_id)
        if cancelled is not None:
            return cancelled
        current = self._documents.get_document(workspace, document_id)
        if current is None:
            raise NotFound(f"No document with id {document_id!r}.", param="document_id")
        raise Conflict(
            f"Document {document_id} is {current.status}; only an in_progress document can be cancelled "
            "(delete it instead).",
            param="document_id",
            code="document_not_in_progress",
        )

    @property
    def jobs_can_be_taken(self) -> bool:
        return workers_can_take_jobs(self.settings)

    def queue_stats(self) -> QueueStats:
        """Jobs queued and running, and the oldest one's age (metrics, readiness)."""
        return self._jobs.queue_stats()


def _display_name(filename: str, source_url: str | None) -> str:
    """The name the document is shown under (``ingest/filenames.py``); the name as sent only in the log, escaped."""
    shown = display_url(filename) if source_url else check_filename(display_filename(filename))
    if shown != filename:
        log.info("file name %r stored as %r", filename, shown)
    return shown
