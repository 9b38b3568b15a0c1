"""Stored terms kept current: the SQL both backends speak for re-analysing passages online.

Each chunk stores the terms retrieval derived from its text, prefixed by the analyzer's version
(``retrieval.tokenize.encode_terms``). When the analyzer changes, the terms of older versions are
ignored (indexes re-derive them from the text) until ``services.reanalysis`` rewrites them through
these methods, in key order, a batch at a time, with search working throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar


class _Database(Protocol):
    def rows(self, sql: str, params: Any = ()) -> list[Any]: ...

    def row(self, sql: str, params: Any = ()) -> Any: ...

    def write(self, work: Any) -> Any: ...


D = TypeVar("D", bound=_Database)


class StoredTermsSQL(Generic[D]):
    """The ``DocumentStore`` methods over stored terms; a backend sets ``database`` and ``mark``."""

    database: D
    mark: str  # the driver's placeholder: "?" (sqlite3) or "%s" (psycopg)

    def _stale(self) -> str:
        return f"(terms IS NULL OR substr(terms, 1, {self.mark}) <> {self.mark})"

    def count_stale_terms(self, current: str) -> int:
        row = self.database.row(f"SELECT COUNT(*) FROM chunks WHERE {self._stale()}", (len(current), current))
        return int(row[0]) if row else 0

    def stale_terms(self, current: str, after_key: int, limit: int) -> list[tuple[int, str]]:
        rows = self.database.rows(
            f"SELECT key, text FROM chunks WHERE key > {self.mark} AND {self._stale()} ORDER BY key LIMIT {self.mark}",
            (after_key, len(current), current, limit),
        )
        return [(int(key), text) for key, text in rows]

    def write_terms(self, terms: Sequence[tuple[int, str]]) -> None:
        sql = f"UPDATE chunks SET terms = {self.mark} WHERE key = {self.mark}"
        self.database.write(lambda db: _executemany(db, sql, [(value, key) for key, value in terms]))


def _executemany(db: Any, sql: str, params: list[tuple[str, int]]) -> None:
    if hasattr(db, "executemany"):  # sqlite3.Connection
        db.executemany(sql, params)
    else:  # a psycopg connection
        with db.cursor() as cursor:
            cursor.executemany(sql, params)
