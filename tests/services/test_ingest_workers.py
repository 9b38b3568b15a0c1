"""`calypso worker` processes over one PostgreSQL database: a killed worker's job is finished by another,
and two workers never run the same job twice. Real processes, real signals, a real database."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_support import RawDatabase

from calypso.config import Settings
from calypso.services import Services, open_services
from calypso.services.ingestion import Upload

pytestmark = pytest.mark.backends("postgres")


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", job_lease_seconds=2, ingest_workers=0)


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    opened = open_services(settings)
    yield opened
    opened.close()


def _start_worker(settings: Settings, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CALYPSO_HOME": str(settings.home),
        "CALYPSO_DATABASE_URL": settings.database_url,
        "CALYPSO_JOB_LEASE_SECONDS": "2",
        "CALYPSO_JOB_POLL_SECONDS": "0.1",
        "CALYPSO_PARSE_PROCESSES": "0",  # no parser children to orphan when the worker is killed
        "CALYPSO_LOG_LEVEL": "INFO",
    }
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "calypso.cli", "worker", "--threads", "1"], env=env, stdout=out, stderr=out
        )


def _until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
    return found


def _text(n_sentences: int, seed: int = 0) -> bytes:
    return " ".join(
        f"Sentence {i} of batch {seed}: the harbour crane {i % 97} lifts container {i * 7 % 1009} before dawn."
        for i in range(n_sentences)
    ).encode()


def _chunk_indices(raw: RawDatabase, document_key: int) -> list[int]:
    return [r[0] for r in raw.execute(f"SELECT chunk_index FROM chunks WHERE document_key = {document_key} ORDER BY 1")]


def test_a_worker_killed_mid_job_leaves_it_to_another(
    settings: Settings, services: Services, raw: RawDatabase, tmp_path: Path
) -> None:
    doc = services.ingestion.submit(Upload(_text(60_000), "big.txt", "ops")).document  # ~5 MB: seconds of work
    key = services.storage.documents.document_key("default", doc.id)
    assert key is not None
    first = _start_worker(settings, tmp_path / "first.log")
    second: subprocess.Popen[bytes] | None = None
    try:
        job = _until(
            lambda: (j := services.storage.jobs.jobs("default", [doc.id]).get(doc.id)) and j.lease_owner and j,
            60,
            "the first worker to claim the job",
        )
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        # Right after the kill: nothing of the document written, the job still the dead worker's.
        state = services.storage.documents.get_document("default", doc.id)
        assert state is not None and state.status == "in_progress", "the job ended before the kill: use more text"
        assert raw.scalar(f"SELECT COUNT(*) FROM chunks WHERE document_key = {key}") == 0
        assert raw.scalar(f"SELECT COUNT(*) FROM pages WHERE document_key = {key}") == 0
        assert services.storage.jobs.jobs("default", [doc.id])[doc.id].lease_owner == job.lease_owner

        second = _start_worker(settings, tmp_path / "second.log")
        done = _until(
            lambda: (
                (d := services.storage.documents.get_document("default", doc.id)) and d.status != "in_progress" and d
            ),
            120,
            "the second worker to finish the job",
        )
        assert done.status == "completed", done.last_error
        assert done.chunk_count > 100 and done.page_count == 1
        assert _chunk_indices(raw, key) == list(range(done.chunk_count))  # each once, none missing
        assert raw.scalar(f"SELECT COUNT(*) FROM pages WHERE document_key = {key}") == 1
        assert raw.scalar("SELECT COUNT(*) FROM ingest_jobs") == 0
        added = raw.execute(f"SELECT kind FROM document_changes WHERE document_key = {key}")
        assert added == [("added",)]
        assert services.search.search("harbour crane 42", services.search.scope("ops"))  # searchable from the store
        # A graceful stop.
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
        assert "calypso worker: stopped" in (tmp_path / "second.log").read_text()
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)


def test_two_workers_never_run_the_same_job_twice(
    settings: Settings, services: Services, raw: RawDatabase, tmp_path: Path
) -> None:
    docs = [services.ingestion.submit(Upload(_text(1500, seed=n), f"doc{n}.txt")).document for n in range(8)]
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    workers = [_start_worker(settings, log) for log in logs]
    try:
        ids = [d.id for d in docs]
        _until(
            lambda: all(
                d.status == "completed" for d in services.storage.documents.get_documents_by_id("default", ids).values()
            ),
            120,
            "every job to complete",
        )
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(30)
    stored = services.storage.documents.get_documents_by_id("default", [d.id for d in docs])
    keys = services.storage.documents.document_keys("default", [d.id for d in docs])
    completions: list[int] = []
    for log in logs:
        completions += [int(k) for k in re.findall(r"job (\d+) \(doc\d+\.txt\) completed by", log.read_text())]
    assert sorted(completions) == sorted(keys.values())  # each job run to completion exactly once
    for doc_id, key in keys.items():
        assert stored[doc_id].chunk_count > 1
        assert _chunk_indices(raw, key) == list(range(stored[doc_id].chunk_count))
    kinds = raw.execute("SELECT document_key, kind FROM document_changes ORDER BY seq")
    assert sorted(kinds) == sorted((key, "added") for key in keys.values())
