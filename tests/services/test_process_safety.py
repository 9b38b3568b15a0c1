"""Two processes, one database; identical uploads racing; keys that must never come back."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from postgres_support import RawDatabase
from tests_support import within

from calypso.config import Settings
from calypso.errors import DataDirectoryInUse
from calypso.services import open_services
from calypso.services.ingestion import Upload
from calypso.store.sqlite import SQLiteStorage
from testkit.live_server import free_port


def test_chunk_and_document_keys_are_never_reused(tmp_path: Path, database_url: str) -> None:
    services = open_services(Settings(home=tmp_path))
    store = services.storage.documents
    first = services.ingestion.ingest(
        Upload(b"Workspace A writes about harbour cranes.", "a.txt", workspace="a")
    ).document
    first_keys = {c.key for c in store.list_chunks("a", first.id, 100, None).items}
    first_doc_key = store.document_key("a", first.id)
    services.documents.delete(first.id, workspace="a")
    second = services.ingestion.ingest(
        Upload(b"Workspace B keeps a secret about cranes.", "b.txt", workspace="b")
    ).document
    second_keys = {c.key for c in store.list_chunks("b", second.id, 100, None).items}
    assert min(second_keys) > max(first_keys)
    assert store.document_key("b", second.id) > first_doc_key  # type: ignore[operator]
    # Even asked by a stale key, workspace A never reads B's chunk.
    assert store.get_passages("a", sorted(first_keys | second_keys)) == {}
    services.close()


def test_identical_concurrent_uploads_store_one_document(tmp_path: Path, database_url: str) -> None:
    services = open_services(Settings(home=tmp_path))
    # Large enough that parsing takes a while: every upload checks for a duplicate before any commits.
    data = "\n\n".join(f"Paragraph {i} of five identical uploads racing." for i in range(40_000)).encode()
    results, errors = [], []
    barrier = threading.Barrier(5)

    def upload() -> None:
        barrier.wait()
        try:
            results.append(services.ingestion.ingest(Upload(data, "same.txt", "race")))
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=upload) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(results) == 5
    assert len({r.document.id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert len(services.documents.list_documents("race", 100).items) == 1
    services.close()


@pytest.mark.backends("sqlite")
def test_a_second_serving_process_is_refused_naming_the_holder(tmp_path: Path, database_url: str) -> None:
    holder = SQLiteStorage(tmp_path / "calypso.sqlite3", exclusive=True)
    env = {**os.environ, "CALYPSO_HOME": str(tmp_path), "CALYPSO_PORT": "0"}
    for command in (["serve"], ["ingest", str(tmp_path / "calypso.sqlite3.lock")]):
        done = subprocess.run(
            [sys.executable, "-m", "calypso.cli", *command], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1, done.stderr
        assert f"PID {os.getpid()}" in done.stderr and str(tmp_path) in done.stderr
    try:
        SQLiteStorage(tmp_path / "calypso.sqlite3", exclusive=True)
        raise AssertionError("a second exclusive open in the same process must be refused too")
    except DataDirectoryInUse:
        pass
    holder.close()
    # Released: the next process may take it.
    SQLiteStorage(tmp_path / "calypso.sqlite3", exclusive=True).close()


THREADS = 40


def test_read_connections_stay_bounded_across_bursts(tmp_path: Path, database_url: str) -> None:
    settings = Settings(home=tmp_path)
    services = open_services(settings)
    services.ingestion.ingest(Upload(b"Lighthouse lamps are inspected weekly.", "l.txt"))

    def connections() -> int:
        if database_url:  # as the server counts them
            raw = RawDatabase.of(settings)
            count = raw.scalar(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            raw.close()
            return int(count)
        targets = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(FileNotFoundError):  # the descriptor listdir itself used
                targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        return sum(str(tmp_path) in target for target in targets)

    scope = services.search.scope()
    failures: list[BaseException] = []

    def search() -> None:
        try:
            services.search.search("lighthouse", scope)
        except BaseException as exc:  # noqa: BLE001 - a thread's failure must fail the test, not vanish
            failures.append(exc)

    def burst() -> None:
        # Fresh threads each time, as a server's worker pool replaces idle threads.
        threads = [threading.Thread(target=search) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []

    # PostgreSQL: the pool's ceiling, 10 connections, plus the index follower's LISTEN connection. SQLite: a database and a WAL descriptor per
    # connection plus the shared-memory file, for at most the writer and one reader per thread of a
    # burst (SQLite defers closing a descriptor while another connection holds a lock on the file,
    # so idle readers beyond the 8 kept may linger until the next open reuses them).
    # A leak of one per thread would pass 40 a burst.
    ceiling = 11 if database_url else 2 * (1 + THREADS) + 1
    for _ in range(5):
        burst()
        assert connections() <= ceiling
    services.close()


@pytest.mark.backends("postgres")
def test_several_serving_processes_share_one_postgres_database(tmp_path: Path, database_url: str) -> None:
    settings = Settings(home=tmp_path)
    first = open_services(settings, exclusive=True)
    second = open_services(Settings(home=tmp_path / "other"), exclusive=True)  # no lock to refuse it
    doc = first.ingestion.ingest(Upload(b"Harbour cranes are inspected every spring.", "cranes.txt")).document
    assert second.documents.get(doc.id).filename == "cranes.txt"
    assert (
        second.search.search("harbour cranes", second.search.scope())[0].document.id == doc.id
    )  # its index builds from the database
    # An index already built follows the other process's writes through the change feed, within a second.
    later = first.ingestion.ingest(Upload(b"Lighthouse lamps are cleaned weekly.", "lamps.txt")).document
    assert (
        first.search.search("lighthouse lamps", first.search.scope())[0].document.id == later.id
    )  # its own write, at once
    assert within(
        1.0,
        lambda: [p.document.id for p in second.search.search("lighthouse lamps", second.search.scope())] == [later.id],
    )
    first.documents.delete(later.id)
    assert within(1.0, lambda: second.search.search("lighthouse lamps", second.search.scope()) == [])
    first.close()
    second.close()


def _serve(home: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CALYPSO_HOME": str(home), "CALYPSO_LOG_LEVEL": "warning"}
    process = subprocess.Popen(
        [sys.executable, "-m", "calypso.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        within(60.0, lambda: _healthy(port))
    except AssertionError:
        process.kill()
        raise
    return process


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.backends("postgres")
def test_two_serve_processes_over_one_database_see_each_others_writes(tmp_path: Path, database_url: str) -> None:
    ports = free_port(), free_port()
    servers = [_serve(tmp_path / name, port) for name, port in zip(("a", "b"), ports)]
    try:
        with (
            httpx.Client(base_url=f"http://127.0.0.1:{ports[0]}", timeout=30) as a,
            httpx.Client(base_url=f"http://127.0.0.1:{ports[1]}", timeout=30) as b,
        ):

            def found(client: httpx.Client, query: str) -> set[str]:
                response = client.post("/v1/search", json={"query": query})
                response.raise_for_status()
                return {hit["attributes"]["document_id"] for hit in response.json()["data"]}

            assert found(b, "lighthouse lamps") == set()  # B's index is loaded (and following) before the upload
            upload = a.post("/v1/documents", files={"file": ("lamps.txt", b"Lighthouse lamps are cleaned weekly.")})
            assert upload.status_code in (200, 201), upload.text
            doc_id = upload.json()["id"]
            assert within(1.0, lambda: found(b, "lighthouse lamps") == {doc_id}) < 1.0
            assert a.delete(f"/v1/documents/{doc_id}").status_code == 200
            assert within(1.0, lambda: found(b, "lighthouse lamps") == set()) < 1.0
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)
