"""One SQLite file in WAL mode: pooled connections for reads, one writer.

All writes go through one lock and ``BEGIN IMMEDIATE`` (datasette's
pattern), so each unit of work lands whole or not at all. Reads borrow a
connection from a small pool and give it back, so the number of open files
stays bounded however many threads the server runs (a connection per thread
leaked one descriptor per short-lived worker thread). Only the classes of this
package touch connections.

A full disk is ``InsufficientStorage`` (507), never a half write: writes that
say how many bytes they add (``needs``) are refused before they start when the
room left is short, and deletes (``frees_space``) may use the reserve file
(``reserve.py``), so space can always be freed through the API.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from calypso.errors import InsufficientStorage, StorageError
from calypso.store.disk_full import insufficient_storage, sqlite_disk_full
from calypso.store.sqlite.migrations import migrate
from calypso.store.sqlite.reserve import SpaceReserve

log = logging.getLogger("calypso.store")
T = TypeVar("T")
Params = Sequence[object]
MAX_IDLE_READERS = 8  # connections kept open between reads; more are opened under load and closed after
BUSY_TIMEOUT_MS = 30_000  # how long a connection waits for another process's lock
CHECKPOINT_WAIT_MS = 2_000  # how long a log truncation after a delete waits for readers
# Kept free beyond a write's own bytes: a checkpoint fills the file's holes and grows it before the
# log can shrink; without this room a full disk refuses even the checkpoint that frees a delete's pages.
HEADROOM_BYTES = 4 * 1024 * 1024
JOURNAL_SIZE_LIMIT = 4 * 1024 * 1024
LOG_ROOM_BYTES = 1024 * 1024  # a write lands in the log first, on the disk, whatever the file has free
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
        self._kept_open: list[sqlite3.Connection] = []  # left open on a full disk, referenced here: see close()
        self._write_lock = threading.Lock()
        self.reserve = SpaceReserve(self.path.with_name(self.path.name + ".reserve"))
        self._writer = self._open()
        with self._write_lock:
            migrate(self._writer)
        self.reserve.keep()  # best effort: a disk already full starts without one
        if self._disk_free() < HEADROOM_BYTES:
            log.warning(
                "The disk holding %s is full (%d bytes free): reads work, and writes answer 507 "
                "insufficient_storage until space is freed (delete documents, or grow the disk).",
                self.path,
                shutil.disk_usage(self.path.parent).free,
            )

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        # A log that a big write grew is cut back when it restarts, not kept at its largest on a small disk.
        db.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        # Debian builds SQLite with secure_delete on, which zeroes every freed page through the log: deleting
        # a 1 MB text document wrote 3 MB of log, more than a full disk has. FAST zeroes what costs no extra
        # I/O (86 KB of log for the same delete); freed pages keep old bytes until reused (docs/deploy.md).
        db.execute("PRAGMA secure_delete = FAST")
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

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A pooled connection inside a read transaction: every read in the block sees one state of the file."""
        with self._reader() as db:
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("ROLLBACK")

    def write(self, work: Callable[[sqlite3.Connection], T], *, needs: int = 0, frees_space: bool = False) -> T:
        """Run ``work(db)`` inside one immediate transaction under the single-writer lock.

        ``needs``: bytes the work will add; refused with ``InsufficientStorage`` before it starts when
        the disk (plus the file's free pages) has less than that beyond ``HEADROOM_BYTES``, so that
        SQLite itself keeps room to checkpoint and deletes keep working. ``frees_space``: the work
        deletes (a document); on a full disk it may use the reserve (``reserve.py``).
        """
        with self._write_lock:
            if self._closed:
                raise StorageError("The database is closed.")
            if needs and not self._has_room(needs):
                raise insufficient_storage(f"the database {self.path}")
            try:
                result = self._transaction(work)
            except InsufficientStorage:
                if not frees_space or not self.reserve.release():
                    raise
                result = self._transaction(work)
            if frees_space and (not self.reserve.held or self._disk_free() < 2 * HEADROOM_BYTES):
                # Short of room: truncating the log gives its bytes back to the disk, then the reserve can
                # return. Not on every delete: the truncation waits for readers under the write lock.
                self._truncate_log()
                self.reserve.keep()
            return result

    def _disk_free(self) -> int:
        try:
            return shutil.disk_usage(self.path.parent).free
        except OSError:
            return 1 << 62  # cannot tell: let SQLite find out

    def _has_room(self, needs: int) -> bool:
        """Whether a write of ``needs`` bytes fits: the file's free pages count, but the log needs the disk."""
        free = self._disk_free()
        if free < LOG_ROOM_BYTES:
            return False
        if free >= needs + HEADROOM_BYTES:
            return True  # the disk alone has room: the file's free pages need not be counted (two statements)
        pages = self._writer.execute("PRAGMA freelist_count").fetchone()[0]
        size = self._writer.execute("PRAGMA page_size").fetchone()[0]
        return bool(free + pages * size >= needs + HEADROOM_BYTES)

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        db = self._writer
        try:
            db.execute("BEGIN IMMEDIATE")
            result = work(db)
            db.execute("COMMIT")
            return result
        except sqlite3.Error as exc:
            self._rollback(db)
            if sqlite_disk_full(exc, self.path):
                raise insufficient_storage(f"the database {self.path}") from exc
            raise StorageError(f"The database refused the write: {exc}") from exc
        except BaseException:
            self._rollback(db)
            raise

    def _truncate_log(self) -> None:
        """Copy the write-ahead log into the file and cut it to zero bytes, giving its room back to the disk."""
        db = self._writer
        try:
            db.execute(f"PRAGMA busy_timeout = {CHECKPOINT_WAIT_MS}")  # under the write lock: wait briefly for readers
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # readers hold the log, or the file cannot grow: the write's own error is what the caller hears
        finally:
            with contextlib.suppress(sqlite3.Error):
                db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    @staticmethod
    def _rollback(db: sqlite3.Connection) -> None:
        # SQLite has already rolled back after some errors (SQLITE_FULL among them): a second
        # ROLLBACK would raise "no transaction is active" and hide the real error.
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # gone either way; the original error is the one to report
                db.execute("ROLLBACK")

    def close(self) -> None:
        with self._pool_lock, self._write_lock:
            self._closed = True
            idle, self._idle = self._idle, []
            connections = [*idle, self._writer]
            if self._disk_free() < HEADROOM_BYTES:
                # The last close checkpoints the log and deletes -wal and -shm; a restart on this full disk
                # could not create them again, and would not even serve reads. Left open, they stay (the
                # process exits soon: a server's shutdown), as when it is killed.
                log.warning("The disk holding %s is full: its write-ahead log is kept for the next start.", self.path)
                self._kept_open = connections
                return
            for db in connections:
                with contextlib.suppress(sqlite3.Error):
                    db.close()
