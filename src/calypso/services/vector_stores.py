"""The vector stores service: OpenAI's vector stores over Calypso's namespaces.

A vector store *is* a namespace: its id is the namespace's name (``vs_…`` for stores created through
the API), so a document uploaded into namespace N through ``/v1/documents`` is a file of store N and a
file attached to store N is a document of namespace N. A namespace that holds documents but has no
store row yet (it predates vector stores) gets its row on first use: listing or naming it.

Attaching a file (``/v1/files`` id) to a store whose namespace does not hold it ingests a copy of its
bytes there (chunked by the ``chunking_strategy`` asked for), linked to the id the client attached: every
answer and search shows that id, so ``file_citation`` annotations name the file the client knows. A
document may be several files of its store: files with identical bytes share the namespace's one copy,
each with its own link and attributes; it goes when its last file is removed. Files keep OpenAI's
statuses from their document's ingestion job.

A store whose ``expires_after`` has run out (``last_active_at`` + days) is ``expired``, checked when it
is read: it can still be listed, retrieved and deleted, but not searched (here or by ``file_search``),
updated or given files: a 400 with code ``vector_store_expired``.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.models import (
    Document,
    FileBatch,
    Listing,
    Order,
    Passage,
    RankingOptions,
    StaticChunking,
    VectorStore,
    VectorStoreFile,
)
from calypso.retrieval.filters import Filter, Predicate
from calypso.scope import MAX_PASSAGES, check_namespace
from calypso.services.documents import DocumentService
from calypso.services.ingestion import IngestionService, Upload
from calypso.services.search import SearchService
from calypso.store.base import VectorStoreStore

MAX_SEARCH_RESULTS = MAX_PASSAGES
ACTIVITY_RESOLUTION = 60  # seconds: last_active_at moves at most this often

# What a request asks of chunking: None (not given: keep what the file has, or the server's default for a
# new copy), "auto" (the server's own chunking) or a static strategy.
ChunkingRequest = StaticChunking | Literal["auto"] | None


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
        return expires_at(self.store)

    @property
    def status(self) -> str:
        """``expired`` past ``expires_at``, else in_progress while any file is."""
        if expired(self.store):
            return "expired"
        return "in_progress" if self.file_counts["in_progress"] else "completed"


def expires_at(store: VectorStore) -> int | None:
    return store.last_active_at + store.expires_after["days"] * 86400 if store.expires_after else None


def expired(store: VectorStore, now: float | None = None) -> bool:
    at = expires_at(store)
    return at is not None and at <= (time.time() if now is None else now)


def check_active(store: VectorStore, param: str = "vector_store_id") -> VectorStore:
    """The store, unless it has expired: then a 400 saying when, and what to do instead."""
    at = expires_at(store)
    if at is not None and expired(store):
        when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")
        raise InvalidRequest(
            f"Vector store {store.id!r} expired at {when} ({store.expires_after and store.expires_after['days']} "
            "days after its last activity); create a new vector store and attach its files again.",
            param=param,
            code="vector_store_expired",
        )
    return store


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
    def __init__(
        self, documents: DocumentService, ingestion: IngestionService, search: SearchService, store: VectorStoreStore
    ) -> None:
        self.documents = documents
        self.ingestion = ingestion
        self.searcher = search
        self.store = store

    # -- stores ------------------------------------------------------------
    def create(
        self,
        workspace: str,
        name: str | None,
        metadata: dict[str, str],
        expires_after: dict[str, Any] | None,
        file_ids: Sequence[str] = (),
        *,
        description: str | None = None,
        chunking: ChunkingRequest = None,
    ) -> StoreState:
        for i, file_id in enumerate(file_ids):  # every id first: no store is made when one is unknown
            try:
                self.documents.get_by_file_id(file_id, workspace)
            except NotFound as exc:
                raise NotFound(f"No file with id {file_id!r}.", param=f"file_ids[{i}]") from exc
        now = int(time.time())
        store_id = f"vs_{uuid.uuid4().hex}"
        store = VectorStore(store_id, workspace, store_id, name, now, now, metadata, expires_after, description)
        self.store.insert(store)
        for i, file_id in enumerate(file_ids):
            self.attach(workspace, store_id, file_id, {}, chunking, f"file_ids[{i}]")
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

    def active(self, workspace: str, store_id: str, param: str = "vector_store_id") -> VectorStore:
        """The store, if it exists (NotFound) and has not expired (400 ``vector_store_expired``)."""
        return check_active(self.get(workspace, store_id, param), param)

    def exists(self, workspace: str, store_id: str) -> bool:
        try:
            self.get(workspace, store_id)
        except NotFound:
            return False
        return True

    def check_usable(self, workspace: str, store_id: str, param: str) -> None:
        """For the file_search tool: NotFound for an unknown store, a 400 for an expired one."""
        self.active(workspace, store_id, param)

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
        """Apply the fields given (name, metadata, expires_after; null clears expires_after), validated at the edge
        (``api/schemas``)."""
        fields: dict[str, Any] = {}
        if "name" in changes:
            fields["name"] = changes["name"]
        if "metadata" in changes:
            fields["metadata"] = dict(changes["metadata"] or {})  # bounded at the edge (api/schemas/bounds.py)
        if "expires_after" in changes:
            fields["expires_after"] = changes["expires_after"]
        store = replace(self.active(workspace, store_id), **fields, last_active_at=int(time.time()))
        if not self.store.update(store):
            raise NotFound(f"No vector store with id {store_id!r}.", param="vector_store_id")
        return self.state(store)

    def delete(self, workspace: str, store_id: str) -> None:
        """Delete the store with every document of its namespace (their passages leave search at once)."""
        store = self.get(workspace, store_id)
        for document_id in dict.fromkeys(f.document_id for f in self.store.files(workspace, store.namespace)):
            with contextlib.suppress(NotFound):  # deleted meanwhile
                self.documents.delete(document_id, workspace)
        self.store.delete(workspace, store_id)

    # -- files -------------------------------------------------------------
    @staticmethod
    def _check_same_chunking(document: Document, chunking: ChunkingRequest, file_id: str, param: str) -> None:
        """A file already in the store keeps its chunks: asking for another strategy is a 400 saying so."""
        if chunking is None or document.chunking == (None if chunking == "auto" else chunking):
            return
        raise InvalidRequest(
            f"File {file_id!r} is already in this vector store, chunked {chunking_label(document.chunking)}; "
            "to chunk it differently, remove it from the store (vector_stores.files.delete) and attach it again.",
            param=param,
        )

    def attach(
        self,
        workspace: str,
        store_id: str,
        file_id: str,
        attributes: dict[str, Any],
        chunking: ChunkingRequest = None,
        param: str = "file_id",
        chunking_param: str = "chunking_strategy",
    ) -> StoreFile:
        """Add a file to the store: the document itself when the namespace holds it, else an ingested copy
        chunked as asked (files with the same bytes share one copy, each with its own link)."""
        store = self.active(workspace, store_id)
        existing = self.store.find_file(workspace, store.namespace, file_id)
        if existing is not None:
            document = self.documents.get(existing.document_id, workspace)
            self._check_same_chunking(document, chunking, file_id, chunking_param)
            link = replace(existing, vector_store_id=store.id, attributes=attributes)
            self.store.link_file(link, int(time.time()))
            return StoreFile(link, document)
        try:
            source = self.documents.get_by_file_id(file_id, workspace)
        except NotFound as exc:
            raise NotFound(f"No file with id {file_id!r}; upload it with files.create first.", param=param) from exc
        if source.namespace == store.namespace:
            document, created = source, False
        else:
            copy = Upload(
                self.documents.content(source),
                source.filename,
                store.namespace,
                media_type=source.media_type,
                metadata=source.metadata,
                source_url=source.source_url,
                workspace=workspace,
                chunking=chunking if isinstance(chunking, StaticChunking) else None,
            )
            result = self.ingestion.submit(copy)
            document, created = result.document, result.created
        if not created:  # the namespace already holds these bytes: this file shares that document
            self._check_same_chunking(document, chunking, file_id, chunking_param)
            if document.file_id != file_id and not self.store.links_of(workspace, document.id):
                # Keep the document's own file in the store beside the one attached now.
                own = VectorStoreFile(workspace, store.id, document.file_id, document.id, {})
                self.store.link_file(own, document.created_at)
        link = VectorStoreFile(workspace, store.id, file_id, document.id, attributes)
        if not self.store.link_file(link, int(time.time())):
            raise NotFound(f"File {file_id!r} was deleted while it was being attached.", param=param)
        return StoreFile(link, document)

    def _remove(self, workspace: str, document_id: str, file_id: str) -> None:
        """Remove one file of a document; the document (its passages) goes with its last file."""
        if self.store.unlink_file(workspace, document_id, file_id) == 0:
            with contextlib.suppress(NotFound):  # deleted meanwhile
                self.documents.delete(document_id, workspace)

    def attach_upload(
        self, workspace: str, store_id: str, file_id: str, data: bytes, filename: str, attributes: dict[str, Any]
    ) -> StoreFile:
        """Ingest bytes straight into the store's namespace as the file ``file_id`` (an id the client holds that
        names no document yet: the xAI gRPC surface's keyless uploads, ``grpc_api/staging.py``)."""
        store = self.active(workspace, store_id)
        upload = Upload(data, filename, store.namespace, workspace=workspace, file_id=file_id)
        document = self.ingestion.submit(upload).document
        link = VectorStoreFile(workspace, store.id, file_id, document.id, attributes)
        if not self.store.link_file(link, int(time.time())):
            raise NotFound(f"File {file_id!r} was deleted while it was being attached.", param="file_id")
        return StoreFile(link, document)

    def delete_everywhere(self, workspace: str, file_id: str, *, expired_too: bool = False) -> Document:
        """Delete a file and remove it from every vector store (OpenAI's ``files.delete``): its copies go
        too, unless a copy is still another file's (identical bytes attached under another id)."""
        document = self.documents.get_by_file_id(file_id, workspace, expired_too=expired_too)
        for document_id in self.store.linked_documents(workspace, file_id):
            if document_id != document.id:
                self._remove(workspace, document_id, file_id)
        return self.documents.delete(document.id, workspace)

    def delete_expired_files(self, now: float | None = None) -> int:
        """The sweep: delete every file whose expires_after has passed, as ``files.delete`` would; how many."""
        deleted, progressed = 0, True
        while progressed:  # in batches, until one deletes nothing (the rest went meanwhile)
            progressed = False
            for workspace, file_id in self.documents.expired_files(int(time.time() if now is None else now)):
                with contextlib.suppress(NotFound):  # deleted meanwhile (by its owner, or another process's sweep)
                    self.delete_everywhere(workspace, file_id, expired_too=True)
                    deleted, progressed = deleted + 1, True
        return deleted

    def _documents(self, workspace: str, links: Sequence[VectorStoreFile]) -> list[StoreFile]:
        docs = self.documents.by_id(workspace, list({link.document_id for link in links}))
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
        """One page of files by when their document was added, optionally of one status; ``after``/``before``
        are file ids. Paged in the database: a store with many files reads one page."""
        store = self.get(workspace, store_id)
        page = self.store.list_files(workspace, store.namespace, limit, after, before, order, status)
        return Listing(self._documents(workspace, page.items), page.has_more)

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
        """Remove the file from the store: its passages leave search at once (unless another file of the
        store has the same bytes; then they stay, under that file)."""
        found = self.get_file(workspace, store_id, file_id)
        self._remove(workspace, found.document.id, file_id)

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
    def create_batch(
        self, workspace: str, store_id: str, files: Sequence[tuple[str, dict[str, Any], ChunkingRequest, str]]
    ) -> BatchState:
        """Attach several files (file id, attributes, chunking, the chunking's param) in one request, as
        ``attach`` does each."""
        store = self.active(workspace, store_id)
        for i, (file_id, _, _, _) in enumerate(files):  # every id first: nothing is attached when one is unknown
            if self.store.find_file(workspace, store.namespace, file_id) is None:
                try:
                    self.documents.get_by_file_id(file_id, workspace)
                except NotFound as exc:
                    raise NotFound(f"No file with id {file_id!r}.", param=f"files[{i}].file_id") from exc
        for i, (file_id, attributes, chunking, chunking_param) in enumerate(files):
            self.attach(workspace, store.id, file_id, attributes, chunking, f"files[{i}].file_id", chunking_param)
        batch = FileBatch(f"vsfb_{uuid.uuid4().hex}", workspace, store.id, [f[0] for f in files], int(time.time()))
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
                with contextlib.suppress(CalypsoError):  # ended meanwhile
                    self.ingestion.cancel(file.document.id, workspace)
        self.store.cancel_batch(workspace, state.batch.vector_store_id, batch_id)
        return self.get_batch(workspace, store_id, batch_id)

    # -- search ------------------------------------------------------------
    def _matching(self, workspace: str, namespace: str, predicate: Predicate) -> dict[str, VectorStoreFile]:
        """The first file of each document whose attributes satisfy ``predicate``, by document id."""
        found: dict[str, VectorStoreFile] = {}
        for file in self.store.files(workspace, namespace):
            if file.document_id not in found and predicate(_matchable(file)):
                found[file.document_id] = file
        return found

    def file_attributes(self, workspace: str, document_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The client's own attributes of each document's file (its first link), by document id."""
        return {
            doc_id: dict(link.attributes) for doc_id, link in self.store.file_links(workspace, document_ids).items()
        }

    def matching_documents(self, workspace: str, namespaces: Sequence[str], predicate: Predicate) -> set[str]:
        """Ids of the documents of those namespaces with a file whose attributes satisfy ``predicate``."""
        return {doc_id for namespace in namespaces for doc_id in self._matching(workspace, namespace, predicate)}

    def search(
        self,
        workspace: str,
        store_id: str,
        query: str,
        *,
        filters: Filter | None = None,
        max_results: int = 10,
        ranking: RankingOptions | None = None,
    ) -> list[tuple[Passage, VectorStoreFile]]:
        """Passages of the store's files for ``query``: ``filters`` first select the files (their attributes),
        then search runs over those files' documents only, so it is exact however few files match. Each
        passage comes with the file it is shown under (the first matching one, when a document is several)."""
        store = self.active(workspace, store_id)
        chosen: dict[str, VectorStoreFile] | None = None
        if filters is not None:
            chosen = self._matching(workspace, store.namespace, filters)
            if not chosen:
                return []
        scope = self.searcher.scope(
            store.namespace,
            document_ids=list(chosen) if chosen is not None else None,
            max_results=max_results,
            ranking=ranking,
        )
        passages = self.searcher.search(query, scope, workspace)
        if chosen is None:  # the links of the hits only, not of every file
            chosen = self.store.file_links(workspace, list({p.document.id for p in passages}))
        now = int(time.time())
        if now - store.last_active_at >= ACTIVITY_RESOLUTION:  # not a write per search
            self.store.update(replace(store, last_active_at=now))
        hits = []
        for passage in passages:
            doc = passage.document
            file = chosen.get(doc.id) or VectorStoreFile(workspace, store.id, doc.file_id, doc.id, {})
            hits.append((replace(passage, document=replace(doc, file_id=file.file_id)), file))
        return hits


def chunking_label(chunking: StaticChunking | None) -> str:
    if chunking is None:
        return "by the server's own settings (auto)"
    return f"static {chunking.max_chunk_size_tokens}/{chunking.chunk_overlap_tokens} tokens"
