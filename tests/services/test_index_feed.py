"""Indexes follow the document change feed: across processes, idempotently, from snapshots."""

from __future__ import annotations

import logging
import random
import threading
from pathlib import Path

import pytest
from postgres_support import RawDatabase
from tests_support import within

from calypso.config import Settings
from calypso.retrieval import bm25, bm25_files
from calypso.retrieval.bm25 import BM25Index
from calypso.services import Services, open_services
from calypso.services.index_sync import NamespaceIndexes, index_rows
from calypso.services.ingestion import Upload
from calypso.services.search import SearchService
from calypso.services.snapshot_directory import SnapshotDirectory

WORDS = "harbour crane lighthouse lamp ferry dock tide anchor rope sail mast keel hull deck buoy pier".split()
QUERIES = ["harbour crane", "lighthouse lamp tide", "ferry dock anchor", "rope sail mast keel", "buoy pier hull deck"]


def _text(rng: random.Random, n: int) -> bytes:
    return "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))) for _ in range(n)).encode()


def _fresh(services: Services, namespace: str = "general") -> BM25Index:
    """The namespace's index as a from-scratch build would make it now."""
    index = BM25Index()
    store = services.storage.feed
    index.add_many(
        (key, index_rows(store, key, chunks)) for key, chunks in store.namespace_chunks("default", namespace)
    )
    return index


def _assert_same(index: BM25Index, expected: BM25Index) -> None:
    assert (len(index), index.doc_count) == (len(expected), expected.doc_count)
    for query in QUERIES:
        assert index.search(query, k=20) == expected.search(query, k=20), query


def _doc_ids(searcher: SearchService, query: str) -> set[str]:
    return {p.document.id for p in searcher.search(query, searcher.scope())}


def test_a_write_in_one_process_reaches_another_within_a_second(tmp_path: Path, database_url: str) -> None:
    # Two Services over one database, as two API processes have (SQLite: a second, non-exclusive opener).
    a, b = open_services(Settings(home=tmp_path)), open_services(Settings(home=tmp_path))
    a.ingestion.ingest(Upload(b"Harbour cranes are inspected every spring.", "cranes.txt"))
    assert b.search.search("harbour cranes", b.search.scope())  # B's index is built and following
    doc = a.ingestion.ingest(Upload(b"Lighthouse lamps are cleaned weekly.", "lamps.txt")).document
    assert _doc_ids(a.search, "lighthouse lamps") == {doc.id}  # a process reads its own write at once
    assert within(1.0, lambda: _doc_ids(b.search, "lighthouse lamps") == {doc.id}) < 1.0
    a.documents.delete(doc.id)
    assert _doc_ids(a.search, "lighthouse lamps") == set()
    assert within(1.0, lambda: _doc_ids(b.search, "lighthouse lamps") == set()) < 1.0
    a.close()
    b.close()


@pytest.mark.backends("postgres")
def test_the_follower_survives_a_lost_connection(tmp_path: Path, database_url: str) -> None:
    a, b = open_services(Settings(home=tmp_path)), open_services(Settings(home=tmp_path / "b"))
    a.ingestion.ingest(Upload(b"Harbour cranes are inspected every spring.", "cranes.txt"))
    assert b.search.search("harbour cranes", b.search.scope())
    within(5.0, lambda: _listeners(database_url) >= 1)
    raw = RawDatabase(database_url, Path())
    # Every other connection of this database goes, the LISTEN one included (as when the server restarts).
    raw.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    raw.close()
    doc = a.ingestion.ingest(Upload(b"Lighthouse lamps are cleaned weekly.", "lamps.txt")).document  # pool reconnects
    # The follower notices, reconnects (within its one-second retry) and catches up from its position.
    within(5.0, lambda: _doc_ids(b.search, "lighthouse lamps") == {doc.id})
    a.documents.delete(doc.id)
    assert within(1.0, lambda: _doc_ids(b.search, "lighthouse lamps") == set()) < 1.0
    a.close()
    b.close()


def _listeners(database_url: str) -> int:
    raw = RawDatabase(database_url, Path())
    count = raw.scalar("SELECT COUNT(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'")
    raw.close()
    return int(count)


def test_applying_a_change_twice_is_harmless(tmp_path: Path, database_url: str) -> None:
    services = open_services(Settings(home=tmp_path))
    kb = services.ingestion
    rng = random.Random(7)
    docs = [kb.ingest(Upload(_text(rng, 4), f"d{i}.txt")).document for i in range(6)]
    indexes = NamespaceIndexes(services.storage.feed, follow=False)  # its own, to replay the feed onto
    index = indexes.get("default", "general")
    services.documents.delete(docs[2].id)
    kb.ingest(Upload(_text(rng, 3), "late.txt"))
    assert indexes.catch_up() == 2
    _assert_same(index, _fresh(services))
    dead = index.dead_rows
    indexes.replay_from(0)  # replay the whole feed: every added and deleted change a second time
    assert indexes.catch_up() == 8
    _assert_same(index, _fresh(services))
    assert index.dead_rows == dead > 0  # the deleted document's rows, once: nothing was added or removed again
    indexes.close()
    services.close()


