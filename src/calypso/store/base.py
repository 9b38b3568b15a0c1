"""The storage contract: one small Protocol per entity, bundled as ``Storage``.

A store is the source of truth; retrieval indexes are rebuilt from it. Every
read and write is scoped by workspace in the query itself, so one workspace
never sees another's rows, whatever ids it guesses. Stores validate nothing
about meaning (the services do) and know nothing of how text is analysed
(retrieval hands in opaque ``terms``).

Implementations live side by side: ``calypso.store.sqlite`` (the embedded
default) and ``calypso.store.postgres``. A backend provides every Protocol below
(``VectorSearch``, in ``store/vectors.py`` with the vectors' store, only where it offers one) and a
``Storage`` bundle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from calypso.models import (
    ApiKey,
    Chunk,
    Conversation,
    Document,
    DocumentChange,
    FileBatch,
    IndexedChunk,
    IngestJob,
    Listing,
    Order,
    Page,
    QueueStats,
    SourcesPolicy,
    StoredBot,
    StoredChunk,
    StoredMessage,
    StoredResponse,
    VectorStore,
    VectorStoreFile,
)
from calypso.store.portable import PortableStore
from calypso.store.sources import SourceStore
from calypso.store.vectors import EmbeddingStore, VectorSearch


class DuplicateContent(Exception):
    """``JobStore.submit`` (or ``add_completed``) found the same bytes already in the namespace; nothing was written."""

    def __init__(self, existing: Document) -> None:
        super().__init__(f"document {existing.id} holds the same bytes")
        self.existing = existing


class DocumentStore(Protocol):
    """Documents with their pages, chunks and original bytes."""

    def status_counts(self) -> dict[str, int]:
        """How many documents there are of each status, over every workspace (for metrics)."""
        ...

    def find_duplicate(self, workspace: str, namespace: str, sha256: str) -> Document | None:
        """The document with these exact bytes in this namespace, if any."""
        ...

    def get_document(self, workspace: str, document_id: str) -> Document | None: ...

    def get_document_by_file_id(self, workspace: str, file_id: str) -> Document | None: ...

    def find_file(self, file_id: str) -> Document | None:
        """A file by id in any workspace: only for signed links, whose signature names the workspace."""
        ...

    def expired_files(self, now: int, limit: int = 100) -> list[tuple[str, str]]:
        """(workspace, file_id) of up to ``limit`` files whose Files API expiry is at or before ``now``."""
        ...

    def document_key(self, workspace: str, document_id: str) -> int | None:
        """The integer key the retrieval index knows the document by."""
        ...

    def document_keys(self, workspace: str, document_ids: Sequence[str]) -> dict[str, int]:
        """Integer keys of those ids that exist in the workspace."""
        ...

    def get_documents_by_id(self, workspace: str, ids: Sequence[str]) -> dict[str, Document]:
        """The workspace's documents among ``ids``; ids of other workspaces are simply absent."""
        ...

    def namespaces(self, workspace: str) -> list[str]:
        """Namespaces holding at least one document."""
        ...

    def list_documents(
        self,
        workspace: str,
        namespace: str | None,
        limit: int,
        after: str | None,
        order: Order,
        *,
        without_copies: bool = False,
        purpose: str | None = None,
    ) -> Listing[Document]:
        """Documents by creation order; ``after`` is the id of the last item of the previous page (NotFound if gone).

        ``without_copies`` leaves out the copies a vector store made of a file attached from elsewhere
        (a document whose vector-store link names another file id): the Files API lists each file once.
        ``purpose``: only the files uploaded with it ("assistants" includes those stored without one).
        """
        ...

    def delete_document(self, workspace: str, document_id: str) -> Document | None:
        """Remove a document with its chunks and bytes; return it, or None if it did not exist."""
        ...

    def list_chunks(self, workspace: str, document_id: str, limit: int, after: int | None) -> Listing[StoredChunk]:
        """Chunks of one document in ``chunk_index`` order, starting after chunk index ``after``."""
        ...

    def get_passages(
        self, workspace: str, keys: Sequence[int], namespace: str | None = None
    ) -> dict[int, tuple[StoredChunk, Document]]:
        """The chunks among ``keys`` in the workspace (and namespace), each with its document, in one query
        (one round trip less than chunks then documents: 0.1 ms of a keyword search at 200k on SQLite); others'
        keys, or deleted ones, are absent."""
        ...

    def chunk_positions(self, keys: Sequence[int]) -> dict[int, tuple[int, int]]:
        """(document key, chunk index) of the chunks among ``keys``: where each passage sits, without its text,
        for the neighbour smoothing of 50 passages a search found in its own namespace's index. Not scoped:
        joining the documents to check the namespace again doubled its cost (0.39 against 0.17 ms at 200k)."""
        ...

    def lone_chunks(self, keys: Sequence[int]) -> set[int]:
        """The chunks among ``keys`` that are their document's only one (neighbour smoothing leaves them be)."""
        ...

    def get_pages(self, workspace: str, document_id: str) -> list[Page]: ...

    def read_content(self, workspace: str, document_id: str) -> bytes:
        """The original bytes; NotFound when the document is not in the workspace."""
        ...


