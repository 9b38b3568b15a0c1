"""A full disk, said the same way by every backend: ``InsufficientStorage`` (507, ``insufficient_storage``).

SQLite reports it as SQLITE_FULL, or as an I/O error when its WAL index cannot grow; PostgreSQL
as SQLSTATE 53100 (disk_full); files as ENOSPC or EDQUOT. The message names the place that is
full and how to make room, since a full disk does not pass by waiting.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

from calypso.errors import InsufficientStorage

LOW_SPACE_BYTES = 1024 * 1024  # an SQLite I/O error with less free than this is the disk being full
PG_DISK_FULL = "53100"


def insufficient_storage(where: str) -> InsufficientStorage:
    return InsufficientStorage(
        f"The disk holding {where} is full, so nothing new can be stored. Reads still work: free space by deleting "
        "documents (DELETE /v1/documents/{id} or /v1/files/{id}), or grow the disk, then retry."
    )


def _low_space(path: Path) -> bool:
    try:
        return shutil.disk_usage(path.parent if not path.is_dir() else path).free < LOW_SPACE_BYTES
    except OSError:
        return False


def sqlite_disk_full(exc: BaseException, path: Path) -> bool:
    """Whether ``exc`` from SQLite at ``path`` means the disk is full."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return False
    primary = code & 0xFF  # extended codes keep the primary one in their low byte
    if primary == sqlite3.SQLITE_FULL:
        return True
    return primary == sqlite3.SQLITE_IOERR and _low_space(path)


def os_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def postgres_disk_full(exc: BaseException) -> bool:
    """SQLSTATE 53100 (disk_full); psycopg also raises it as ``psycopg.errors.DiskFull``."""
    return getattr(exc, "sqlstate", None) == PG_DISK_FULL
