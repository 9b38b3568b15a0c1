"""A folder on the server (or a mounted share): its files by relative path, versioned by mtime and size.

Bounded against what a directory tree can do: a directory reached twice (a symlink loop, a bind mount) is
walked once, depth and file count have ceilings, a file larger than the upload limit is reported and
skipped. A file modified within the last ``settle_seconds`` is being written: it is left as it was until
a later sync finds it still. Names starting with a dot (``.git``, editors' swap files) are left out.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from calypso.sources.model import ConnectorOptions, Fetched, Found, Gone, ItemFailed, Known, NotModified, Scan

MAX_DEPTH = 64
MAX_FILES = 200_000


def matches(relative: str, patterns: list[str]) -> bool:
    """A pattern with a '/' matches the relative path, one without matches the file's name."""
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(relative if "/" in p else name, p) for p in patterns)


class FolderConnector:
    def __init__(self, settings: dict[str, Any], options: ConnectorOptions) -> None:
        self.root = Path(settings["path"])
        self.recursive = bool(settings["recursive"])
        self.include: list[str] = settings["include"]
        self.exclude: list[str] = settings["exclude"]
        self.settle = float(settings["settle_seconds"])
        self.max_bytes = options.max_bytes

    def scan(self, known: dict[str, Known], scan: Scan) -> Iterator[Found]:
        if not self.root.is_dir():
            scan.complete = False
            scan.error(str(self.root), "The folder is not there (unmounted, moved or deleted): nothing was removed.")
            return
        visited: set[tuple[int, int]] = set()
        for count, (relative, info) in enumerate(self._walk(self.root, "", 0, visited, scan), start=1):
            if count > MAX_FILES:
                scan.complete = False
                scan.error(str(self.root), f"More than {MAX_FILES:,} files: the rest were not read.")
                return
            yield self._found(relative, info)

    def _walk(
        self, directory: Path, prefix: str, depth: int, visited: set[tuple[int, int]], scan: Scan
    ) -> Iterator[tuple[str, os.stat_result]]:
        try:
            info = directory.stat()
        except OSError as exc:
            scan.complete = False
            scan.error(prefix or str(directory), f"Cannot read the directory: {exc.strerror}.")
            return
        if (info.st_dev, info.st_ino) in visited:
            scan.error(prefix, "A directory reached twice (a symbolic link loop): walked once.")
            return
        visited.add((info.st_dev, info.st_ino))
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            scan.complete = False
            scan.error(prefix or str(directory), f"Cannot list the directory: {exc.strerror}.")
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            relative = f"{prefix}{entry.name}"
            try:
                entry_info = entry.stat()  # follows links: a link to a file is that file
            except OSError:
                continue  # a dangling link, or gone since the listing
            if stat.S_ISDIR(entry_info.st_mode):
                if self.recursive and depth < MAX_DEPTH:
                    yield from self._walk(Path(entry.path), relative + "/", depth + 1, visited, scan)
                elif self.recursive:
                    scan.error(relative, f"Deeper than {MAX_DEPTH} directories: not read.")
            elif (
                stat.S_ISREG(entry_info.st_mode)
                and matches(relative, self.include)
                and not matches(relative, self.exclude)
            ):
                yield relative, entry_info

    def _found(self, relative: str, info: os.stat_result) -> Found:
        version = f"{info.st_mtime_ns}-{info.st_size}"
        pending = time.time() - info.st_mtime < self.settle
        path = self.root / relative

        def load(known: Known | None) -> Fetched | NotModified:
            if info.st_size > self.max_bytes:
                raise ItemFailed(f"{info.st_size:,} bytes, over the upload limit of {self.max_bytes:,}: skipped.")
            try:
                with path.open("rb") as handle:
                    data = handle.read(self.max_bytes + 1)
                    after = os.fstat(handle.fileno())
            except FileNotFoundError as exc:
                raise Gone(relative) from exc
            except OSError as exc:
                raise ItemFailed(f"Cannot read it: {exc.strerror}.") from exc
            if after.st_mtime_ns != info.st_mtime_ns or after.st_size != len(data):
                raise ItemFailed("It changed while it was read (still being written): read again at the next sync.")
            return Fetched(data, relative, version, metadata={"path": relative[:512]})

        return Found(relative, version, load, pending=pending)
