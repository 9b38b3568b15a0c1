"""``ingest(wait=True)``, all or nothing on both of its paths (issue 30: the fast ones keep the queued path's
guarantees): a small text upload is parsed in place and stored completed in one transaction; a larger one is
stored with its job already claimed, which this thread then runs."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from postgres_support import RawDatabase

from calypso.config import Settings
from calypso.errors import CalypsoError, StorageError
from calypso.ingest import isolation
from calypso.services import Services, open_services
from calypso.services.ingestion import Upload
from calypso.store.sqlite.database import Database

TEXT = b"The harbour crane lifts containers before dawn. Its operators start their shift at four."
# Past what is parsed in place: parsed in a child, through a job.
BIG = b" ".join(
    b"Sentence %d: the harbour crane %d lifts container %d before dawn." % (i, i % 97, i) for i in range(20_000)
)
UPLOADS = {"small": TEXT, "big": BIG}
TABLES = ("documents", "pages", "chunks", "ingest_jobs")


def _left(raw: RawDatabase) -> dict[str, int]:
    counts = {table: int(raw.scalar(f"SELECT COUNT(*) FROM {table}")) for table in TABLES}
    counts["added"] = int(raw.scalar("SELECT COUNT(*) FROM document_changes WHERE kind = 'added'"))
    return counts


NOTHING = dict.fromkeys((*TABLES, "added"), 0)


def test_both_sizes_take_their_path() -> None:
    text = "text/plain"  # detected at submit, once
    assert isolation.parses_in_place(TEXT, "crane.txt", text) and not isolation.parses_in_place(BIG, "crane.txt", text)


@pytest.mark.parametrize("size", UPLOADS)
def test_an_upload_is_stored_and_searchable_in_one_call(services: Services, raw: RawDatabase, size: str) -> None:
    result = services.ingestion.ingest(Upload(UPLOADS[size], "crane.txt", "ops"))
    assert result.created and result.document.status == "completed"
    chunks = result.document.chunk_count
    assert _left(raw) == {"documents": 1, "pages": 1, "chunks": chunks, "ingest_jobs": 0, "added": 1}
    assert [p.document.id for p in services.search.search("harbour crane", services.search.scope("ops"))][:1] == [
        result.document.id
    ]
    again = services.ingestion.ingest(Upload(UPLOADS[size], "crane.txt", "ops"))  # the same bytes: the stored document
    assert not again.created and again.document.id == result.document.id
    assert _left(raw)["documents"] == 1


@pytest.mark.parametrize("size", UPLOADS)
def test_analysis_failing_midway_leaves_nothing(
    services: Services, raw: RawDatabase, monkeypatch: pytest.MonkeyPatch, size: str
) -> None:
    def broken(texts: object) -> object:
        raise RuntimeError("a bug in the analyzer")

    monkeypatch.setattr("calypso.ingest.pipeline.analyze_many", broken)
    with pytest.raises(CalypsoError) as caught:
        services.ingestion.ingest(Upload(UPLOADS[size], "crane.txt", "ops"))
    assert caught.value.status == 500 and "failed on the server" in caught.value.message
    assert _left(raw) == NOTHING


def test_a_parse_failing_in_place_leaves_nothing(
    services: Services, raw: RawDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> object:
        raise RuntimeError("a bug in the text parser")

    monkeypatch.setattr(isolation, "parse_document", broken)
    with pytest.raises(CalypsoError) as caught:
        services.ingestion.ingest(Upload(TEXT, "crane.txt", "ops"))
    assert caught.value.status == 500
    assert _left(raw) == NOTHING


@pytest.mark.parametrize("size", UPLOADS)
def test_the_store_failing_at_the_end_leaves_nothing(
    services: Services, raw: RawDatabase, monkeypatch: pytest.MonkeyPatch, size: str
) -> None:
    def refused(*args: object, **kwargs: object) -> object:
        raise StorageError("The database refused the write: disk I/O error")

    monkeypatch.setattr(services.storage.jobs, "complete", refused)
    monkeypatch.setattr(services.storage.jobs, "add_completed", refused)
    with pytest.raises(StorageError):
        services.ingestion.ingest(Upload(UPLOADS[size], "crane.txt", "ops"))
    assert _left(raw) == NOTHING


def test_a_refused_text_upload_leaves_nothing(services: Services, raw: RawDatabase) -> None:
    with pytest.raises(CalypsoError) as caught:
        services.ingestion.ingest(Upload(b"\x00\x01\x02 binary \x00" * 50, "data.txt", "ops"))
    assert caught.value.status == 415
    assert _left(raw) == NOTHING


def test_a_failed_copy_is_replaced_by_an_upload_parsed_in_place(services: Services, raw: RawDatabase) -> None:
    queued = services.ingestion.submit(Upload(TEXT, "crane.txt", "ops"), wake_workers=False).document
    assert services.ingestion.cancel(queued.id).status == "cancelled"
    result = services.ingestion.ingest(Upload(TEXT, "crane.txt", "ops"))
    assert result.created and result.document.id != queued.id and result.document.status == "completed"
    assert _left(raw) == {"documents": 1, "pages": 1, "chunks": 1, "ingest_jobs": 0, "added": 1}


def test_an_upload_parsed_in_place_follows_the_same_bytes_in_progress(services: Services) -> None:
    queued = services.ingestion.submit(Upload(TEXT, "crane.txt", "ops"), wake_workers=False).document
    result = services.ingestion.ingest(Upload(TEXT, "crane.txt", "ops"))  # runs the queued job, as before
    assert not result.created and result.document.id == queued.id and result.document.status == "completed"


@pytest.mark.backends("sqlite")
def test_a_one_page_upload_costs_one_transaction_of_ten_statements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The contract behind keyword-searchable ingestion's speed (issue 30, docs/benchmarks/ingestion.md): a
    duplicate check, then one transaction; no thread, no parse child."""
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
        services.ingestion.ingest(Upload(b"A warm-up upload.", "warm.txt", "ops"))
        monkeypatch.setattr(isolation, "shared_pool", no_child)
        threads = threading.active_count()
        statements.clear()
        document = services.ingestion.ingest(Upload(TEXT, "crane.txt", "ops")).document
        assert document.status == "completed"
        assert threading.active_count() == threads
        assert statements.count("BEGIN IMMEDIATE") == 1 and statements.count("COMMIT") == 1
        assert len(statements) <= 10, "\n".join(statements)
    finally:
        services.close()


