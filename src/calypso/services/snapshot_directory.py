"""Where one namespace's index snapshots live on disk, and how a new one replaces the old atomically."""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote


class SnapshotDirectory:
    """Where one namespace's index snapshots live: ``CURRENT`` names the valid ``snap-*`` directory."""

    def __init__(self, root: Path, key: tuple[str, str]) -> None:
        self.path = root / quote(key[0], safe="") / quote(key[1], safe="")

    def current(self) -> Path | None:
        try:
            name = (self.path / "CURRENT").read_text(encoding="utf-8").strip()
        except OSError:
            return None
        directory = self.path / name
        return directory if name.startswith("snap-") and (directory / "manifest.json").is_file() else None

    @contextmanager
    def writing(self) -> Iterator[Path | None]:
        """A new snapshot directory to fill; ``CURRENT`` points at it once the block ends without an error, and the
        older ones are removed. None when another saver is at it."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / ".lock", "a+b") as lock:
            try:  # one saver at a time, across threads and processes (a CLI beside a server, say)
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield None
                return
            directory = self.path / f"snap-{uuid.uuid4().hex[:12]}"
            pointer = self.path / f"CURRENT.{uuid.uuid4().hex[:8]}.tmp"
            try:
                yield directory
                pointer.write_text(directory.name, encoding="utf-8")
                with open(pointer, "rb+") as file:
                    os.fsync(file.fileno())
            except BaseException:
                # A full disk stops a save midway: its partial files would hold the room deletes need.
                shutil.rmtree(directory, ignore_errors=True)
                pointer.unlink(missing_ok=True)
                raise
            os.replace(pointer, self.path / "CURRENT")
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)  # the rename itself is durable
            finally:
                os.close(fd)
            for old in self.path.iterdir():  # a loaded index keeps its mapped files open: unlinking them is safe
                if old.name.startswith("snap-") and old != directory:
                    shutil.rmtree(old, ignore_errors=True)
                elif old.name.startswith("CURRENT.") and old.name.endswith(".tmp"):
                    old.unlink(missing_ok=True)
