"""One SQLite file in WAL mode: pooled connections for reads, one writer.

All writes go through one lock and ``BEGIN IMMEDIATE`` (datasette's
pattern), so each unit of work lands whole or not at all. Reads borrow a
connection from a small pool and give it back, so the number of open files
stays bounded however many threads the server runs (a connection per thread
leaked one descriptor per short-lived worker thread). Only the classes of this
package touch connections.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from calypso.errors import StorageError
from calypso.store.sqlite.migrations import migrate

T = TypeVar("T")
Params = Sequence[object]
MAX_IDLE_READERS = 8  # connections kept open between reads; more are opened under load and closed after
SQL_VARIABLES_PER_QUERY = 900  # well under SQLite's limit on bound parameters, for IN (...) lists


def batched(items: Sequence[T], size: int = SQL_VARIABLES_PER_QUERY) -> Iterator[Sequence[T]]:
    """``items`` in slices small enough to bind as one IN (...) list."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Database:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._pool_lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._closed = False
        self._write_lock = threading.Lock()
        self._writer = self._open()
        with self._write_lock:
            migrate(self._writer)

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        return db

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        with self._pool_lock:
            if self._closed:
                raise StorageError("The database is closed.")
            db = self._idle.pop() if self._idle else None
        if db is None:
            db = self._open()
        try:
            yield db
        finally:
            with self._pool_lock:
                keep = not self._closed and len(self._idle) < MAX_IDLE_READERS
                if keep:
                    self._idle.append(db)
            if not keep:
                db.close()

    def rows(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        with self._reader() as db:
            return db.execute(sql, params).fetchall()

    def row(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        with self._reader() as db:
            found: sqlite3.Row | None = db.execute(sql, params).fetchone()
            return found

    def stream(self, sql: str, params: Params = ()) -> Iterator[sqlite3.Row]:
        """Rows one at a time (for large scans); the connection returns to the pool when iteration ends."""
        with self._reader() as db:
            yield from db.execute(sql, params)

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work(db)`` inside one immediate transaction under the single-writer lock."""
        with self._write_lock:
            if self._closed:
                raise StorageError("The database is closed.")
            db = self._writer
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
                db.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                db.execute("ROLLBACK")
                raise StorageError(f"The database refused the write: {exc}") from exc
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._pool_lock, self._write_lock:
            self._closed = True
            idle, self._idle = self._idle, []
            for db in [*idle, self._writer]:
                try:
                    db.close()
                except sqlite3.Error:
                    pass