def test_an_index_built_while_writes_race_equals_a_fresh_build(tmp_path: Path, database_url: str) -> None:
    services = open_services(Settings(home=tmp_path))
    kb = services.ingestion
    rng = random.Random(11)
    live = [kb.ingest(Upload(_text(rng, 5), f"seed{i}.txt")).document.id for i in range(20)]
    done = threading.Event()

    def write() -> None:
        wrng = random.Random(12)
        for i in range(40):
            if live and wrng.random() < 0.4:
                services.documents.delete(live.pop(wrng.randrange(len(live))))
            else:
                live.append(kb.ingest(Upload(_text(wrng, wrng.randint(1, 6)), f"race{i}.txt")).document.id)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    built = []
    while not done.is_set():  # indexes built from scratch at many points of the race
        indexes = NamespaceIndexes(services.storage.feed, follow=False)
        indexes.get("default", "general")
        built.append(indexes)
    writer.join()
    assert len(built) >= 2
    expected = _fresh(services)
    for indexes in built:
        indexes.catch_up()
        _assert_same(indexes.get("default", "general"), expected)
        indexes.close()
    services.close()


def test_a_snapshot_plus_the_feed_equals_a_fresh_build(tmp_path: Path, database_url: str, caplog) -> None:
    rng = random.Random(3)
    settings = Settings(home=tmp_path)
    first = open_services(settings)
    kept = [first.ingestion.ingest(Upload(_text(rng, 5), f"a{i}.txt")).document for i in range(10)]
    first.search.warm_up()  # built, then saved in the background
    first.documents.delete(kept[0].id)
    first.close()  # saves again: the snapshot covers the delete
    snapshots = SnapshotDirectory(tmp_path / "index", ("default", "general"))
    assert snapshots.current() is not None
    # Written while no server ran: the snapshot does not hold these; the feed does.
    writer = open_services(settings)
    late = writer.ingestion.ingest(Upload(_text(rng, 4), "late.txt")).document
    writer.documents.delete(kept[1].id)
    writer.close()

    with caplog.at_level(logging.INFO, logger="calypso.index"):
        second = open_services(settings)
        index = second.search.index("general")
    assert "loaded" in caplog.text and "built" not in caplog.text
    _assert_same(index, _fresh(second))
    assert late.id in _doc_ids(second.search, " ".join(WORDS))
    second.close()


@pytest.mark.backends("sqlite")
def test_an_unusable_snapshot_is_rebuilt_from_the_store(tmp_path: Path, database_url: str, caplog) -> None:
    settings = Settings(home=tmp_path)
    services = open_services(settings)
    services.ingestion.ingest(Upload(b"Harbour cranes are inspected every spring.", "cranes.txt"))
    services.search.warm_up()
    services.close()
    current = SnapshotDirectory(tmp_path / "index", ("default", "general")).current()
    assert current is not None
    (current / "seg0.rows.npy").write_bytes(b"torn")  # a crash mid-write of an older version, or a bad disk
    with caplog.at_level(logging.INFO, logger="calypso.index"):
        again = open_services(settings)
        assert again.search.search("harbour cranes", again.search.scope())
    assert "unusable" in caplog.text and "built" in caplog.text
    again.close()
    # A snapshot of another database (the data directory's database was replaced) is not trusted either.
    (tmp_path / "calypso.sqlite3").unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"calypso.sqlite3{suffix}").unlink(missing_ok=True)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="calypso.index"):
        other = open_services(settings)
        other.ingestion.ingest(Upload(b"Lighthouse lamps are cleaned weekly.", "lamps.txt"))
        assert [p.document.filename for p in other.search.search("harbour lighthouse", other.search.scope())] == [
            "lamps.txt"
        ]
    assert "another database" in caplog.text
    other.close()


@pytest.mark.backends("postgres")
def test_on_postgresql_a_built_index_is_searched_from_the_shared_snapshot_files(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25_files, "_FILE_POSTINGS_MIN", 0)  # this small index too
    monkeypatch.setattr(bm25, "_SPILL_POSTINGS", 50)  # and its build spills, as a large one's does
    monkeypatch.setattr(bm25, "_COMPILE_TOKENS", 200)
    monkeypatch.setattr(bm25, "_ADD_BATCH", 4)
    spill = BM25Index._spill_segments
    rng = random.Random(5)
    settings = Settings(home=tmp_path)
    services = open_services(settings)
    services.ingestion.ingest(Upload(_text(rng, 30), "harbour.txt"))
    services.ingestion.ingest(Upload("港口的起重机每年春天检修。灯塔的灯每周清洁一次。".encode(), "港口.txt"))
    for i in range(6):
        services.ingestion.ingest(Upload(_text(rng, 8), f"more{i}.txt"))
    spilled = []
    monkeypatch.setattr(BM25Index, "_spill_segments", lambda self, d: spilled.append(d) or spill(self, d))
    index = services.search.index("general")
    assert services.search.indexes.wait_saved(timeout=60)
    assert len(spilled) > 2
    current = SnapshotDirectory(tmp_path / "index", ("default", "general")).current()
    assert current is not None and not list(current.parent.glob(".build-*"))
    # Spilled in pieces, saved as one segment, searched from the snapshot's files.
    assert index.segment_count == 1 and all(seg.files is not None for seg in index._segs)
    assert index._segs[0].files.prefix.parent == current
    _assert_same(index, _fresh(services))
    assert [p.document.filename for p in services.search.search("起重机 检修", services.search.scope())] == ["港口.txt"]
    services.ingestion.ingest(Upload(_text(rng, 3), "late.txt"))  # after the save: in memory until the next one
    _assert_same(index, _fresh(services))
    services.close()
