"""The storage contract: one small Protocol per entity, bundled as ``Storage``.

A store is the source of truth; retrieval indexes are rebuilt from it. Every
read and write is scoped by workspace in the query itself, so one workspace
never sees another's rows, whatever ids it guesses. Stores validate nothing
about meaning (the services do) and know nothing of how text is analysed
(retrieval hands in opaque ``terms``).

Implementations live side by side: ``calypso.store.sqlite`` (the embedded
default) and ``calypso.store.postgres``. A backend provides every Protocol below and a ``Storage`` bundle.
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
    IndexedChunk,
    Listing,
    Order,
    Page,
    SourcesPolicy,
    StoredBot,
    StoredChunk,
    StoredMessage,
    StoredResponse,
)


class DuplicateContent(Exception):
    """``add_document`` found the same bytes already in the namespace; nothing was written."""

    def __init__(self, existing: Document) -> None:
        super().__init__(f"document {existing.id} holds the same bytes")
        self.existing = existing


class DocumentStore(Protocol):
    """Documents with their pages, chunks and original bytes."""

    def add_document(
        self,
        doc: Document,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        content: bytes,
        terms: Sequence[str | None] | None = None,
    ) -> tuple[int, list[int]]:
        """Store a document, its pages, chunks (with retrieval's terms, one per chunk) and bytes atomically.

        Returns the document's key and its chunk keys in chunk order; keys are
        never reused, even after a delete. Either everything is visible
        afterwards or nothing is (StorageError). Raises DuplicateContent when
        the namespace already holds a document with the same ``sha256``.
        """
        ...

    def find_duplicate(self, workspace: str, namespace: str, sha256: str) -> Document | None:
        """The document with these exact bytes in this namespace, if any."""
        ...

    def get_document(self, workspace: str, document_id: str) -> Document | None: ...

    def get_document_by_file_id(self, workspace: str, file_id: str) -> Document | None: ...

    def find_file(self, file_id: str) -> Document | None:
        """A file by id in any workspace: only for signed links, whose signature names the workspace."""
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
        self, workspace: str, namespace: str | None, limit: int, after: str | None, order: Order
    ) -> Listing[Document]:
        """Documents by creation order; ``after`` is the id of the last item of the previous page (NotFound if gone)."""
        ...

    def delete_document(self, workspace: str, document_id: str) -> Document | None:
        """Remove a document with its chunks and bytes; return it, or None if it did not exist."""
        ...

    def list_chunks(self, workspace: str, document_id: str, limit: int, after: int | None) -> Listing[StoredChunk]:
        """Chunks of one document in ``chunk_index`` order, starting after chunk index ``after``."""
        ...

    def get_chunks(self, workspace: str, keys: Sequence[int], namespace: str | None = None) -> dict[int, StoredChunk]:
        """The chunks among ``keys`` in the workspace (and namespace); others' keys, or deleted ones, are absent."""
        ...

    def get_pages(self, workspace: str, document_id: str) -> list[Page]: ...

    def read_content(self, workspace: str, document_id: str) -> bytes:
        """The original bytes; NotFound when the document is not in the workspace."""
        ...

    def namespace_chunks(self, workspace: str, namespace: str) -> Iterator[tuple[int, list[IndexedChunk]]]:
        """(document key, its chunks in order) for every document of a namespace: what an index is built from.

        A chunk's text is only read when it has no stored terms (it is ``""`` otherwise:
        ``document_chunks`` gives the text of a document whose terms cannot be used).
        """
        ...

    def document_chunks(self, document_key: int) -> list[IndexedChunk]:
        """One document's chunks in order (empty when it is gone): what an index adds for an ``added`` change."""
        ...

    # -- the change feed: how every process's indexes follow writes made elsewhere --
    def change_position(self) -> int:
        """The ``seq`` of the newest change in the feed (0 when it is empty)."""
        ...

    def changes_since(self, seq: int, limit: int = 1000) -> list[DocumentChange]:
        """Changes after ``seq``, oldest first, at most ``limit``.

        ``add_document`` and ``delete_document`` append to the feed in their own
        transaction, and seq order is commit order: a reader that has seen
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


class Storage(Protocol):
    """Every entity store of one backend, over one database."""

    documents: DocumentStore
    bots: BotStore
    conversations: ConversationStore
    responses: ResponseStore
    keys: KeyStore
    policies: PolicyStore

    def close(self) -> None: ...
