"""The vector stores service: OpenAI's vector stores over Calypso's namespaces.

A vector store *is* a namespace: its id is the namespace's name (``vs_…`` for stores created through
the API), so a document uploaded into namespace N through ``/v1/documents`` is a file of store N and a
file attached to store N is a document of namespace N. A namespace that holds documents but has no
store row yet (it predates vector stores) gets its row on first use: listing or naming it.

Attaching a file (``/v1/files`` id) to a store whose namespace does not hold it ingests a copy of its
bytes there, linked to the id the client attached: every answer and search shows that id, so
``file_citation`` annotations name the file the client knows. Files keep OpenAI's statuses from their
document's ingestion job.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.models import Document, FileBatch, Listing, Order, Passage, RankingOptions, VectorStore, VectorStoreFile
from calypso.retrieval.filters import Predicate, compile_filter
from calypso.scope import check_namespace
from calypso.services.documents import DocumentService
from calypso.store.base import VectorStoreStore

MAX_ATTRIBUTES = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512
MAX_SEARCH_RESULTS = 50
ACTIVITY_RESOLUTION = 60  # seconds: last_active_at moves at most this often


def check_attributes(raw: object, param: str = "attributes", *, strings_only: bool = False) -> dict[str, Any]:
    """OpenAI's attributes (or, with ``strings_only``, metadata): a 400 naming the offending key."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidRequest(f"{param} must be an object of key-value pairs.", param=param, code="invalid_type")
    if len(raw) > MAX_ATTRIBUTES:
        raise InvalidRequest(f"{param} has {len(raw)} keys; at most {MAX_ATTRIBUTES} are allowed.", param=param)
    kinds = "a string" if strings_only else "a string, a boolean or a number"
    for key, value in raw.items():
        if len(key) > MAX_KEY_CHARS:
            raise InvalidRequest(
                f"{param} key {key[:20]!r}… is {len(key)} characters; at most {MAX_KEY_CHARS} are allowed.",
                param=f"{param}.{key}",
            )
        ok = isinstance(value, str) or (
            not strings_only and (isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value)))
        )
        if not ok:
            raise InvalidRequest(f"{param}.{key} must be {kinds}.", param=f"{param}.{key}", code="invalid_type")
        if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
            raise InvalidRequest(
                f"{param}.{key} is {len(value)} characters; at most {MAX_VALUE_CHARS} are allowed.",
                param=f"{param}.{key}",
            )
    return dict(raw)


def check_expires_after(raw: object, param: str = "expires_after") -> dict[str, Any] | None:
    if raw is None:
        return None
    if (
        not isinstance(raw, dict)
        or raw.get("anchor") != "last_active_at"
        or set(raw) - {"anchor", "days"}
        or not isinstance(raw.get("days"), int)
        or isinstance(raw.get("days"), bool)
        or not 1 <= raw["days"] <= 365
    ):
        raise InvalidRequest(
            'expires_after must be {"anchor": "last_active_at", "days": N} with N from 1 to 365.', param=param
        )
    return {"anchor": "last_active_at", "days": raw["days"]}


def _matchable(file: VectorStoreFile) -> dict[str, Any]:
    """What a filter sees: the attributes, plus ``file_id`` and ``document_id`` unless attributes name them."""
    return {"file_id": file.file_id, "document_id": file.document_id, **file.attributes}


@dataclass
class StoreState:
    """A store with what is computed from its namespace's documents."""

    store: VectorStore
    file_counts: dict[str, int]
    usage_bytes: int

    @property
    def expires_at(self) -> int | None:
        expires = self.store.expires_after
        return self.store.last_active_at + expires["days"] * 86400 if expires else None

    @property
    def status(self) -> str:
        """``expired`` past ``expires_at`` (shown, not yet enforced), else in_progress while any file is."""
        if self.expires_at is not None and self.expires_at < time.time():
            return "expired"
        return "in_progress" if self.file_counts["in_progress"] else "completed"


@dataclass
class StoreFile:
    """A store file with its document (status, bytes, last_error)."""

    link: VectorStoreFile
    document: Document


@dataclass
class BatchState:
    """A file batch with its files' counts; ``cancelled`` once cancelled, else in_progress until every file ended."""

    batch: FileBatch
    file_counts: dict[str, int]
    files: list[StoreFile]

    @property
    def status(self) -> str:
        if self.batch.cancelled:
            return "cancelled"
        if self.file_counts["in_progress"]:
            return "in_progress"
        return "failed" if self.file_counts["failed"] and not self.file_counts["completed"] else "completed"


