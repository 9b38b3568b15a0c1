"""What only the PostgreSQL backend has to prove: concurrent migrations, start-up errors, outages, streaming."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import psycopg
import pytest

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.errors import StorageError, StoreUnavailable
from calypso.services import open_services
from calypso.services.ingestion import Upload
from calypso.store.postgres import PostgresStorage, redact_url
from calypso.store.postgres import database as pg_database
from calypso.store.postgres.migrations import MIGRATIONS, require_extension
from testkit.live_server import LiveServer, free_port
from testkit.postgres import PgServer
from testkit.stores import add_document

pytestmark = pytest.mark.backends("postgres")
T = TypeVar("T")


def _eventually(call: Callable[[], T], seconds: float = 30) -> T:
    """``call()`` once it stops raising StoreUnavailable (the pool reconnects with backoff)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def outage(pg_server: PgServer) -> Iterator[PgServer]:
    """The session's server, to stop mid-test; always running again afterwards."""
    yield pg_server
    pg_server.start()


def test_redact_url() -> None:
    assert (
        redact_url("postgresql://calypso:s3cr%40t@db.example:5432/kb") == "postgresql://calypso:***@db.example:5432/kb"
    )
    assert redact_url("postgresql://calypso@db/kb") == "postgresql://calypso@db/kb"
    assert redact_url("postgresql://u:p@ss@db/kb?sslmode=require") == "postgresql://u:***@db/kb?sslmode=require"
    assert (
        redact_url("postgresql:///kb?user=u&password=secret&host=/tmp")
        == "postgresql:///kb?user=u&password=***&host=/tmp"
    )


def test_unreachable_at_start_is_one_line_naming_the_url_without_password() -> None:
    url = f"postgresql://calypso:hunter2@127.0.0.1:{free_port()}/calypso"
    with pytest.raises(StoreUnavailable) as failed:
        PostgresStorage(url)
    message = failed.value.message
    assert "\n" not in message and "hunter2" not in message
    assert f"postgresql://calypso:***@127.0.0.1:{url.split(':')[3].split('/')[0]}/calypso" in message


