"""The storage contract: documents, their pages and chunks, their original bytes.

A store is the source of truth; retrieval indexes are rebuilt from it. Every
method is scoped by workspace so one workspace never sees another's ids.
Implementations: ``sqlite.SQLiteStore`` (embedded default).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from calypso.models import Chunk, Document, Page


@dataclass
class StoredChunk:
    key: int  # store-wide unique integer id, the retrieval index's chunk key
    document_id: str
    chunk: Chunk


@dataclass
class Listing:
    items: list
    has_more: bool


class Store(ABC):
    @abstractmethod
    def add_document(
        self,
        doc: Document,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        content: bytes,
        terms: Sequence[list[str]] | None = None,
    ) -> tuple[int, list[int]]:
        """Store a document, its pages, chunks (with their analyzed terms) and bytes atomically.

        Returns the document's key and its chunk keys.

        Either everything is visible afterwards or nothing is.
        """

    @abstractmethod
    def find_duplicate(self, workspace: str, namespace: str, sha256: str) -> Document | None:
        """The document with these exact bytes in this namespace, if any."""

    @abstractmethod
    def get_document(self, workspace: str, document_id: str) -> Document | None: ...

    @abstractmethod
    def get_document_by_file_id(self, workspace: str, file_id: str) -> Document | None: ...

    @abstractmethod
    def find_file(self, file_id: str) -> Document | None:
        """A file by id in any workspace (signed links carry their own proof of workspace)."""

    @abstractmethod
    def document_key(self, workspace: str, document_id: str) -> int | None:
        """The integer key the retrieval index knows the document by."""

    @abstractmethod
    def document_keys(self, workspace: str, document_ids: Sequence[str]) -> dict[str, int]:
        """Integer keys of those ids that exist in the workspace."""

    @abstractmethod
    def get_documents_by_id(self, ids: Sequence[str]) -> dict[str, Document]: ...

    @abstractmethod
    def namespaces(self, workspace: str) -> list[str]:
        """Namespaces holding at least one document."""

    @abstractmethod
    def list_documents(
        self, workspace: str, namespace: str | None, limit: int, after: str | None, order: str
    ) -> Listing:
        """Documents by creation time; ``after`` is the id of the last item of the previous page."""

    @abstractmethod
    def delete_document(self, workspace: str, document_id: str) -> Document | None:
        """Remove a document with its chunks and bytes; return it, or None if it did not exist."""

    @abstractmethod
    def list_chunks(self, workspace: str, document_id: str, limit: int, after: int | None) -> Listing:
        """Chunks of one document in ``chunk_index`` order, starting after chunk index ``after``."""

    @abstractmethod
    def get_chunks(self, keys: Sequence[int]) -> dict[int, StoredChunk]: ...

    @abstractmethod
    def get_pages(self, workspace: str, document_id: str) -> list[Page]: ...

    @abstractmethod
    def read_content(self, workspace: str, document_id: str) -> bytes: ...

    @abstractmethod
    def namespace_chunks(
        self, workspace: str, namespace: str
    ) -> Iterator[tuple[int, list[tuple[int, str, list[str] | None]]]]:
        """(document key, [(chunk key, text, stored terms or None)…]) for every document of a namespace."""

    @abstractmethod
    def close(self) -> None: ...