CRASHING_OWNER = """
import os, signal, sys
from pathlib import Path
from calypso.config import Settings
from calypso.services import open_services
from calypso.services.ingestion import Upload

services = open_services(Settings(home=Path(sys.argv[1]), embedding_model="none"), exclusive=True)
def crash(texts):
    os.kill(os.getpid(), signal.SIGKILL)  # parsed and chunked, nothing completed: the process dies here
import calypso.ingest.pipeline as pipeline
pipeline.analyze_many = crash
services.ingestion.ingest(Upload(Path(sys.argv[2]).read_bytes(), "crane.txt", "ops"))
"""


@pytest.mark.backends("sqlite")
@pytest.mark.parametrize("size", UPLOADS)
def test_a_process_killed_mid_upload_leaves_nothing_or_a_job_the_restart_finishes(tmp_path: Path, size: str) -> None:
    home, upload = tmp_path / "home", tmp_path / "crane.txt"
    upload.write_bytes(UPLOADS[size])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("CALYPSO_DATABASE_URL", None)
    owner = subprocess.run([sys.executable, "-c", CRASHING_OWNER, str(home), str(upload)], env=env, timeout=300)
    assert owner.returncode == -signal.SIGKILL
    with sqlite3.connect(home / "calypso.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM chunks").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM pages").fetchone() == (0,)
        documents = db.execute("SELECT status FROM documents").fetchall()
        jobs = db.execute("SELECT attempts, lease_owner IS NOT NULL FROM ingest_jobs").fetchall()
    if size == "small":  # parsed before anything was stored
        assert (documents, jobs) == ([], [])
        return
    assert (documents, jobs) == ([("in_progress",)], [(1, 1)])  # stored with its claimed job

    services = open_services(Settings(home=home, embedding_model="none"), exclusive=True)
    try:  # the dead owner's lease is freed at once (the lock names it); the upload again follows the job
        document = services.ingestion.ingest(Upload(BIG, "crane.txt", "ops")).document
        assert document.status == "completed" and document.chunk_count > 1
        assert services.storage.jobs.jobs("default", [document.id]) == {}
        assert services.search.search("harbour crane", services.search.scope("ops"))
    finally:
        services.close()
