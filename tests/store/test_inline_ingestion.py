"""``ingest(wait=True)`` of a small text upload: stored with its job already claimed, parsed in place, all or
nothing (issue 30: the fast path keeps every guarantee of the queued one)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_support import RawDatabase

from calypso.config import Settings
from calypso.errors import CalypsoError, StorageError
from calypso.ingest import isolation
from calypso.services import Services, open_services
from calypso.services.ingest_worker import worker_id
from calypso.store.sqlite.database import Database

TEXT = b"The harbour crane lifts containers before dawn. Its operators start their shift at four."
TABLES = ("documents", "pages", "chunks", "ingest_jobs")


@pytest.fixture
def raw(settings: Settings) -> Iterator[RawDatabase]:
    db = RawDatabase.of(settings)
    yield db
    db.close()


def _left(raw: RawDatabase) -> dict[str, int]:
    counts = {table: int(raw.scalar(f"SELECT COUNT(*) FROM {table}")) for table in TABLES}
    counts["added"] = int(raw.scalar("SELECT COUNT(*) FROM document_changes WHERE kind = 'added'"))
    return counts


NOTHING = dict.fromkeys((*TABLES, "added"), 0)


def test_a_text_upload_is_stored_and_searchable_in_one_call(services: Services, raw: RawDatabase) -> None:
    result = services.documents.ingest(TEXT, "crane.txt", "ops")
    assert result.created and result.document.status == "completed" and result.document.chunk_count == 1
    assert _left(raw) == {"documents": 1, "pages": 1, "chunks": 1, "ingest_jobs": 0, "added": 1}
    assert [p.document.id for p in services.search.search("harbour crane", "ops")] == [result.document.id]
    again = services.documents.ingest(TEXT, "crane.txt", "ops")  # the same bytes: the stored document
    assert not again.created and again.document.id == result.document.id


def test_analysis_failing_midway_leaves_nothing(
    services: Services, raw: RawDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(texts: object) -> object:
        raise RuntimeError("a bug in the analyzer")

    monkeypatch.setattr("calypso.services.ingest_worker.analyze_many", broken)
    with pytest.raises(CalypsoError) as caught:
        services.documents.ingest(TEXT, "crane.txt", "ops")
    assert caught.value.status == 500 and "failed on the server" in caught.value.message
    assert _left(raw) == NOTHING


def test_a_parse_failing_in_place_leaves_nothing(
    services: Services, raw: RawDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> object:
        raise RuntimeError("a bug in the text parser")

    monkeypatch.setattr(isolation, "parse_document", broken)
    with pytest.raises(CalypsoError):
        services.documents.ingest(TEXT, "crane.txt", "ops")
    assert _left(raw) == NOTHING


def test_the_store_failing_at_the_end_leaves_nothing(
    services: Services, raw: RawDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*args: object, **kwargs: object) -> object:
        raise StorageError("The database refused the write: disk I/O error")

    monkeypatch.setattr(services.storage.jobs, "complete", refused)
    with pytest.raises(StorageError):
        services.documents.ingest(TEXT, "crane.txt", "ops")
    assert _left(raw) == NOTHING


def test_a_refused_text_upload_leaves_nothing(services: Services, raw: RawDatabase) -> None:
    with pytest.raises(CalypsoError) as caught:
        services.documents.ingest(b"\x00\x01\x02 binary \x00" * 50, "data.txt", "ops")
    assert caught.value.status == 415
    assert _left(raw) == NOTHING


@pytest.mark.backends("sqlite")
def test_a_one_page_upload_costs_two_transactions_and_fifteen_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The contract behind keyword-searchable ingestion's speed (issue 30, docs/benchmarks/ingestion.md): one
    transaction stores the upload with its claimed job, one completes it; no thread and no parse child."""
    statements: list[str] = []
    opened = Database._open

    def traced(self: Database) -> sqlite3.Connection:
        connection = opened(self)
        connection.set_trace_callback(statements.append)
        return connection

    def no_child(processes: int) -> object:
        raise AssertionError("a small text upload reached for a parse child")

    monkeypatch.setattr(Database, "_open", traced)
    services = open_services(Settings(home=tmp_path / "home", embedding_model="none"))
    try:
        services.documents.ingest(b"A warm-up upload.", "warm.txt", "ops")
        monkeypatch.setattr(isolation, "shared_pool", no_child)
        threads = threading.active_count()
        statements.clear()
        document = services.documents.ingest(TEXT, "crane.txt", "ops").document
        assert document.status == "completed"
        assert threading.active_count() == threads
        assert statements.count("BEGIN IMMEDIATE") == 2 and statements.count("COMMIT") == 2
        assert len(statements) <= 15, "\n".join(statements)
    finally:
        services.close()


CRASHING_OWNER = """
import os, signal, sys
from pathlib import Path
from calypso.config import Settings
from calypso.services import open_services

services = open_services(Settings(home=Path(sys.argv[1]), embedding_model="none"), exclusive=True)
def crash(texts):
    os.kill(os.getpid(), signal.SIGKILL)  # parsed and chunked, nothing completed: the process dies here
import calypso.services.ingest_worker as worker
worker.analyze_many = crash
services.documents.ingest(sys.argv[2].encode(), "crane.txt", "ops")
"""


@pytest.mark.backends("sqlite")
def test_a_process_killed_mid_upload_leaves_a_job_the_restart_finishes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("CALYPSO_DATABASE_URL", None)
    owner = subprocess.run([sys.executable, "-c", CRASHING_OWNER, str(home), TEXT.decode()], env=env, timeout=120)
    assert owner.returncode == -signal.SIGKILL
    with sqlite3.connect(home / "calypso.sqlite3") as db:
        assert db.execute("SELECT status FROM documents").fetchall() == [("in_progress",)]
        assert db.execute("SELECT COUNT(*) FROM chunks").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM pages").fetchone() == (0,)
        assert db.execute("SELECT attempts, lease_owner IS NOT NULL FROM ingest_jobs").fetchall() == [(1, 1)]

    services = open_services(Settings(home=home, embedding_model="none"), exclusive=True)
    try:  # the dead owner's lease is freed at once (the lock names it); a worker takes the job
        job = services.storage.jobs.claim(worker_id("ingest0"), 30)
        assert job is not None and job.attempts == 2
        services.storage.jobs.release(job.document_key, job.lease_owner or "")
        document = services.documents.ingest(TEXT, "crane.txt", "ops").document  # follows the queued job
        assert document.status == "completed" and document.chunk_count == 1
        assert services.search.search("harbour crane", "ops")
    finally:
        services.close()
