"""A namespace's vectors and graph saved with its index snapshot (services/index_sync.py): a restart maps them
and catches up from the feed; snapshots of another model or database are not trusted; a failed save
leaves the previous snapshot usable."""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path

import numpy as np
import pytest

from calypso.config import Settings
from calypso.embeddings.base import normalise
from calypso.retrieval import ann, vector_snapshot
from calypso.retrieval.bm25 import BM25Index
from calypso.retrieval.vectors import ExactVectorIndex
from calypso.services import open_services, open_storage
from calypso.services.index_sync import NamespaceIndexes
from calypso.services.ingestion import Upload
from calypso.services.snapshot_directory import SnapshotDirectory
from calypso.store.base import Storage

if not ann.available():
    pytest.skip("usearch is not installed", allow_module_level=True)

MODEL, DIM = "test-model", 16
KEY = ("default", "general")
WORDS = "harbour crane lighthouse lamp ferry dock tide anchor rope sail mast keel hull deck buoy pier".split()


def _ingest(settings: Settings, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    services = open_services(settings)
    try:
        return [
            services.ingestion.ingest(
                Upload(
                    "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(40)).encode(),
                    f"d{seed}-{i}.txt",
                )
            ).document.id
            for i in range(n)
        ]
    finally:
        services.close()


def _delete(settings: Settings, document_id: str) -> None:
    services = open_services(settings)
    services.documents.delete(document_id)
    services.close()


def _embed(settings: Settings, seed: int) -> None:
    """A random unit vector for every passage, written as an embedding worker writes them (feed changes and all)."""
    storage = open_storage(settings)
    embeddings, rng = storage.embeddings, np.random.default_rng(seed)
    embeddings.reset(MODEL)
    while (job := embeddings.claim("test", 60, MODEL)) is not None:
        missing = embeddings.missing_chunks(job.document_key, MODEL)
        vectors = normalise(rng.standard_normal((len(missing), DIM)))
        assert embeddings.store_vectors(job, "test", [key for key, _ in missing], vectors)
        embeddings.finish(job.document_key, "test")
    storage.close()


class Opened:
    def __init__(self, settings: Settings, *, snapshots: bool = True, model: str = MODEL, ann_min_vectors: int = 1):
        self.storage: Storage = open_storage(settings)
        self.indexes = NamespaceIndexes(
            self.storage.feed,
            settings.home / "index" if snapshots else None,
            follow=False,
            embeddings=self.storage.embeddings,
            model=model,
            dimension=DIM,
            ann_min_vectors=ann_min_vectors,
        )
        self.indexes.get(*KEY)

    @property
    def vectors(self) -> ExactVectorIndex:
        found = self.indexes.vectors(*KEY)
        assert isinstance(found, ExactVectorIndex)
        return found

    def close(self) -> None:
        self.indexes.close()
        self.storage.close()


def _queries(seed: int = 9) -> np.ndarray:
    return normalise(np.random.default_rng(seed).standard_normal((20, DIM)))


def _results(vectors: ExactVectorIndex) -> list[list[int]]:
    return [[c for c, _ in vectors.search(q, 10)] for q in _queries()]


def _fresh(settings: Settings) -> list[list[int]]:
    """What vectors loaded from the store, searched exactly, give now."""
    fresh = Opened(settings, snapshots=False, ann_min_vectors=0)
    try:
        return _results(fresh.vectors)
    finally:
        fresh.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path)


def test_a_restart_maps_the_saved_vectors_and_graph_then_catches_up(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    ids = _ingest(settings, 12, seed=1)
    _embed(settings, seed=1)
    first = Opened(settings)
    assert first.vectors.wait_for_graph(timeout=30)
    before = _results(first.vectors)
    first.close()  # saves the vectors and the graph with the BM25 index
    current = SnapshotDirectory(settings.home / "index", KEY).current()
    assert current is not None
    saved = vector_snapshot.manifest(current)
    assert saved is not None and saved["graph_rows"] == saved["rows"] > 0

    with caplog.at_level(logging.INFO, logger="calypso.index"):
        second = Opened(settings)
    assert "restored" in caplog.text and not re.search(r"vectors \S+: \d+ loaded", caplog.text)  # no table scan
    graph = second.vectors.ann_graph
    assert graph is not None and graph.mapped is not None and second.vectors.mapped_rows == second.vectors.rows
    assert _results(second.vectors) == before == _fresh(settings)
    second.close()

    # Written while no server ran: a delete, new documents, every passage embedded again.
    _delete(settings, ids[0])
    _ingest(settings, 3, seed=2)
    _embed(settings, seed=2)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="calypso.index"):
        third = Opened(settings)
    assert "restored" in caplog.text
    assert _results(third.vectors) == _fresh(settings) != before
    third.close()


def test_vectors_of_another_model_or_database_are_not_trusted(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    _ingest(settings, 5, seed=3)
    _embed(settings, seed=3)
    Opened(settings).close()
    with caplog.at_level(logging.WARNING, logger="calypso.index"):
        other = Opened(settings, model="other-model")
    assert "unusable" in caplog.text and "other-model" in caplog.text
    assert len(other.vectors) == 0  # loaded from the store, which holds none of that model
    other.close()

    current = SnapshotDirectory(settings.home / "index", KEY).current()
    assert current is not None
    rows_file = next((current / "vectors").glob("rows-*.npy"))
    rows_file.write_bytes(rows_file.read_bytes()[:1000])  # a bad disk: the rows file is short
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="calypso.index"):
        torn = Opened(settings)
    assert "unusable" in caplog.text
    assert _results(torn.vectors) == _fresh(settings)
    torn.close()

    for suffix in ("", "-wal", "-shm"):  # the data directory's database replaced
        (settings.home / f"calypso.sqlite3{suffix}").unlink(missing_ok=True)
    _ingest(settings, 2, seed=4)
    _embed(settings, seed=4)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="calypso.index"):
        again = Opened(settings)
    assert "another database" in caplog.text
    assert _results(again.vectors) == _fresh(settings)
    again.close()


def test_a_save_that_fails_between_parts_leaves_the_previous_snapshot(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ids = _ingest(settings, 8, seed=5)
    _embed(settings, seed=5)
    Opened(settings).close()
    previous = SnapshotDirectory(settings.home / "index", KEY).current()
    assert previous is not None and vector_snapshot.manifest(previous) is not None

    _delete(settings, ids[1])
    _embed(settings, seed=6)
    opened = Opened(settings)

    def crash(self: BM25Index, directory: Path, meta: object = None, *, whole: bool = False) -> None:
        assert (directory / "vectors" / "manifest.json").is_file()  # the vectors are written, the rest is not
        raise OSError("disk full")

    monkeypatch.setattr(BM25Index, "save", crash)
    with caplog.at_level(logging.WARNING, logger="calypso.index"):
        assert opened.indexes.save() == 0
    assert "disk full" in caplog.text
    assert SnapshotDirectory(settings.home / "index", KEY).current() == previous
    assert [p.name for p in previous.parent.iterdir() if p.name.startswith("snap-")] == [previous.name]
    monkeypatch.undo()
    opened.indexes.close(save=False)
    opened.storage.close()

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="calypso.index"):
        restarted = Opened(settings)
    assert "restored" in caplog.text  # the previous snapshot, caught up from its position
    assert _results(restarted.vectors) == _fresh(settings)
    restarted.close()