class ChangeFeed(Protocol):
    """The change feed: how every process's indexes follow writes made elsewhere, and what they are built from."""

    def namespace_chunks(self, workspace: str, namespace: str) -> Iterator[tuple[int, list[IndexedChunk]]]:
        """(document key, its chunks in order) for every document of a namespace: what an index is built from.

        A chunk's text is only read when it has no stored terms (it is ``""`` otherwise:
        ``document_chunks`` gives the text of a document whose terms cannot be used).
        """
        ...

    def document_chunks(self, document_key: int) -> list[IndexedChunk]:
        """One document's chunks in order (empty when it is gone): what an index adds for an ``added`` change."""
        ...

    def change_position(self) -> int:
        """The ``seq`` of the newest change in the feed (0 when it is empty)."""
        ...

    def identity(self) -> str:
        """Which database this feed is (PostgreSQL: its cluster's system identifier and the database's oid; "" on
        SQLite, whose file sits beside its snapshots): a snapshot stamped with another is foreign."""
        ...

    def changes_since(self, seq: int, limit: int = 1000) -> list[DocumentChange]:
        """Changes after ``seq``, oldest first, at most ``limit``.

        Completing a document (``JobStore.complete``, ``add_completed``), deleting one and storing vectors
        append to the feed in their own transaction, and seq order is commit order: a reader that has seen
        change N has seen every change committed before it, so following the
        feed from a position never skips one.
        """
        ...

    def wait_for_changes(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a sign that the feed grew (PostgreSQL: a NOTIFY).

        True when one came, or when changes may have been missed (the listening connection
        was just opened or reopened): read ``changes_since`` then. False after the timeout;
        a backend that cannot notify (SQLite) returns False at once and its readers poll.
        Called from one thread at a time; StoreUnavailable when the database is unreachable.
        """
        ...


class StoredTerms(Protocol):
    """Stored terms of an older analyzer, re-derived online (``services/reanalysis.py``)."""

    def count_stale_terms(self, current: str) -> int:
        """Chunks, in every workspace, whose stored terms are missing or do not start with ``current``."""
        ...

    def stale_terms(self, current: str, after_key: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` such chunks as (key, text), keys above ``after_key`` ascending."""
        ...

    def write_terms(self, terms: Sequence[tuple[int, str]]) -> None:
        """Replace the stored terms of chunks given as (key, terms); keys no longer stored are skipped."""
        ...


MAX_JOB_ATTEMPTS = 3  # a job claimed this often without ending keeps killing workers: it fails instead


class JobStore(Protocol):
    """Ingestion jobs: an upload is stored at once as an ``in_progress`` document with its bytes and a job;
    any worker of any process claims the job under a lease, parses, and completes it in one transaction.

    Leases are how a dead worker's job comes back: a worker holds a job until ``lease_expires_at`` and
    ``renew``s it while it works; once the lease expires, ``claim`` hands the job to another worker. Every
    write a worker makes after claiming names the worker and is refused (writes nothing) once the lease is
    someone else's or the job is gone (cancelled, deleted, ended). A job claimed ``MAX_JOB_ATTEMPTS`` times
    without ending fails with ``server_error`` at the next claim instead of being handed out again.
    """

    def submit(self, doc: Document, content: bytes) -> Document:
        """Store ``doc`` as ``in_progress`` (no pages or chunks yet) with its bytes and a queued job, atomically.

        Raises DuplicateContent when the namespace already holds these bytes in a document that is
        in_progress or completed; a failed or cancelled copy is deleted in the same transaction and replaced.
        Returns the document as stored.
        """
        ...

    def submit_claimed(self, doc: Document, content: bytes, worker_id: str, lease_seconds: float) -> IngestJob:
        """``submit``, with the job claimed by ``worker_id`` in the same transaction (as ``claim_document``
        would, one attempt counted): for a caller that runs the job at once (``ingest(wait=True)``).

        Raises DuplicateContent as ``submit`` does.
        """
        ...

    def add_completed(
        self,
        doc: Document,
        content: bytes,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        terms: Sequence[str | None],
        embed_model: str | None = None,
    ) -> list[int]:
        """Store a document parsed before it was stored, in one transaction and with no job: what ``submit`` then
        ``complete`` store (bytes, pages, chunks with terms, status completed, an ``added`` change, with
        ``embed_model`` an embedding job). Counts come from ``pages`` and ``chunks``.

        Raises DuplicateContent as ``submit`` does (a failed or cancelled copy is replaced). Returns the chunk keys
        in chunk order.
        """
        ...

    def queue_stats(self) -> QueueStats:
        """Jobs waiting and running, and the oldest one's submission time (for metrics and readiness)."""
        ...

    def claim(self, worker_id: str, lease_seconds: float) -> IngestJob | None:
        """The oldest job that is queued or whose lease expired, now leased to ``worker_id``; None when there is none.

        Two claimers never get the same job while its lease lives (PostgreSQL: ``FOR UPDATE SKIP LOCKED``;
        SQLite: its single writer). Each claim counts one attempt.
        """
        ...

    def claim_document(self, document_key: int, worker_id: str, lease_seconds: float) -> IngestJob | None:
        """Claim this one job (by the same rule as ``claim``); None when it is gone or someone holds a live lease."""
        ...

    def renew(self, document_key: int, worker_id: str, lease_seconds: float) -> bool:
        """Extend the lease (a heartbeat); False when the lease is no longer this worker's: stop working on it."""
        ...

    def release(self, document_key: int, worker_id: str) -> None:
        """Give a claimed job back (a worker stopping gracefully) without counting the attempt."""
        ...

    def report_progress(self, document_key: int, worker_id: str, pages_parsed: int, passages_written: int) -> bool:
        """Record how far the job got; False (nothing written) when the lease is no longer this worker's."""
        ...

    def complete(
        self,
        document_key: int,
        worker_id: str,
        doc: Document,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        terms: Sequence[str | None],
        embed_model: str | None = None,
    ) -> list[int] | None:
        """Finish a job in one transaction: pages, chunks (with terms), the document row (counts, title,
        metadata, media type from ``doc``; status completed), the job row gone and an ``added`` change;
        with ``embed_model``, an embedding job for that model (``EmbeddingStore``).

        Returns the chunk keys in chunk order, or None, having written nothing, when the worker no longer
        holds the job (another worker claimed it after the lease expired, or it was cancelled or deleted).
        """
        ...

    def fail(self, document_key: int, worker_id: str, error: dict[str, Any]) -> bool:
        """Mark the document failed with ``last_error = error`` and drop the job; False (nothing written)
        when the worker no longer holds the job."""
        ...

    def cancel(self, workspace: str, document_id: str) -> Document | None:
        """Cancel an in-progress document: status cancelled, job gone (a later ``complete`` writes nothing).

        Returns the cancelled document, or None when the workspace has no in-progress document with this id.
        """
        ...

    def jobs(self, workspace: str, document_ids: Sequence[str]) -> dict[str, IngestJob]:
        """The live jobs of those documents (by document id) with their progress and lease owner."""
        ...


class BotStore(Protocol):
    """Bots created through the API: a validated config per (workspace, id)."""

    def get(self, workspace: str, bot_id: str) -> StoredBot | None: ...

    def list_bots(self, workspace: str) -> list[StoredBot]:
        """The workspace's bots by id."""
        ...

    def keys(self) -> list[tuple[str, str]]:
        """Every (workspace, id) stored, to warn at start about bots that shadow the bots file."""
        ...

    def insert(self, workspace: str, bot_id: str, config: dict[str, Any]) -> StoredBot | None:
        """Store a new bot; None when the id is already taken in the workspace (checked atomically)."""
        ...

    def update(
        self, workspace: str, bot_id: str, apply: Callable[[dict[str, Any] | None], dict[str, Any]]
    ) -> StoredBot:
        """Read, change and write one bot in one transaction, so concurrent updates never lose one.

        ``apply`` gets the stored config (None when there is no row) and returns
        the new one; it may raise to abort. A missing row is created.
        """
        ...

    def delete(self, workspace: str, bot_id: str) -> bool:
        """True when a stored bot was deleted."""
        ...


class ConversationStore(Protocol):
    """Conversations and their messages in order."""

    def create(self, conversation: Conversation) -> None: ...

    def get(self, workspace: str, conversation_id: str) -> Conversation | None: ...

    def list_conversations(self, workspace: str, limit: int, after: str | None, order: Order) -> Listing[Conversation]:
        """By creation order; ``after`` is the last id of the previous page (NotFound if gone)."""
        ...

    def delete(self, workspace: str, conversation_id: str) -> bool:
        """Delete with its messages; True when it existed."""
        ...

    def messages(self, workspace: str, conversation_id: str) -> list[StoredMessage]: ...

    def add_turn(self, workspace: str, conversation_id: str, messages: Sequence[StoredMessage]) -> bool:
        """Append one turn's messages atomically; False (nothing written) when the conversation is gone."""
        ...

    def update_metadata(self, workspace: str, conversation_id: str, metadata: dict[str, Any]) -> bool:
        """Replace the conversation's metadata; False when it does not exist."""
        ...

    def delete_message(self, workspace: str, conversation_id: str, message_id: str) -> bool:
        """Delete one message (an item of OpenAI's Conversations API); False when it is not there."""
        ...

    def claim_turn(self, workspace: str, conversation_id: str, owner: str, lease_seconds: float) -> bool:
        """Take (or renew) the conversation's turn lease for ``owner``; False while another owner's lease lives
        or when the conversation is gone. Orders turns across processes (PostgreSQL); SQLite has one process,
        whose in-process lock suffices, and always grants it."""
        ...

    def release_turn(self, workspace: str, conversation_id: str, owner: str) -> None:
        """Give the lease back, if ``owner`` still holds it."""
        ...


class ResponseStore(Protocol):
    """Stored Responses: the reply as sent and the history to continue from."""

    def save(self, workspace: str, response: StoredResponse, previous_response_id: str | None) -> None:
        """Insert or replace by id."""
        ...

    def get(self, workspace: str, response_id: str) -> StoredResponse | None: ...

    def delete(self, workspace: str, response_id: str) -> bool: ...


class KeyStore(Protocol):
    """API keys by hash: the plaintext never reaches storage."""

    def insert(self, key: ApiKey, key_hash: str) -> None: ...

    def list_keys(self, workspace: str | None) -> list[ApiKey]:
        """Every key (or a workspace's), oldest first."""
        ...

    def get(self, key_id: str) -> ApiKey | None: ...

    def revoke(self, key_id: str, at: int) -> None:
        """Mark a live key revoked; revoking twice keeps the first time."""
        ...

    def workspace_for_hash(self, key_hash: str) -> str | None:
        """The workspace of a live key with this hash, or None."""
        ...


class PolicyStore(Protocol):
    """Per-workspace policies."""

    def sources_policy(self, workspace: str) -> SourcesPolicy | None:
        """The stored policy, or None when the workspace never set one."""
        ...

    def set_sources_policy(self, workspace: str, policy: SourcesPolicy) -> None: ...


class VectorStoreStore(Protocol):
    """Vector stores (rows naming a namespace) and file links (document, file id) with their attributes.

    A store's files are its namespace's documents: a document with link rows is one file per link (files
    with identical bytes attached to one store share a document), a document without is one file under its
    own file id with no attributes. A link row goes when its document goes.
    """

    def insert(self, store: VectorStore) -> bool:
        """Store a new vector store; False (nothing written) when the workspace already has this id."""
        ...

    def get(self, workspace: str, store_id: str) -> VectorStore | None: ...

    def list_stores(
        self, workspace: str, limit: int, after: str | None, before: str | None, order: Order
    ) -> Listing[VectorStore]:
        """By creation order; ``after``/``before`` are store ids of a previous page (NotFound if gone)."""
        ...

    def update(self, store: VectorStore) -> bool:
        """Replace name, metadata, expires_after and last_active_at; False when the store is gone."""
        ...

    def delete(self, workspace: str, store_id: str) -> bool:
        """Delete the row (not the namespace's documents: the service deletes those); True when it existed."""
        ...

    def usage(self, workspace: str, namespace: str) -> tuple[dict[str, int], int]:
        """The namespace's files counted by their document's status, and their total bytes."""
        ...

    def link_file(self, link: VectorStoreFile, created_at: int) -> bool:
        """Insert or replace the link (``link.document_id``, ``link.file_id``); False when that document is
        not in the workspace."""
        ...

    def unlink_file(self, workspace: str, document_id: str, file_id: str) -> int:
        """Remove that link, if any; the number of links the document has left."""
        ...

    def links_of(self, workspace: str, document_id: str) -> list[VectorStoreFile]:
        """The document's link rows, first attached first."""
        ...

    def files(self, workspace: str, namespace: str) -> list[VectorStoreFile]:
        """Every file of the namespace (linked or not), oldest document first."""
        ...

    def list_files(
        self,
        workspace: str,
        namespace: str,
        limit: int,
        after: str | None,
        before: str | None,
        order: Order,
        status: str | None = None,
    ) -> Listing[VectorStoreFile]:
        """One page of the namespace's files by (document key, file id), optionally of one document status;
        ``after``/``before`` are file ids of a previous page (NotFound naming the param if gone)."""
        ...

    def file_links(self, workspace: str, document_ids: Sequence[str]) -> dict[str, VectorStoreFile]:
        """The first link row of each of those documents that has one, by document id."""
        ...

    def find_file(self, workspace: str, namespace: str, file_id: str) -> VectorStoreFile | None:
        """The store file with this client file id (a link's, else an unlinked document's own) in the namespace."""
        ...

    def linked_documents(self, workspace: str, file_id: str) -> list[str]:
        """Ids of the documents attached to stores under ``file_id`` (the copies of that file)."""
        ...

    def insert_batch(self, batch: FileBatch) -> None: ...

    def get_batch(self, workspace: str, vector_store_id: str, batch_id: str) -> FileBatch | None: ...

    def cancel_batch(self, workspace: str, vector_store_id: str, batch_id: str) -> bool:
        """Mark the batch cancelled; False when it does not exist."""
        ...


class SearchReads(Protocol):
    """The reads a search makes (``DocumentStore``'s and ``VectorStoreStore.file_links``), awaited on the
    server's event loop: PostgreSQL's, through an asynchronous pool (``postgres/search_reads.py``). ``ready``:
    whether they can be awaited on the running loop (the pool was opened there)."""

    def ready(self) -> bool: ...

    async def document_keys(self, workspace: str, document_ids: Sequence[str]) -> dict[str, int]: ...

    async def get_passages(
        self, workspace: str, keys: Sequence[int], namespace: str | None = None
    ) -> dict[int, tuple[StoredChunk, Document]]: ...

    async def chunk_positions(self, keys: Sequence[int]) -> dict[int, tuple[int, int]]: ...

    async def lone_chunks(self, keys: Sequence[int]) -> set[int]: ...

    async def file_links(self, workspace: str, document_ids: Sequence[str]) -> dict[str, VectorStoreFile]: ...


class Storage(Protocol):
    """Every entity store of one backend, over one database.

    ``vector_search``: the backend's own passage-vector search, or None when it has none (SQLite), and the
    services load vectors into memory. Returns ``(workspace, namespace) -> VectorSearch`` over vectors of
    ``model`` (``dimension``; ``ef_search``: candidates per query, for a backend searching an approximate
    index), having prepared what the search needs (PostgreSQL: the HNSW index, built once). Called only
    when the configuration asks for it (``CALYPSO_PG_VECTOR_SEARCH=hnsw``).
    """

    documents: DocumentStore
    feed: ChangeFeed
    terms: StoredTerms
    jobs: JobStore
    bots: BotStore
    conversations: ConversationStore
    responses: ResponseStore
    keys: KeyStore
    policies: PolicyStore
    vector_stores: VectorStoreStore
    embeddings: EmbeddingStore
    portable: PortableStore  # rows out and in, for export and import (``store/portable.py``)
    sources: SourceStore[Any]  # synced sources and their items (``store/sources.py``)
    # A search's reads awaited on the server's event loop (PostgreSQL), None: read on a thread (SQLite's file)
    search_reads: SearchReads | None

    async def open_on_loop(self) -> None:
        """Ready ``search_reads`` on the running event loop (the server's, at start; nothing on SQLite)."""
        ...

    async def close_on_loop(self) -> None: ...

    def vector_search(
        self, model: str, dimension: int, ef_search: int
    ) -> Callable[[str, str], VectorSearch] | None: ...

    def close(self) -> None: ...
