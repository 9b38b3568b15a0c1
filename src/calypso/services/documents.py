"""The documents service: ingest, read, list and delete documents.

The API and the CLI both call it. An upload becomes an ``in_progress`` document with an ingestion
job (``submit``) that a worker (``services/ingest_worker.py``) finishes; ``ingest(wait=True)`` runs
or follows the job to its end, or, for a small text upload, stores it completed in one transaction.
Writes reach this process's in-memory indexes (and every other process's) through the store's change
feed (``services/index_sync.py``); searching them is ``services/search.py``'s. With an embedding model (``embedder``), a completed document is also queued
for vectors, which the embedding workers fill in (``services/embed_worker.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from calypso.citations.links import verify
from calypso.config import Settings
from calypso.embeddings.base import Embedder, check_dimension
from calypso.errors import (
    CalypsoError,
    Conflict,
    EmptyDocument,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
)
from calypso.ingest.crawl import fetch_page
from calypso.ingest.filenames import check_filename, display_filename, display_url
from calypso.ingest.isolation import parse_isolated, parses_in_place
from calypso.ingest.limits import ParseLimits
from calypso.ingest.ocr_share import local_progress
from calypso.ingest.parsers import detect_media_type, parse_document
from calypso.models import (
    Chunk,
    Document,
    IngestJob,
    Listing,
    Order,
    Page,
    ParsedDocument,
    StaticChunking,
    StoredChunk,
)
from calypso.retrieval.tokenize import encode_terms
from calypso.scope import DEFAULT_WORKSPACE, check_namespace
from calypso.services.index_sync import NamespaceIndexes
from calypso.services.ingest_worker import (
    Progress,
    error_from_record,
    error_record,
    job_error,
    prepare,
    run_job,
    worker_id,
)
from calypso.store.base import DocumentStore, DuplicateContent, EmbeddingStore, JobStore

log = logging.getLogger("calypso.documents")


@dataclass
class IngestResult:
    document: Document
    created: bool  # False when identical bytes were already in the namespace


def _expired(document: Document, param: str) -> NotFound:
    return NotFound(
        f"No file with id {document.file_id!r}: it expired at {document.expires_at} (its expires_after) "
        "and is deleted.",
        param=param,
    )


def _stored(terms: list[tuple[str, list[str]]]) -> list[str]:
    """Each chunk's analysed terms as the store keeps them."""
    return [encode_terms(t, language) for language, t in terms]


