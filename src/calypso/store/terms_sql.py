"""Stored terms kept current: the SQL both backends speak for re-analysing passages online.

Each chunk stores the terms retrieval derived from its text, prefixed by the analyzer's version
(``text.tokenize.encode_terms``). When the analyzer changes, the terms of older versions are
ignored (indexes re-derive them from the text) until ``services.reanalysis`` rewrites them through
these methods, in key order, a batch at a time, with search working throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from calypso.store.shared_sql import D, SharedSQL

_STALE = "(terms IS NULL OR substr(terms, 1, ?) <> ?)"


class StoredTermsSQL(SharedSQL[D]):
    """``calypso.store.base.StoredTerms`` on either backend."""

    def __init__(self, database: D, mark: str) -> None:
        self.database, self.mark = database, mark

    def count_stale_terms(self, current: str) -> int:
        row = self.database.row(self._sql(f"SELECT COUNT(*) FROM chunks WHERE {_STALE}"), (len(current), current))
        return int(row[0]) if row else 0

    def stale_terms(self, current: str, after_key: int, limit: int) -> list[tuple[int, str]]:
        rows = self.database.rows(
            self._sql(f"SELECT key, text FROM chunks WHERE key > ? AND {_STALE} ORDER BY key LIMIT ?"),
            (after_key, len(current), current, limit),
        )
        return [(int(key), text) for key, text in rows]

    def write_terms(self, terms: Sequence[tuple[int, str]]) -> None:
        sql = self._sql("UPDATE chunks SET terms = ? WHERE key = ?")
        self.database.write(lambda db: _executemany(db, sql, [(value, key) for key, value in terms]))


def _executemany(db: Any, sql: str, params: list[tuple[str, int]]) -> None:
    if hasattr(db, "executemany"):  # sqlite3.Connection
        db.executemany(sql, params)
    else:  # a psycopg connection
        with db.cursor() as cursor:
            cursor.executemany(sql, params)
