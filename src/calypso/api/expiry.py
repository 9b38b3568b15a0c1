"""The sweep that deletes expired files (the Files API's ``expires_after``), inside ``calypso serve``.

Until the sweep comes by, an expired file is already gone for the API: lists leave it out and its id
answers 404 (``DocumentService.get_by_file_id``); the sweep then deletes it with its vector store copies,
as ``files.delete`` does, so its passages leave search too. Several processes may sweep at once: a file
another one deleted first is skipped.
"""

from __future__ import annotations

import asyncio
import logging

from calypso.errors import CalypsoError
from calypso.services import Services

log = logging.getLogger("calypso.expiry")


async def sweep_expired_files(services: Services, interval: float) -> None:
    """Every ``interval`` seconds, delete the expired files; a failing store is retried at the next turn."""
    while True:
        try:
            deleted = await asyncio.to_thread(services.vector_stores.delete_expired_files)
        except CalypsoError as exc:  # the database is away, or closing
            log.warning("deleting expired files failed: %s", exc.message)
        else:
            if deleted:
                log.info("deleted %d expired file(s)", deleted)
        await asyncio.sleep(interval)