class DocumentService:
    """Documents and their ingestion: submit, wait, jobs, crawl, cancel, delete, and the reads of documents,
    files, pages and passages. Searching them is ``services.search.SearchService``'s."""

    def __init__(
        self,
        settings: Settings,
        store: DocumentStore,
        signing_secret: bytes,
        jobs: JobStore,
        indexes: NamespaceIndexes,
        *,
        embedder: Embedder | None = None,
        embeddings: EmbeddingStore | None = None,
    ) -> None:
        """``indexes``: this process's in-memory indexes, told to catch up after each write here so the
        writer reads its own writes at once (``SearchService`` searches the same ones)."""
        self.settings = settings
        self.store = store
        self.jobs = jobs
        self.jobs_waiting = threading.Event()  # set on submit: wakes this process's idle workers
        self._signing_secret = signing_secret
        self._indexes = indexes
        self.embedder = embedder if embeddings is not None else None
        self.embeddings = embeddings
        if self.embedder is not None and embeddings is not None:
            # Vectors are stored by model name: the same name with another dimension cannot be searched.
            check_dimension(embeddings.stored_dimension(self.embedder.name), self.embedder)

    # -- ingestion ---------------------------------------------------------
    def submit(
        self,
        data: bytes,
        filename: str,
        namespace: str | None = None,
        *,
        media_type: str | None = None,
        metadata: dict[str, Any] | None = None,
        source_url: str | None = None,
        workspace: str = DEFAULT_WORKSPACE,
        wake_workers: bool = True,
        chunking: StaticChunking | None = None,
        purpose: str | None = None,
        file_id: str | None = None,
        expires_after_seconds: int | None = None,
    ) -> IngestResult:
        """Check an upload cheaply and store it as an ``in_progress`` document with its ingestion job.

        Refuses at once what needs no parsing to refuse (namespace, empty, too large, unknown type);
        the same bytes already in the namespace (in progress or completed) return that document.
        ``chunking``: a static strategy in tokens instead of the server's chunk settings.
        ``file_id``: the id a client already holds for these bytes (a keyless gRPC upload); default a new one.
        ``expires_after_seconds``: the Files API's expires_after (anchored at creation); the same bytes already
        stored keep their own expiry.
        """
        document = self._queued(
            data,
            filename,
            namespace,
            media_type=media_type,
            metadata=metadata,
            source_url=source_url,
            workspace=workspace,
            chunking=chunking,
            purpose=purpose,
            file_id=file_id,
            expires_after_seconds=expires_after_seconds,
        )
        try:
            stored = self.jobs.submit(document, data)
        except DuplicateContent as duplicate:  # already here, or landed meanwhile (a concurrent upload)
            return IngestResult(duplicate.existing, created=False)
        if wake_workers:
            self.jobs_waiting.set()
        return IngestResult(stored, created=True)

    def _queued(
        self,
        data: bytes,
        filename: str,
        namespace: str | None,
        *,
        media_type: str | None,
        metadata: dict[str, Any] | None,
        source_url: str | None,
        workspace: str,
        chunking: StaticChunking | None,
        purpose: str | None,
        file_id: str | None,
        expires_after_seconds: int | None,
    ) -> Document:
        """The upload as an ``in_progress`` document, once the checks that need no parsing pass (``submit``)."""
        namespace = check_namespace(namespace or self.settings.default_namespace)
        filename = self._display_name(filename, source_url)
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
        detected_type = detect_media_type(data, filename, media_type)  # magic bytes and names: no parsing
        doc_uuid = uuid.uuid4()
        created_at = int(time.time())
        return Document(
            id=str(doc_uuid),
            file_id=file_id or f"file-{doc_uuid.hex}",
            workspace=workspace,
            namespace=namespace,
            filename=filename,
            media_type=detected_type,
            bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            created_at=created_at,
            page_count=0,
            chunk_count=0,
            source_url=source_url,
            metadata=dict(metadata or {}),
            status="in_progress",
            chunking=chunking,
            purpose=purpose,
            expires_at=created_at + expires_after_seconds if expires_after_seconds is not None else None,
        )

    @staticmethod
    def _display_name(filename: str, source_url: str | None) -> str:
        """The name the document is shown under (``ingest/filenames.py``); the name as sent only in the log, escaped."""
        shown = display_url(filename) if source_url else check_filename(display_filename(filename))
        if shown != filename:
            log.info("file name %r stored as %r", filename, shown)
        return shown

    def ingest(
        self,
        data: bytes,
        filename: str,
        namespace: str | None = None,
        *,
        media_type: str | None = None,
        metadata: dict[str, Any] | None = None,
        source_url: str | None = None,
        workspace: str = DEFAULT_WORKSPACE,
        wait: bool = True,
        on_progress: Progress | None = None,
        purpose: str | None = None,
        expires_after_seconds: int | None = None,
    ) -> IngestResult:
        """Submit one document; with ``wait``, return only when its job ended: all or nothing.

        Waiting, a small text upload (``parses_in_place``) is parsed before anything is stored, then stored
        completed in one transaction; any other is stored with its job already claimed, which this thread
        runs. Bytes already in progress here are followed: their job claimed when it can be, else polled
        until another worker ends it. A failed job's document is deleted and its error raised, as if parsed
        right here.
        """
        if not wait:
            return self.submit(
                data,
                filename,
                namespace,
                media_type=media_type,
                metadata=metadata,
                source_url=source_url,
                workspace=workspace,
                purpose=purpose,
                expires_after_seconds=expires_after_seconds,
            )
        document = self._queued(
            data,
            filename,
            namespace,
            media_type=media_type,
            metadata=metadata,
            source_url=source_url,
            workspace=workspace,
            chunking=None,
            purpose=purpose,
            file_id=None,
            expires_after_seconds=expires_after_seconds,
        )
        if parses_in_place(data, document.filename, document.media_type):
            return self._ingest_at_once(document, data, on_progress)
        owner = worker_id("inline")
        try:  # stored with its job already claimed by this thread: one transaction, and no worker woken
            job = self.jobs.submit_claimed(document, data, owner, self.settings.job_lease_seconds)
        except DuplicateContent as duplicate:  # already here, or landed meanwhile (a concurrent upload)
            return self._existing(duplicate.existing, on_progress)
        return self._run(IngestResult(job.document, created=True), job, owner, data, on_progress)

    def _ingest_at_once(self, document: Document, data: bytes, on_progress: Progress | None) -> IngestResult:
        """A small text upload (``parses_in_place``): parsed, chunked and analysed before anything is stored, then
        stored completed in one transaction (``JobStore.add_completed``). A failure stores nothing; its error is
        the one a failed job would give."""
        existing = self.store.find_duplicate(document.workspace, document.namespace, document.sha256)
        if existing is not None and existing.status in ("in_progress", "completed"):
            return self._existing(existing, on_progress)  # as submit would find it: not parsed again

        def progress(pages: int, written: int, total: int) -> bool:
            if on_progress is not None:
                on_progress(pages, written, total)
            return True

        try:
            prepared = prepare(self, document, data, progress)
        except Exception as exc:  # noqa: BLE001 - told as a failed job's error is
            error = job_error(exc, error_record(exc, document.filename))
            if error is exc:
                raise
            raise error from exc
        assert prepared is not None  # only progress stops it, and this one never does
        try:
            self.jobs.add_completed(
                prepared.document, data, prepared.pages, prepared.chunks, _stored(prepared.terms), self._embed_model
            )
        except DuplicateContent as duplicate:  # landed meanwhile (a concurrent upload)
            return self._existing(duplicate.existing, on_progress)
        self._indexes.catch_up()  # through the feed, like everyone else's writes: this process reads its own
        return IngestResult(prepared.document, created=True)

    def _existing(self, document: Document, on_progress: Progress | None) -> IngestResult:
        """The document already holding an upload's bytes, followed to its end when it is in progress."""
        result = IngestResult(document, created=False)
        return result if document.status != "in_progress" else self._wait(result, on_progress)

    def _wait(self, result: IngestResult, on_progress: Progress | None) -> IngestResult:
        """Follow an in-progress document to its end: run its job here when it can be claimed, else poll."""
        doc = result.document
        key = self.store.document_key(doc.workspace, doc.id)
        owner = worker_id("inline")
        job = self.jobs.claim_document(key, owner, self.settings.job_lease_seconds) if key is not None else None
        if job is not None:
            return self._run(result, job, owner, None, on_progress)
        return self._follow(result)

    def _run(
        self, result: IngestResult, job: IngestJob, owner: str, data: bytes | None, on_progress: Progress | None
    ) -> IngestResult:
        """Run a job this thread claimed (``data``: the upload's bytes, when at hand); all or nothing."""
        doc = result.document
        try:
            outcome = run_job(self, job, owner, on_progress=on_progress, data=data)
        except CalypsoError:  # the store failed: a waiting caller is promised nothing half-stored
            if result.created:
                with contextlib.suppress(CalypsoError):  # still down: the job is retried after its lease
                    self.delete(doc.id, doc.workspace)
            raise
        if outcome.document is not None:
            return IngestResult(outcome.document, result.created)
        if outcome.error is not None:
            if result.created:
                self.delete(doc.id, doc.workspace)
            raise outcome.error
        return self._follow(result)  # another worker took the job from us

    def _follow(self, result: IngestResult) -> IngestResult:
        """Poll a document another worker is ingesting until it ends."""
        doc = result.document
        delay = 0.02
        while True:
            current = self.store.get_document(doc.workspace, doc.id)
            if current is None:
                raise NotFound(f"Document {doc.id} was deleted while it was being ingested.", param="document_id")
            if current.status == "completed":
                return IngestResult(current, result.created)
            if current.status == "failed":
                if result.created:
                    self.delete(doc.id, doc.workspace)
                raise error_from_record(current.last_error)
            if current.status == "cancelled":
                raise Conflict(f"The ingestion of {doc.filename!r} was cancelled.", param="document_id")
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def complete_job(
        self,
        document_key: int,
        owner: str,
        document: Document,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        terms: list[tuple[str, list[str]]],
    ) -> list[int] | None:
        """Store a finished job (None: the worker lost it, nothing written); loaded indexes take it from the feed."""
        chunk_keys = self.jobs.complete(document_key, owner, document, pages, chunks, _stored(terms), self._embed_model)
        if chunk_keys is not None:
            self._indexes.catch_up()  # through the feed, like everyone else's writes: this process reads its own
        return chunk_keys

    @property
    def _embed_model(self) -> str | None:
        """The model a completed document is queued for (an embedding job), if any."""
        return self.embedder.name if self.embedder is not None else None

    def cancel(self, document_id: str, workspace: str = DEFAULT_WORKSPACE) -> Document:
        """Cancel an in-progress document; Conflict (409) when it already ended."""
        cancelled = self.jobs.cancel(workspace, document_id)
        if cancelled is not None:
            return cancelled
        current = self.get(document_id, workspace)
        raise Conflict(
            f"Document {document_id} is {current.status}; only an in_progress document can be cancelled "
            "(delete it instead).",
            param="document_id",
            code="document_not_in_progress",
        )

    @property
    def jobs_can_be_taken(self) -> bool:
        """Whether anything can take a queued job: a server's own workers (on SQLite only they can: the server
        holds the data directory), or on PostgreSQL `calypso worker` processes."""
        return bool(self.settings.database_url) or self.settings.ingest_workers > 0

    def jobs_of(self, documents: Sequence[Document]) -> dict[str, IngestJob]:
        """The live jobs (with progress) of those documents that are in progress, by document id."""
        by_workspace: dict[str, list[str]] = {}
        for doc in documents:
            if doc.status == "in_progress":
                by_workspace.setdefault(doc.workspace, []).append(doc.id)
        found: dict[str, IngestJob] = {}
        for workspace, ids in by_workspace.items():
            found.update(self.jobs.jobs(workspace, ids))
        return found

    def embedding_progress(self, documents: Sequence[Document]) -> dict[str, int]:
        """Passages embedded by the configured model so far, by document id (empty without a model)."""
        if self.embedder is None or self.embeddings is None or not documents:
            return {}
        by_workspace: dict[str, list[str]] = {}
        for doc in documents:
            if doc.status == "completed":
                by_workspace.setdefault(doc.workspace, []).append(doc.id)
        keys: dict[int, str] = {}
        for workspace, ids in by_workspace.items():
            keys.update((key, doc_id) for doc_id, key in self.store.document_keys(workspace, ids).items())
        counts = self.embeddings.embedded_counts(list(keys), self.embedder.name)
        return {doc_id: counts.get(key, 0) for key, doc_id in keys.items()}

    def reindex(self, workspace: str | None = None) -> int:
        """Drop every stored vector and queue every completed document for the configured model; returns how many."""
        if self.embedder is None or self.embeddings is None:
            raise InvalidRequest(
                "No embedding model is configured (CALYPSO_EMBEDDING_MODEL is 'none' or its packages are missing); "
                "there is nothing to reindex with.",
                param="embedding_model",
            )
        queued = self.embeddings.reset(self.embedder.name, workspace)
        self.jobs_waiting.set()
        return queued

    def delete(self, document_id: str, workspace: str = DEFAULT_WORKSPACE) -> Document:
        deleted = self.store.delete_document(workspace, document_id)
        if deleted is None:
            raise NotFound(f"No document with id {document_id!r}.", param="document_id")
        self._indexes.catch_up()
        return deleted

    def get(self, document_id: str, workspace: str = DEFAULT_WORKSPACE) -> Document:
        document = self.store.get_document(workspace, document_id)
        if document is None:
            raise NotFound(f"No document with id {document_id!r}.", param="document_id")
        if document.expired(time.time()):
            raise _expired(document, "document_id")
        return document

    def get_by_file_id(
        self, file_id: str, workspace: str = DEFAULT_WORKSPACE, *, expired_too: bool = False
    ) -> Document:
        """The file; an expired one (its expires_after passed, the sweep not yet by) is a 404 unless ``expired_too``."""
        document = self.store.get_document_by_file_id(workspace, file_id)
        if document is None:
            raise NotFound(f"No file with id {file_id!r}.", param="file_id")
        if not expired_too and document.expired(time.time()):
            raise _expired(document, "file_id")
        return document

    def parse(
        self,
        data: bytes,
        filename: str,
        media_type: str | None,
        on_pages: Callable[[int, int], None] | None = None,
    ) -> tuple[ParsedDocument, str]:
        """Parse in child processes (``parse_processes``), under the parse limits; ``(parsed, media type)``.
        ``on_pages(read, to read)`` follows a scan's OCR page by page."""
        settings = self.settings
        limits = ParseLimits.from_settings(settings)
        if settings.parse_processes == 0:
            with local_progress(on_pages):
                return parse_document(data, filename, media_type, limits)
        return parse_isolated(
            data,
            filename,
            media_type,
            limits,
            timeout=settings.parse_timeout_seconds,
            memory_bytes=settings.parse_memory_bytes,
            processes=settings.parse_processes,
            on_pages=on_pages,
        )

    def crawl(
        self,
        url: str,
        namespace: str | None,
        *,
        metadata: dict[str, Any] | None = None,
        workspace: str = DEFAULT_WORKSPACE,
        wait: bool = True,
    ) -> IngestResult:
        """Fetch one http(s) page (refusing private addresses unless allowed) and ingest it under its URL."""
        namespace = check_namespace(namespace or self.settings.default_namespace)
        page = fetch_page(
            url,
            timeout=self.settings.crawl_timeout_seconds,
            max_bytes=self.settings.max_upload_bytes,
            allow_private=self.settings.crawl_allow_private,
        )
        return self.ingest(
            page.content,
            page.url,
            namespace,
            media_type=page.media_type,
            metadata=metadata,
            source_url=page.url,
            workspace=workspace,
            wait=wait,
        )

    # -- reads -------------------------------------------------------------
    def list_documents(
        self,
        namespace: str | None,
        limit: int,
        after: str | None = None,
        order: Order = "desc",
        workspace: str = DEFAULT_WORKSPACE,
    ) -> Listing[Document]:
        """Documents of one namespace (or all), ``after`` a document id."""
        if namespace is not None:
            check_namespace(namespace)
        return self.store.list_documents(workspace, namespace, limit, after, order)

    def list_files(
        self,
        limit: int,
        after_file_id: str | None = None,
        order: Order = "desc",
        workspace: str = DEFAULT_WORKSPACE,
        purpose: str | None = None,
    ) -> Listing[Document]:
        """The Files API's files: the documents of the default namespace (where ``/v1/files`` uploads land,
        attached to vector stores or not), leaving out copies a store made of a file attached from elsewhere.
        Documents of other namespaces are files too (retrieve, content, delete) but are not listed here.
        The cursor is a file id."""
        after = self.get_by_file_id(after_file_id, workspace).id if after_file_id else None
        namespace = self.settings.default_namespace
        return self.store.list_documents(
            workspace, namespace, limit, after, order, without_copies=True, purpose=purpose
        )

    def chunks(
        self, document_id: str, limit: int, after: int | None = None, workspace: str = DEFAULT_WORKSPACE
    ) -> Listing[StoredChunk]:
        """A document's passages in order, after chunk index ``after``; NotFound for an unknown document."""
        self.get(document_id, workspace)
        return self.store.list_chunks(workspace, document_id, limit, after)

    def pages(self, document_id: str, workspace: str = DEFAULT_WORKSPACE) -> list[Page]:
        return self.store.get_pages(workspace, document_id)

    def content(self, document: Document) -> bytes:
        return self.store.read_content(document.workspace, document.id)

    def signed_file(
        self, file_id: str, expires: int | None, signature: str | None, missing_is_404: bool = False
    ) -> Document:
        """The file a signed source link names, in whatever workspace signed it; 403 when invalid or expired.

        ``missing_is_404``: a file that does not exist (deleted since the link was made) is NotFound
        rather than 403, so the passage viewer can say so.
        """
        document = self.store.find_file(file_id)
        if document is not None and document.expired(time.time()):
            raise _expired(document, "file_id")
        if document is None and missing_is_404:
            raise NotFound(f"No file {file_id!r}: it was deleted, or the link is mistyped.", param="file_id")
        if (
            document is None
            or expires is None
            or not signature
            or not verify(self._signing_secret, file_id, document.workspace, expires, signature)
        ):
            raise PermissionDenied(
                "This source link is invalid or has expired; ask for the answer again to get a fresh link.",
                code="invalid_signature",
            )
        return document

    def namespaces(self, workspace: str = DEFAULT_WORKSPACE) -> list[str]:
        return self.store.namespaces(workspace)

    def catch_up(self) -> int:
        """Apply the store's change feed to this process's loaded indexes now, so its searches see what was
        just written (the follower thread does so on its own within a second)."""
        return self._indexes.catch_up()
