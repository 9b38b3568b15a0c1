"""Our own bound on concurrent upstream requests, in front of httpx's connection pool.

httpcore's pool re-scans every queued request against every connection each
time one is released (encode/httpcore#1035): with 1,000 streams queued behind
256 connections, that scan took 35% of the event loop and a quarter of the
streams ran out their pool timeout. An ``asyncio.Semaphore`` wakes one waiter
per release in O(1); the pool, sized to the same limit, then never queues.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from calypso.errors import UpstreamBusy


class UpstreamSlots:
    """``limit`` concurrent upstream requests per event loop; a request waits ``timeout`` seconds for one."""

    def __init__(self, limit: int, timeout: float) -> None:
        self.limit, self.timeout = limit, timeout
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _current(self) -> asyncio.Semaphore:
        # A semaphore belongs to the loop it first waited on, as the httpx client does: one per loop.
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore, self._loop = asyncio.Semaphore(self.limit), loop
        return self._semaphore

    @property
    def in_use(self) -> int:
        """Slots held right now on the current loop's semaphore (for tests and metrics)."""
        semaphore = self._semaphore
        return 0 if semaphore is None else self.limit - semaphore._value

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the body; raises ``UpstreamBusy`` (503, Retry-After) when none frees in time."""
        semaphore = self._current()
        try:
            async with asyncio.timeout(self.timeout):
                await semaphore.acquire()
        except TimeoutError:
            raise UpstreamBusy(
                f"Too many concurrent requests to the model server: all {self.limit} upstream slots "
                f"(CALYPSO_LLM_MAX_CONNECTIONS) stayed busy for {self.timeout:g} s "
                "(CALYPSO_LLM_POOL_TIMEOUT_SECONDS). Retry shortly, or raise the limit if the model server can take it."
            ) from None
        try:
            yield
        finally:
            semaphore.release()
