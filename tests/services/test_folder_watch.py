"""A folder source's watch (watchfiles): a file written into the folder is ingested without anyone asking,
once it is complete; one deleted leaves. The sync workers of the process run the syncs the watch asks for."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from calypso.config import Settings
from calypso.services import Services


def eventually(check: Callable[[], bool], seconds: float = 15.0) -> None:
    end = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < end, "not within the time allowed"
        time.sleep(0.05)


def test_a_watched_folder_follows_its_files(settings: Settings, services: Services, tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    settings.source_roots = str(tmp_path)
    settings.job_poll_seconds = 0.1
    source = services.sources.create({"type": "folder", "namespace": "w", "path": str(folder), "settle_seconds": 0.3})
    workers = services.sources.workers(1, role="test")
    workers.start()
    try:

        def names() -> set[str]:
            return {d.filename for d in services.documents.list_documents("w", 100).items}

        def synced() -> bool:
            return services.sources.get(source.id).last_sync is not None

        eventually(synced)
        (folder / "fresh.md").write_text("# Fresh\n\nThe jerboa note arrived.\n")
        eventually(lambda: names() == {"fresh.md"})  # written now: pending first, taken once settled
        (folder / "fresh.md").unlink()
        eventually(lambda: names() == set())
    finally:
        workers.stop(5)
