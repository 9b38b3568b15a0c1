"""The documents service: read, list and delete documents and files; their statuses; signed source links.

The API and the CLI both call it. What an upload becomes is ``services/ingestion.py``'s; vectors are
``services/vectors.py``'s; searching is ``services/search.py``'s. A delete reaches this process's indexes
at once through the change feed (``catch_up``), and every other process's within a second.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from calypso.citations.links import verify
from calypso.config import Settings
from calypso.errors import NotFound, PermissionDenied
from calypso.models import Document, IngestJob, Listing, Order, Page, StoredChunk
from calypso.scope import DEFAULT_WORKSPACE, check_namespace
from calypso.services.index_sync import NamespaceIndexes
from calypso.services.ingest_worker import workers_can_take_jobs
from calypso.services.vectors import VectorService
from calypso.store.base import DocumentStore, JobStore


@dataclass(frozen=True)
class DocumentStatus:
    """A document with what its status shows: its ingestion job (in progress), its passages embedded so far by
    ``model``, and whether any worker can take a queued job."""

    document: Document
    job: IngestJob | None
    embedded: int | None
    model: str | None
    workers: bool


def _expired(document: Document, param: str) -> NotFound:
    return NotFound(
        f"No file with id {document.file_id!r}: it expired at {document.expires_at} (its expires_after) "
        "and is deleted.",
        param=param,
    )


class DocumentService:
    """The reads of documents, files, pages and passages; deleting them; their statuses and signed links."""

    def __init__(
        self,
        settings: Settings,
        store: DocumentStore,
        jobs: JobStore,
        vectors: VectorService,
        indexes: NamespaceIndexes,
        signing_secret: bytes,
    ) -> None:
        self.settings = settings
        self._store = store
        self._jobs = jobs
        self._vectors = vectors
        self._indexes = indexes
        self._signing_secret = signing_secret

    def statuses(self, documents: Sequence[Document]) -> list[DocumentStatus]:
        """Each document with its live job (when in progress) and its embedding progress (when completed)."""
        by_workspace: dict[str, list[str]] = {}
        for doc in documents:
            if doc.status == "in_progress":
                by_workspace.setdefault(doc.workspace, []).append(doc.id)
        jobs: dict[str, IngestJob] = {}
        for workspace, ids in by_workspace.items():
            jobs.update(self._jobs.jobs(workspace, ids))
        embedded = self._vectors.progress(documents)
        model, workers = self._vectors.model, workers_can_take_jobs(self.settings)
        return [DocumentStatus(d, jobs.get(d.id), embedded.get(d.id), model, workers) for d in documents]

    def delete(self, document_id: str, workspace: str = DEFAULT_WORKSPACE) -> Document:
        deleted = self._store.delete_document(workspace, document_id)
        if deleted is None:
            raise NotFound(f"No document with id {document_id!r}.", param="document_id")
        self._indexes.catch_up()  # this process reads its own delete at once
        return deleted

    def get(self, document_id: str, workspace: str = DEFAULT_WORKSPACE) -> Document:
        document = self._store.get_document(workspace, document_id)
        if document is None:
            raise NotFound(f"No document with id {document_id!r}.", param="document_id")
        if document.expired(time.time()):
            raise _expired(document, "document_id")
        return document

    def get_by_file_id(
        self, file_id: str, workspace: str = DEFAULT_WORKSPACE, *, expired_too: bool = False
    ) -> Document:
        """The file; an expired one (its expires_after passed, the sweep not yet by) is a 404 unless ``expired_too``."""
        document = self._store.get_document_by_file_id(workspace, file_id)
        if document is None:
            raise NotFound(f"No file with id {file_id!r}.", param="file_id")
        if not expired_too and document.expired(time.time()):
            raise _expired(document, "file_id")
        return document

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
        return self._store.list_documents(workspace, namespace, limit, after, order)

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
        return self._store.list_documents(
            workspace, namespace, limit, after, order, without_copies=True, purpose=purpose
        )

    def chunks(
        self, document_id: str, limit: int, after: int | None = None, workspace: str = DEFAULT_WORKSPACE
    ) -> Listing[StoredChunk]:
        """A document's passages in order, after chunk index ``after``; NotFound for an unknown document."""
        self.get(document_id, workspace)
        return self._store.list_chunks(workspace, document_id, limit, after)

    def pages(self, document_id: str, workspace: str = DEFAULT_WORKSPACE) -> list[Page]:
        return self._store.get_pages(workspace, document_id)

    def content(self, document: Document) -> bytes:
        return self._store.read_content(document.workspace, document.id)

    def signed_file(
        self, file_id: str, expires: int | None, signature: str | None, missing_is_404: bool = False
    ) -> Document:
        """The file a signed source link names, in whatever workspace signed it; 403 when invalid or expired.

        ``missing_is_404``: a file that does not exist (deleted since the link was made) is NotFound
        rather than 403, so the passage viewer can say so.
        """
        document = self._store.find_file(file_id)
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
        return self._store.namespaces(workspace)

    def status_counts(self) -> dict[str, int]:
        """Documents by status, across workspaces (metrics)."""
        return self._store.status_counts()

    def expired_files(self, now: int) -> list[tuple[str, str]]:
        """(workspace, file id) of files whose expires_after passed, for the sweep."""
        return self._store.expired_files(now)

    def by_id(self, workspace: str, ids: Sequence[str]) -> dict[str, Document]:
        """The documents of those ids that exist, by id."""
        return self._store.get_documents_by_id(workspace, ids)
