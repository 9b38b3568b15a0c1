"""One request's waits for the database, counted across all its statements.

A pooled backend waits up to its pool timeout for a connection (5 s on PostgreSQL).
A request that runs several statements could wait that long for each: an upload with
``?wait=true`` whose database went away mid-ingestion waited 5 s for the failed write
and 5 s more for the cleanup, 10.35 s where the docs promise 5. The API and the gRPC
surface open a budget per request (``one_request``); the backend takes each wait out
of it, so the whole request waits at most the pool timeout for the database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class WaitBudget:
    spent: float = 0.0  # seconds this request has waited for connections so far


_current: ContextVar[WaitBudget | None] = ContextVar("calypso_database_wait", default=None)


@contextmanager
def one_request() -> Iterator[WaitBudget]:
    """Count the database waits of the code inside (threads started with ``to_thread`` inherit it)."""
    budget = WaitBudget()
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def current() -> WaitBudget | None:
    """The running request's budget; None outside a request (workers, the CLI): each wait stands alone."""
    return _current.get()
