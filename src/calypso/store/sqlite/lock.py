"""One process at a time serves (or ingests into) a data directory.

Each serving process keeps its own in-memory indexes, which another process's
writes would leave stale; rather than follow them, a second process refuses to
start and names the PID that holds the directory. (Several processes over one
database is what the PostgreSQL backend is for.)
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from calypso.errors import DataDirectoryInUse


def is_held(database_path: Path) -> bool:
    """Whether some process holds ``database_path``'s lock now (a record it left may outlive a crash)."""
    lock = Path(f"{database_path}.lock")
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class ProcessLock:
    """An exclusive ``flock`` on ``<database>.lock``, holding the owner's PID; released at close or exit."""

    def __init__(self, database_path: Path) -> None:
        self.path = Path(f"{database_path}.lock")
        self._fd: int | None = None
        # The PID a previous owner left in the file: it ended without releasing (SIGKILL, a crash), so
        # the leases its workers held are provably abandoned (see SQLiteStorage).
        self.previous_owner: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DataDirectoryInUse(
                f"Another Calypso process (PID {holder}) is serving or ingesting into {self.path.parent}; "
                "stop it first, send uploads to its API, or give this process its own --home (CALYPSO_HOME)."
            ) from None
        left = os.pread(fd, 32, 0).decode(errors="replace").strip()
        self.previous_owner = int(left) if left.isdigit() and int(left) != os.getpid() else None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError:
            pass  # a full disk: the lock holds without it; the PID only names us in another process's refusal
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
