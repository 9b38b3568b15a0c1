"""Where one namespace's index snapshots live on disk, how a new one replaces the old atomically, and the lock
that makes every process on a host share one.

``.lock`` in the namespace's directory: a reader holds it shared while it opens the current snapshot (so no
writer removes it halfway); a writer holds it exclusively while it writes one; a process that found no
snapshot to use holds it exclusively from before its build until its snapshot is written, so the other
processes of the host wait and load that one instead of building their own (PostgreSQL: many API processes).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import BinaryIO
from urllib.parse import quote

_BUILD_PREFIX = ".build-"  # a build's spilled postings (``BM25Index.add_many``), removed once it is saved


class SnapshotLock:
    """A held ``flock`` on a namespace's ``.lock``; another thread may release it (the saver of a build)."""

    def __init__(self, file: BinaryIO) -> None:
        self._file: BinaryIO | None = file

    def release(self) -> None:
        """Drop the lock (once; later calls do nothing)."""
        if self._file is not None:
            self._file.close()  # closing the description drops the lock
            self._file = None

    def __enter__(self) -> SnapshotLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()


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

    def lock(self, *, shared: bool = False, wait: bool = True) -> SnapshotLock | None:
        """The namespace's lock, shared (readers) or exclusive (a writer, a builder), across threads and processes;
        None when ``wait`` is off and another holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        file = open(self.path / ".lock", "a+b")  # noqa: SIM115 - held by the SnapshotLock until released
        try:
            flags = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
            fcntl.flock(file.fileno(), flags)
        except BlockingIOError:
            file.close()
            return None
        except BaseException:
            file.close()
            raise
        return SnapshotLock(file)

    def build_directory(self) -> Path:
        """A fresh directory for a build's spilled postings; the caller holds the exclusive lock, so any other one
        here was left by a process that died while building, and is removed."""
        for old in self.path.glob(f"{_BUILD_PREFIX}*"):
            shutil.rmtree(old, ignore_errors=True)
        directory = self.path / f"{_BUILD_PREFIX}{uuid.uuid4().hex[:12]}"
        directory.mkdir(parents=True)
        return directory

    @contextmanager
    def writing(self, held: SnapshotLock | None = None) -> Iterator[Path | None]:
        """A new snapshot directory to fill; ``CURRENT`` points at it once the block ends without an error, and the
        older ones are removed. With ``held`` (the caller's exclusive lock) it is written under that lock; without,
        under the lock taken here, or None when another process or thread holds it (a reader or a saver)."""
        lock = held if held is not None else self.lock(wait=False)
        if lock is None:
            yield None
            return
        try:
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
            for old in self.path.iterdir():  # a loaded index keeps its files open: unlinking them is safe
                if old.name.startswith("snap-") and old != directory:
                    shutil.rmtree(old, ignore_errors=True)
                elif old.name.startswith("CURRENT.") and old.name.endswith(".tmp"):
                    old.unlink(missing_ok=True)
        finally:
            if held is None:
                lock.release()