class VectorStoreService:
    def __init__(self, documents: DocumentService, store: VectorStoreStore) -> None:
        self.documents = documents
        self.store = store

    # -- stores ------------------------------------------------------------
    def create(
        self,
        workspace: str,
        name: str | None,
        metadata: dict[str, str],
        expires_after: dict[str, Any] | None,
        file_ids: Sequence[str] = (),
    ) -> StoreState:
        for i, file_id in enumerate(file_ids):  # every id first: no store is made when one is unknown
            try:
                self.documents.get_by_file_id(file_id, workspace)
            except NotFound as exc:
                raise NotFound(f"No file with id {file_id!r}.", param=f"file_ids[{i}]") from exc
        now = int(time.time())
        store_id = f"vs_{uuid.uuid4().hex}"
        store = VectorStore(store_id, workspace, store_id, name, now, now, metadata, expires_after)
        self.store.insert(store)
        for i, file_id in enumerate(file_ids):
            self.attach(workspace, store_id, file_id, {}, param=f"file_ids[{i}]")
        return self.state(store)

    def get(self, workspace: str, store_id: str, param: str = "vector_store_id") -> VectorStore:
        """The store; a namespace with documents but no row yet gets its row now. NotFound otherwise."""
        found = self.store.get(workspace, store_id)
        if found is not None:
            return found
        try:
            check_namespace(store_id, param)
        except InvalidRequest as exc:
            raise NotFound(f"No vector store with id {store_id!r}.", param=param) from exc
        counts, _ = self.store.usage(workspace, store_id)
        if not counts:
            raise NotFound(f"No vector store with id {store_id!r}.", param=param)
        return self._adopt(workspace, store_id)

    def _adopt(self, workspace: str, namespace: str) -> VectorStore:
        now = int(time.time())
        self.store.insert(VectorStore(namespace, workspace, namespace, namespace, now, now))
        adopted = self.store.get(workspace, namespace)
        if adopted is None:  # deleted in between
            raise NotFound(f"No vector store with id {namespace!r}.", param="vector_store_id")
        return adopted

    def exists(self, workspace: str, store_id: str) -> bool:
        try:
            self.get(workspace, store_id)
        except NotFound:
            return False
        return True

    def state(self, store: VectorStore) -> StoreState:
        counts, usage = self.store.usage(store.workspace, store.namespace)
        file_counts = {s: counts.get(s, 0) for s in ("in_progress", "completed", "failed", "cancelled")}
        file_counts["total"] = sum(file_counts.values())
        return StoreState(store, file_counts, usage)

    def list_stores(
        self, workspace: str, limit: int, after: str | None, before: str | None, order: Order
    ) -> Listing[StoreState]:
        for namespace in self.documents.namespaces(workspace):
            if self.store.get(workspace, namespace) is None:
                self._adopt(workspace, namespace)
        page = self.store.list_stores(workspace, limit, after, before, order)
        return Listing([self.state(s) for s in page.items], page.has_more)

    def update(self, workspace: str, store_id: str, changes: Mapping[str, Any]) -> StoreState:
        """Apply the fields given (name, metadata, expires_after; null clears expires_after)."""
        store = self.get(workspace, store_id)
        if "name" in changes:
            store = replace(store, name=changes["name"])
        if "metadata" in changes:
            store = replace(store, metadata=check_attributes(changes["metadata"], "metadata", strings_only=True))
        if "expires_after" in changes:
            store = replace(store, expires_after=check_expires_after(changes["expires_after"]))
        store = replace(store, last_active_at=int(time.time()))
        if not self.store.update(store):
            raise NotFound(f"No vector store with id {store_id!r}.", param="vector_store_id")
        return self.state(store)

    def delete(self, workspace: str, store_id: str) -> None:
        """Delete the store with every document of its namespace (their passages leave search at once)."""
        store = self.get(workspace, store_id)
        for file in self.store.files(workspace, store.namespace):
            try:
                self.documents.delete(file.document_id, workspace)
            except NotFound:
                pass  # deleted meanwhile
        self.store.delete(workspace, store_id)

    # -- files -------------------------------------------------------------
    def attach(
        self, workspace: str, store_id: str, file_id: str, attributes: dict[str, Any], param: str = "file_id"
    ) -> StoreFile:
        """Add a file to the store: the document itself when the namespace holds it, else an ingested copy."""
        store = self.get(workspace, store_id)
        existing = self.store.find_file(workspace, store.namespace, file_id)
        if existing is not None:
            link = replace(existing, attributes=attributes)
            self.store.link_file(link, int(time.time()))
            return StoreFile(link, self.documents.get(link.document_id, workspace))
        try:
            source = self.documents.get_by_file_id(file_id, workspace)
        except NotFound as exc:
            raise NotFound(f"No file with id {file_id!r}; upload it with files.create first.", param=param) from exc
        if source.namespace == store.namespace:
            document = source
        else:
            document = self.documents.submit(
                self.documents.content(source),
                source.filename,
                store.namespace,
                media_type=source.media_type,
                metadata=source.metadata,
                source_url=source.source_url,
                workspace=workspace,
            ).document
        link = VectorStoreFile(workspace, store.id, file_id, document.id, attributes)
        if not self.store.link_file(link, int(time.time())):
            raise NotFound(f"File {file_id!r} was deleted while it was being attached.", param=param)
        return StoreFile(link, document)

    def attach_upload(
        self, workspace: str, store_id: str, file_id: str, data: bytes, filename: str, attributes: dict[str, Any]
    ) -> StoreFile:
        """Ingest bytes straight into the store's namespace as the file ``file_id`` (an id the client holds that
        names no document yet: the xAI gRPC surface's keyless uploads, ``grpc_api/staging.py``)."""
        store = self.get(workspace, store_id)
        document = self.documents.submit(data, filename, store.namespace, workspace=workspace, file_id=file_id).document
        link = VectorStoreFile(workspace, store.id, file_id, document.id, attributes)
        if not self.store.link_file(link, int(time.time())):
            raise NotFound(f"File {file_id!r} was deleted while it was being attached.", param="file_id")
        return StoreFile(link, document)

    def delete_everywhere(self, workspace: str, file_id: str) -> Document:
        """Delete a file and remove it from every vector store (OpenAI's ``files.delete``): its copies go too."""
        document = self.documents.get_by_file_id(file_id, workspace)
        for document_id in self.store.linked_documents(workspace, file_id):
            if document_id != document.id:
                try:
                    self.documents.delete(document_id, workspace)
                except NotFound:
                    pass  # deleted meanwhile
        return self.documents.delete(document.id, workspace)

    def _documents(self, workspace: str, links: Sequence[VectorStoreFile]) -> list[StoreFile]:
        docs = self.documents.store.get_documents_by_id(workspace, [link.document_id for link in links])
        return [StoreFile(link, docs[link.document_id]) for link in links if link.document_id in docs]

    def list_files(
        self,
        workspace: str,
        store_id: str,
        limit: int,
        after: str | None,
        before: str | None,
        order: Order,
        status: str | None,
    ) -> Listing[StoreFile]:
        """Files by when they were added, optionally of one status; ``after``/``before`` are file ids."""
        store = self.get(workspace, store_id)
        files = self._documents(workspace, self.store.files(workspace, store.namespace))
        if order == "desc":
            files.reverse()
        ids = [f.link.file_id for f in files]
        start, end = 0, len(files)
        for cursor, name in ((after, "after"), (before, "before")):
            if cursor is not None and cursor not in ids:
                raise NotFound(f"No file {cursor!r} in this vector store to page from.", param=name)
        if after is not None:
            start = ids.index(after) + 1
        if before is not None:
            end = ids.index(before)
        window = [f for f in files[start:end] if status is None or f.document.status == status]
        if before is not None and after is None:
            return Listing(window[-limit:], len(window) > limit)
        return Listing(window[:limit], len(window) > limit)

    def get_file(self, workspace: str, store_id: str, file_id: str) -> StoreFile:
        store = self.get(workspace, store_id)
        link = self.store.find_file(workspace, store.namespace, file_id)
        if link is None:
            raise NotFound(f"No file {file_id!r} in vector store {store_id!r}.", param="file_id")
        return StoreFile(link, self.documents.get(link.document_id, workspace))

    def update_file(self, workspace: str, store_id: str, file_id: str, attributes: dict[str, Any]) -> StoreFile:
        found = self.get_file(workspace, store_id, file_id)
        link = replace(found.link, attributes=attributes)
        self.store.link_file(link, int(time.time()))
        return StoreFile(link, found.document)

    def delete_file(self, workspace: str, store_id: str, file_id: str) -> None:
        """Remove the file's document from the store's namespace: its passages leave search at once."""
        found = self.get_file(workspace, store_id, file_id)
        self.documents.delete(found.document.id, workspace)

    def file_content(self, workspace: str, store_id: str, file_id: str) -> list[str]:
        """The file's passages' text, in order."""
        found = self.get_file(workspace, store_id, file_id)
        texts: list[str] = []
        after: int | None = None
        while True:
            page = self.documents.chunks(found.document.id, 100, after, workspace)
            texts.extend(c.chunk.text for c in page.items)
            if not page.has_more or not page.items:
                return texts
            after = page.items[-1].chunk.chunk_index

    # -- file batches --------------------------------------------------------
    def create_batch(self, workspace: str, store_id: str, files: Sequence[tuple[str, dict[str, Any]]]) -> BatchState:
        """Attach several files (file id, attributes) in one request, as ``attach`` does each."""
        store = self.get(workspace, store_id)
        for i, (file_id, _) in enumerate(files):  # every id first: nothing is attached when one is unknown
            if self.store.find_file(workspace, store.namespace, file_id) is None:
                try:
                    self.documents.get_by_file_id(file_id, workspace)
                except NotFound as exc:
                    raise NotFound(f"No file with id {file_id!r}.", param=f"files[{i}].file_id") from exc
        for file_id, attributes in files:
            self.attach(workspace, store.id, file_id, attributes)
        batch = FileBatch(f"vsfb_{uuid.uuid4().hex}", workspace, store.id, [f for f, _ in files], int(time.time()))
        self.store.insert_batch(batch)
        return self.batch_state(batch)

    def get_batch(self, workspace: str, store_id: str, batch_id: str) -> BatchState:
        store = self.get(workspace, store_id)
        batch = self.store.get_batch(workspace, store.id, batch_id)
        if batch is None:
            raise NotFound(f"No file batch {batch_id!r} in vector store {store_id!r}.", param="batch_id")
        return self.batch_state(batch)

    def batch_files(self, batch: FileBatch) -> list[StoreFile]:
        """The batch's files still in the store, in the order given."""
        found = []
        for file_id in batch.file_ids:
            link = self.store.find_file(batch.workspace, batch.vector_store_id, file_id)
            if link is not None:
                found.append(link)
        return self._documents(batch.workspace, found)

    def batch_state(self, batch: FileBatch) -> BatchState:
        files = self.batch_files(batch)
        counts = {s: 0 for s in ("in_progress", "completed", "failed", "cancelled")}
        for file in files:
            counts[file.document.status] += 1
        counts["total"] = sum(counts.values())
        return BatchState(batch, counts, files)

    def cancel_batch(self, workspace: str, store_id: str, batch_id: str) -> BatchState:
        """Cancel the batch's files still in progress; the batch is ``cancelled`` (its ended files stay)."""
        state = self.get_batch(workspace, store_id, batch_id)
        for file in state.files:
            if file.document.status == "in_progress":
                try:
                    self.documents.cancel(file.document.id, workspace)
                except CalypsoError:
                    pass  # ended meanwhile
        self.store.cancel_batch(workspace, state.batch.vector_store_id, batch_id)
        return self.get_batch(workspace, store_id, batch_id)

    # -- search ------------------------------------------------------------
    def matching_documents(self, workspace: str, namespaces: Sequence[str], predicate: Predicate) -> set[str]:
        """Ids of the documents of those namespaces whose file attributes satisfy ``predicate``."""
        return {
            file.document_id
            for namespace in namespaces
            for file in self.store.files(workspace, namespace)
            if predicate(_matchable(file))
        }

    def search(
        self,
        workspace: str,
        store_id: str,
        query: str,
        *,
        filters: object = None,
        max_results: int = 10,
        ranking: RankingOptions | None = None,
    ) -> list[tuple[Passage, VectorStoreFile]]:
        """Passages of the store's files for ``query``: a filter first selects the files (their attributes),
        then search runs over those files only, so it is exact however few files match."""
        store = self.get(workspace, store_id)
        predicate = compile_filter(filters, "filters") if filters is not None else None
        files = {f.document_id: f for f in self.store.files(workspace, store.namespace)}
        allowed = None
        if predicate is not None:
            allowed = [doc_id for doc_id, f in files.items() if predicate(_matchable(f))]
            if not allowed:
                return []
        passages = self.documents.search(
            query, store.namespace, document_ids=allowed, max_results=max_results, workspace=workspace, ranking=ranking
        )
        now = int(time.time())
        if now - store.last_active_at >= ACTIVITY_RESOLUTION:  # not a write per search
            self.store.update(replace(store, last_active_at=now))
        return [(p, files[p.document.id]) for p in passages if p.document.id in files]
