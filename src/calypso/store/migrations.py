"""How a backend's schema migrations are applied: named, ordered functions recorded in a table.

Each backend keeps its own history (``sqlite/migrations.py``, ``postgres/migrations.py``): the DDL differs,
and a database that has run a migration finds it again by name, so a recorded migration never changes
and the two lists are never merged. What they share is this runner. The backend creates the
``migrations`` table, reads what is recorded, and passes ``transaction``: a context that takes its lock
(SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's advisory lock), commits when the block ends and rolls back
when it raises; ``check`` runs after a migration, before it is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar


class _Connection(Protocol):
    def execute(self, sql: str, params: Any = ..., /) -> Any: ...


C = TypeVar("C", bound=_Connection)


def recorded(db: _Connection) -> set[str]:
    """The names of the migrations the database has run."""
    return {row[0] for row in db.execute("SELECT name FROM migrations")}


def apply(
    db: C,
    migrations: Sequence[tuple[str, Callable[[C], None]]],
    done: set[str],
    transaction: Callable[[], AbstractContextManager[object]],
    mark: str,
    check: Callable[[C, str], None] | None = None,
) -> list[str]:
    """Apply every migration not in ``done``, each in its own locked transaction; return the names applied."""
    applied = []
    for name, migration in migrations:
        if name in done:
            continue
        with transaction():
            if name in recorded(db):
                continue  # another process applied it while we waited for the lock
            migration(db)
            if check is not None:
                check(db, name)
            db.execute(f"INSERT INTO migrations (name, applied_at) VALUES ({mark}, {mark})", (name, int(time.time())))
        applied.append(name)
    return applied
