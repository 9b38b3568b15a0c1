"""One SQLite file in WAL mode: a connection per thread for reads, one writer.

All writes go through one lock and ``BEGIN IMMEDIATE`` (datasette's
pattern), so each unit of work lands whole or not at all. Only the classes of
this package touch connections.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from calypso.errors import StorageError
from calypso.store.sqlite.migrations import migrate

T = TypeVar("T")


class Database:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        with self._write_lock:
            migrate(self.connection())

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (created on first use)."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
            with self._all_lock:
                self._all.append(db)
        return db

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work(db)`` inside one immediate transaction under the single-writer lock."""
        with self._write_lock:
            db = self.connection()
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
        with self._all_lock:
            for db in self._all:
                try:
                    db.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()
