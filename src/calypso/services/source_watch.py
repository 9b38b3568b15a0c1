"""Folder sources noticed as they change: a ``watchfiles`` watch (inotify on Linux) asks for their syncs.

One thread per process with sync workers watches every folder source's directory. A change asks for a
sync at once, and again once the source's ``settle_seconds`` passed, so a file still being written (left
``pending`` by the first sync) is taken when complete. The list of folder sources is read again when this
process adds or removes one, and every ``RESCAN_SECONDS`` for those another process added. A folder that
cannot be watched (unmounted, a network share without inotify) still syncs on its schedule and when asked.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from calypso.errors import CalypsoError

log = logging.getLogger("calypso.sources")
RESCAN_SECONDS = 30.0
TICK_MS = 500  # how often the watch wakes without changes: follow-up syncs fall due, the list may change


class Watched(Protocol):
    """What the watch needs of the sources service."""

    generation: int

    def folder_sources(self) -> list[Any]: ...

    def sync(self, source_id: str, workspace: str) -> Any: ...


class FolderWatch:
    def __init__(self, service: Watched, stopping: threading.Event) -> None:
        self.service, self.stopping = service, stopping
        self._thread = threading.Thread(target=self._run, name="source-folder-watch", daemon=True)
        self._due: dict[tuple[str, str], float] = {}  # (workspace, source id) -> when to ask again

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None) -> None:
        self._thread.join(timeout)

    def _folders(self) -> dict[tuple[str, str], tuple[Path, float]]:
        return {
            (s.workspace, s.id): (Path(s.settings["path"]), float(s.settings["settle_seconds"]))
            for s in self.service.folder_sources()
            if Path(s.settings["path"]).is_dir()
        }

    def _run(self) -> None:
        try:
            import watchfiles
        except ImportError:  # the dependency is declared; a trimmed install syncs on schedule only
            log.warning("folder sources are not watched: the watchfiles package is missing")
            return
        while not self.stopping.is_set():
            generation = self.service.generation
            try:
                folders = self._folders()
            except CalypsoError as exc:
                log.warning("listing folder sources to watch failed: %s", exc.message)
                folders = {}
            if not folders:
                self._wait_for_change(generation)
                continue
            rescan_at = time.monotonic() + RESCAN_SECONDS
            roots = sorted({str(path) for path, _ in folders.values()})
            try:
                for changes in watchfiles.watch(
                    *roots, stop_event=self.stopping, rust_timeout=TICK_MS, yield_on_timeout=True, debounce=200
                ):
                    self._changed(folders, {Path(path) for _, path in changes})
                    self._fire()
                    if self.service.generation != generation or time.monotonic() > rescan_at:
                        break
            except (OSError, RuntimeError) as exc:  # a watched folder went away: list them again
                log.warning("watching folder sources stopped: %s", exc)
                self.stopping.wait(1.0)

    def _wait_for_change(self, generation: int) -> None:
        end = time.monotonic() + RESCAN_SECONDS
        while not self.stopping.is_set() and self.service.generation == generation and time.monotonic() < end:
            self.stopping.wait(TICK_MS / 1000)

    def _changed(self, folders: dict[tuple[str, str], tuple[Path, float]], paths: set[Path]) -> None:
        now = time.monotonic()
        for key, (root, settle) in folders.items():
            if any(path == root or root in path.parents for path in paths):
                self._ask(key)
                self._due[key] = now + settle + 0.5  # again once a file written now has settled

    def _fire(self) -> None:
        now = time.monotonic()
        for key, due in list(self._due.items()):
            if due <= now:
                del self._due[key]
                self._ask(key)

    def _ask(self, key: tuple[str, str]) -> None:
        workspace, source_id = key
        try:
            self.service.sync(source_id, workspace)
        except CalypsoError as exc:  # deleted meanwhile, or the database is away: the schedule still runs
            log.info("a change in folder source %s was not followed: %s", source_id, exc.message)
