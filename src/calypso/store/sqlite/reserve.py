"""Room kept back on the data directory's disk, so that deletes can still run when it is full.

In WAL mode even a DELETE appends pages to the write-ahead log first, so on a full
disk SQLite refuses the very write that would free space (SQLITE_FULL). The
database keeps a file of ``RESERVE_BYTES`` beside itself; a freeing write that
meets a full disk removes it and tries once more, then truncates the log and puts
the reserve back when the disk has room again.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from pathlib import Path

log = logging.getLogger("calypso.store")

RESERVE_BYTES = 2 * 1024 * 1024  # measured: deleting a 1 MB text document appends 86 KB of log


class SpaceReserve:
    def __init__(self, path: Path, size: int = RESERVE_BYTES) -> None:
        self.path, self.size = path, size

    @property
    def held(self) -> bool:
        try:
            return self.path.stat().st_size >= self.size
        except OSError:
            return False

    def keep(self) -> bool:
        """Make sure the reserve is on disk; False (and nothing left behind) when the disk has no room for it."""
        if self.held:
            return True
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                _allocate(fd, self.size)
            finally:
                os.close(fd)
        except OSError:
            with contextlib.suppress(OSError):
                self.path.unlink()
            return False
        return True

    def release(self) -> bool:
        """Give the reserve's room back to the disk; False when there was none to give."""
        if not self.path.exists():
            return False
        try:
            self.path.unlink()
        except OSError:
            return False
        log.warning("the disk under %s is full: released the %d-byte reserve to let a delete run", self.path, self.size)
        return True


def _allocate(fd: int, size: int) -> None:
    """Real blocks, not a sparse file: the room must exist when it is given back."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system without fallocate: write zeros
            raise
        block = b"\0" * 65536
        for _ in range(0, size, len(block)):
            os.write(fd, block)