def test_serve_exits_1_with_one_line_when_the_database_is_unreachable(tmp_path: Path) -> None:
    url = f"postgresql://calypso:hunter2@127.0.0.1:{free_port()}/calypso"
    env = {**os.environ, "CALYPSO_HOME": str(tmp_path), "CALYPSO_DATABASE_URL": url, "CALYPSO_PORT": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "calypso.cli", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "postgresql://calypso:***@127.0.0.1:" in errors[0]
    assert "hunter2" not in done.stderr + done.stdout


def test_a_bad_url_setting_is_refused_without_echoing_it(tmp_path: Path) -> None:
    env = {**os.environ, "CALYPSO_HOME": str(tmp_path), "CALYPSO_DATABASE_URL": "mysql://u:hunter2@db/x"}
    done = subprocess.run(
        [sys.executable, "-m", "calypso.cli", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "CALYPSO_DATABASE_URL" in done.stderr and "hunter2" not in done.stderr


def test_pool_size_setting_bounds_the_connections_a_process_holds(tmp_path: Path, database_url: str) -> None:
    services = open_services(Settings(home=tmp_path, database_pool_size=3))
    try:
        pool = services.storage.documents.database.pool  # type: ignore[attr-defined]
        assert pool.max_size == 3
    finally:
        services.close()


def test_processes_starting_at_once_apply_each_migration_exactly_once(database_url: str) -> None:
    script = (
        "import sys; from calypso.store.postgres import PostgresStorage; "
        "s = PostgresStorage(sys.argv[1]); print(','.join(s.database.applied)); s.close()"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, database_url], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outputs = [proc.communicate(timeout=60)[0].strip() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0, 0]
    applied = [name for out in outputs for name in out.split(",") if name]
    assert sorted(applied) == sorted(name for name, _ in MIGRATIONS)  # each once, by whichever process got there
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT name FROM migrations ORDER BY applied_at, name").fetchall()
        assert [r[0] for r in rows] == [name for name, _ in MIGRATIONS]
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone() is not None


def test_a_missing_extension_is_named(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn, pytest.raises(StorageError) as refused:
        require_extension(conn, "no_such_extension")
    assert "'no_such_extension' extension" in refused.value.message and "install" in refused.value.message


def test_namespace_chunks_streams_through_a_server_side_cursor(database_url: str, monkeypatch) -> None:
    from calypso.models import Chunk, Document, Page

    monkeypatch.setattr(pg_database, "STREAM_BATCH", 50)
    storage = PostgresStorage(database_url)
    for d in range(30):
        doc = Document(f"d{d}", f"file-d{d}", "w", "ns", "a.txt", "text/plain", 1, f"sha{d}", 1, 1, 10)
        chunks = [Chunk(i, f"chunk {i} of {d}", 0, 1, 1, 1, ("1",)) for i in range(10)]
        add_document(storage, doc, [Page(1, "1", 0, 1)], chunks, b"x")
    stream = storage.feed.namespace_chunks("w", "ns")
    first_key, first_chunks = next(stream)
    assert [c.text for c in first_chunks] == [f"chunk {i} of 0" for i in range(10)]
    with psycopg.connect(database_url) as conn:
        # While the caller holds the first document, the server has sent one batch of 50 rows, not 300.
        queries = [r[0] for r in conn.execute("SELECT query FROM pg_stat_activity WHERE datname = current_database()")]
    assert any(q.startswith('FETCH FORWARD 50 FROM "calypso_stream"') for q in queries), queries
    rest = list(stream)
    assert len(rest) == 29 and all(len(chunks) == 10 for _, chunks in rest)
    storage.close()


def test_connection_killed_mid_transaction_writes_nothing_and_the_pool_recovers(database_url: str) -> None:
    storage = PostgresStorage(database_url)

    def work(db: psycopg.Connection) -> None:
        db.execute("INSERT INTO workspace_policies (workspace, sources_policy) VALUES ('w', 'hidden')")
        db.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    with pytest.raises(StoreUnavailable):
        storage.database.write(work)
    assert storage.policies.sources_policy("w") is None  # nothing half-written, and a fresh connection served it
    storage.policies.set_sources_policy("w", "hidden")
    assert storage.policies.sources_policy("w") == "hidden"
    storage.close()


def test_backends_terminated_between_requests_are_replaced_unnoticed(database_url: str, pg_server: PgServer) -> None:
    storage = PostgresStorage(database_url, min_size=3)
    storage.policies.set_sources_policy("w", "hidden")
    name = database_url.rsplit("/", 1)[1].split("?")[0]
    pg_server.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
    assert storage.policies.sources_policy("w") == "hidden"  # the pool's check found the dead connection
    storage.close()


def test_database_down_is_503_with_retry_after_then_recovers(
    tmp_path: Path, database_url: str, outage: PgServer
) -> None:
    settings = Settings(home=tmp_path)
    services = open_services(settings)
    services.storage.database.pool.timeout = 1.0  # type: ignore[attr-defined] - answer an outage quickly here
    doc = services.ingestion.ingest(Upload(b"Harbour cranes are inspected every spring.", "cranes.txt")).document
    with LiveServer(create_app(settings, services), free_port()) as server, httpx.Client(base_url=server.url) as http:
        assert http.get(f"/v1/documents/{doc.id}").status_code == 200
        outage.stop()
        down = http.get(f"/v1/documents/{doc.id}")
        assert down.status_code == 503, down.text
        assert down.headers["retry-after"] == "2"
        error = down.json()["error"]
        assert error["type"] == "server_error" and error["code"] == "database_unavailable"
        assert "host=" not in error["message"] and "postgresql://" not in error["message"]
        upload = http.post("/v1/documents", files={"file": ("lamps.txt", b"Lighthouse lamps are cleaned weekly.")})
        assert upload.status_code == 503 and upload.headers["retry-after"] == "2"
        outage.start()
        deadline = time.monotonic() + 30
        while (back := http.get(f"/v1/documents/{doc.id}")).status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert back.status_code == 200 and back.json()["id"] == doc.id
        assert [d["filename"] for d in http.get("/v1/documents").json()["data"]] == [
            "cranes.txt"
        ]  # nothing half-written
    _eventually(lambda: services.ingestion.ingest(Upload(b"Lighthouse lamps are cleaned weekly.", "lamps.txt")))
    services.close()


def test_one_request_waits_for_the_database_once_not_once_per_statement(
    tmp_path: Path, database_url: str, outage: PgServer
) -> None:
    """An upload with ?wait=true whose database left mid-ingestion waited 5 s for its write, then 5 s more
    for the cleanup (10.35 s, bench/pg_outage_wait.py). Inside one request the waits share one budget: the
    second statement only tries for an idle connection, as the pool's own error says (no clock read here)."""
    from calypso.store.wait_budget import one_request

    storage = PostgresStorage(database_url, max_size=2)
    storage.database.pool.timeout = 1.0  # type: ignore[attr-defined] - answer the outage quickly
    try:
        outage.stop()
        with one_request():
            with pytest.raises(StoreUnavailable) as first:
                storage.policies.sources_policy("w")
            with pytest.raises(StoreUnavailable) as second:
                storage.policies.sources_policy("w")
        assert "after 1.00 sec" in str(first.value.__cause__)  # the whole budget
        assert f"after {pg_database.LAST_TRY_SECONDS:.2f} sec" in str(second.value.__cause__)  # nothing left
        with pytest.raises(StoreUnavailable) as alone:  # outside a request each wait stands alone
            storage.policies.sources_policy("w")
        assert "after 1.00 sec" in str(alone.value.__cause__)
    finally:
        outage.start()
        storage.close()
