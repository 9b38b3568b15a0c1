"""The change feed, the SQL both backends speak: how every process's indexes follow writes made anywhere.

Documents' writes append ``added`` / ``deleted`` / ``embedded`` rows to ``document_changes`` in their own
transaction; an index is built from ``namespace_chunks`` and follows ``changes_since`` its position,
reading what a change added with ``document_chunks`` (``services/index_sync.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from calypso.models import DocumentChange, IndexedChunk
from calypso.store.shared_sql import D, SharedSQL


class ChangeFeedSQL(SharedSQL[D]):
    """``calypso.store.base.ChangeFeed`` on either backend; ``notified(timeout)`` is the backend's wait for a
    sign the feed grew (PostgreSQL's LISTEN), None where it has none (SQLite: readers poll)."""

    def __init__(
        self, database: D, mark: str, notified: Callable[[float], bool] | None = None, identity: str | None = None
    ) -> None:
        self.database, self.mark = database, mark
        self._notified = notified
        self._identity = identity  # SQL that returns the database's identity; None: ""

    def identity(self) -> str:
        row = self.database.row(self._identity) if self._identity else None
        return str(row[0]) if row else ""

    def namespace_chunks(self, workspace: str, namespace: str) -> Iterator[tuple[int, list[IndexedChunk]]]:
        rows = self.database.stream(
            # The text only where no terms are stored: streaming every passage's text doubled what a build read.
            self._sql(
                "SELECT c.document_key, c.key, CASE WHEN c.terms IS NULL THEN c.text ELSE '' END, c.terms "
                "FROM chunks c JOIN documents d ON d.key = c.document_key "
                "WHERE d.workspace = ? AND d.namespace = ? ORDER BY c.document_key, c.chunk_index"
            ),
            (workspace, namespace),
        )
        current: int | None = None
        batch: list[IndexedChunk] = []
        for doc_key, key, text, terms in rows:
            if doc_key != current:
                if current is not None:
                    yield current, batch
                current, batch = doc_key, []
            batch.append(IndexedChunk(key, text, terms))
        if current is not None:
            yield current, batch

    def document_chunks(self, document_key: int) -> list[IndexedChunk]:
        rows = self.database.rows(
            self._sql("SELECT key, text, terms FROM chunks WHERE document_key = ? ORDER BY chunk_index"),
            (document_key,),
        )
        return [IndexedChunk(key, text, terms) for key, text, terms in rows]

    def change_position(self) -> int:
        row = self.database.row("SELECT MAX(seq) FROM document_changes")
        return int(row[0]) if row and row[0] is not None else 0

    def changes_since(self, seq: int, limit: int = 1000) -> list[DocumentChange]:
        rows = self.database.rows(
            self._sql(
                "SELECT seq, workspace, namespace, document_key, kind FROM document_changes WHERE seq > ? "
                "ORDER BY seq LIMIT ?"
            ),
            (seq, limit),
        )
        return [DocumentChange(*tuple(row)) for row in rows]

    def wait_for_changes(self, timeout: float) -> bool:
        return self._notified(timeout) if self._notified is not None else False
