"""Job leases renewed by the process's one keeper thread (services/leases.py)."""

from __future__ import annotations

import threading
import time

from calypso.errors import StorageError
from calypso.models import Document, IngestJob
from calypso.services.leases import Heartbeat


class Renewals:
    """A JobStore's ``renew`` only: records each call; answers False for the keys in ``lost``, raises for ``down``."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, float]] = []
        self.lost: set[int] = set()
        self.down: set[int] = set()
        self.broken: set[int] = set()

    def renew(self, document_key: int, worker_id: str, lease_seconds: float) -> bool:
        self.calls.append((document_key, time.monotonic()))
        if document_key in self.down:
            raise StorageError("the database is away")
        if document_key in self.broken:
            raise RuntimeError("a bug")
        return document_key not in self.lost

    def of(self, key: int) -> int:
        return sum(1 for k, _ in self.calls if k == key)


def _job(key: int) -> IngestJob:
    document = Document(
        id=f"d{key}",
        file_id=f"file-{key}",
        workspace="default",
        namespace="general",
        filename="a.txt",
        media_type="text/plain",
        bytes=1,
        sha256="x",
        created_at=0,
        page_count=0,
        chunk_count=0,
    )
    return IngestJob(document, key, 1, "w")


def _keepers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "ingest-lease-keeper")


def test_leases_are_renewed_every_third_of_their_length_and_not_after_the_job() -> None:
    store = Renewals()
    with Heartbeat(store, _job(1), "w", 0.3) as short, Heartbeat(store, _job(2), "w", 3.0):
        time.sleep(0.55)
        assert not short.lost.is_set()
    assert store.of(1) >= 3 and store.of(2) == 0  # due at 0.1, 0.2, …: 5 in 0.55 s, fewer on a busy machine
    ended = len(store.calls)
    time.sleep(0.25)
    assert len(store.calls) == ended


def test_a_lost_lease_is_reported_and_no_longer_renewed() -> None:
    store = Renewals()
    store.lost.add(3)
    with Heartbeat(store, _job(3), "w", 0.15) as beat:
        assert beat.lost.wait(2)
        time.sleep(0.2)
    assert store.of(3) == 1


def test_a_failing_renewal_is_retried() -> None:
    store = Renewals()
    store.down.add(4)
    with Heartbeat(store, _job(4), "w", 0.15) as beat:
        time.sleep(0.4)
    assert store.of(4) >= 2 and not beat.lost.is_set()


def test_a_renewal_that_crashes_stops_no_other_job_s_renewals() -> None:
    store = Renewals()
    store.broken.add(6)
    with Heartbeat(store, _job(6), "w", 0.15), Heartbeat(store, _job(7), "w", 0.15):
        time.sleep(0.4)
    assert store.of(6) >= 2 and store.of(7) >= 2


def test_jobs_start_no_thread_of_their_own() -> None:
    store = Renewals()
    with Heartbeat(store, _job(5), "w", 30):
        pass
    before = threading.active_count()
    for key in range(100, 150):
        with Heartbeat(store, _job(key), "w", 30):
            pass
    assert threading.active_count() == before and _keepers() == 1
