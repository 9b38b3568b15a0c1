"""Vector rows and the ANN graph saved and restored memory-mapped (retrieval/vector_snapshot.py): the same
results after a reload, through the graph and exactly; mismatched parts refused; writes after a mapped start."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from calypso.embeddings.base import normalise
from calypso.retrieval import ann, vector_snapshot
from calypso.retrieval.vector_snapshot import SnapshotMismatch
from calypso.retrieval.vectors import ExactVectorIndex

if not ann.available():
    pytest.skip("usearch is not installed", allow_module_level=True)

DIM = 32
MODEL = "test-model"
ABSORB = 64
Docs = dict[int, tuple[list[int], np.ndarray]]


def clustered(rng: np.random.Generator, n_docs: int, first_doc: int = 0, first_key: int = 0) -> Docs:
    centre = normalise(rng.standard_normal((30, DIM)))
    docs, key = {}, first_key
    for d in range(first_doc, first_doc + n_docs):
        n = int(rng.integers(3, 9))
        vecs = centre[rng.integers(0, 30, n)] + 0.06 * rng.standard_normal((n, DIM)).astype(np.float32)
        docs[d] = (list(range(key, key + n)), normalise(vecs))
        key += n
    return docs


def build(docs: Docs, ann_min_vectors: int = 0) -> ExactVectorIndex:
    index = ExactVectorIndex(DIM, MODEL, ann_min_vectors=ann_min_vectors, absorb_rows=ABSORB, graph_threads=1)
    for d, (keys, vecs) in docs.items():
        index.add(d, keys, vecs)
    if ann_min_vectors:
        assert index.wait_for_graph(timeout=60)
    return index


def save(index: ExactVectorIndex, snapshot: Path, seq: int = 7) -> vector_snapshot.Saved:
    with index.pinned_graph() as graph:
        return vector_snapshot.save(index.freeze(graph), snapshot, MODEL, DIM, {"seq": seq})


def load(snapshot: Path, ann_min_vectors: int = 100) -> ExactVectorIndex:
    index, meta = vector_snapshot.load(
        snapshot, MODEL, DIM, ann_min_vectors=ann_min_vectors, absorb_rows=ABSORB, graph_threads=1
    )
    assert meta == {"seq": 7}
    return index


def results(index: ExactVectorIndex, queries: np.ndarray, k: int = 10, doc_keys: set[int] | None = None) -> list:
    return [index.search(q, k, doc_keys=doc_keys) for q in queries]


def near(rng: np.random.Generator, docs: Docs, n: int = 30) -> np.ndarray:
    rows = np.concatenate([v for _, v in docs.values()])
    picked = rows[rng.choice(len(rows), n)]
    return normalise(picked + 0.05 * rng.standard_normal(picked.shape).astype(np.float32))


def test_rows_and_graph_round_trip_memory_mapped(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    docs = clustered(rng, 400)
    before = build(docs, ann_min_vectors=100)
    for d in range(0, 400, 7):  # dead rows travel with the snapshot
        before.remove(d)
    queries = near(rng, docs)
    save(before, tmp_path)
    after = load(tmp_path)
    assert after.mapped_rows == after.rows == before.rows and after.graph_rows == before.graph_rows
    assert after.ann_graph is not None and after.ann_graph.mapped is not None  # searched through the mapped graph
    assert isinstance(after._view.base.base, np.memmap) or isinstance(after._view.base, np.memmap)
    assert results(after, queries) == results(before, queries)
    wanted = {d for d in docs if d % 3 == 0}
    assert results(after, queries, doc_keys=wanted) == results(before, queries, doc_keys=wanted)
    exact = load(tmp_path, ann_min_vectors=0)  # the mapped rows searched exactly equal the in-memory ones
    reference = build({d: v for d, v in docs.items() if d % 7}, ann_min_vectors=0)
    assert exact.ann_graph is None
    assert [[c for c, _ in r] for r in results(exact, queries, 20)] == [
        [c for c, _ in r] for r in results(reference, queries, 20)
    ]
    assert np.allclose(
        [s for r in results(exact, queries, 20) for _, s in r],
        [s for r in results(reference, queries, 20) for _, s in r],
        atol=1e-6,
    )
    before.close()
    after.close()


def _resident_kb(path: Path) -> int:
    """Resident kilobytes of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if "-" in line.split(" ", 1)[0] and len(line.split()) >= 5:
            inside = line.split()[-1] == str(path)
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux only")
def test_graph_searches_read_the_mapped_rows_without_mapping_them(tmp_path: Path) -> None:
    # Gathered from the map, every candidate's fault mapped ~64 KB of the rows file, and at 200k passages every
    # page of it ended resident (VmRSS); they are read from the file instead (retrieval/row_file.py).
    import mmap

    rng = np.random.default_rng(4)
    docs = clustered(rng, 400)
    before = build(docs, ann_min_vectors=100)
    save(before, tmp_path)
    after = load(tmp_path)
    base = after._view.base
    memmap = base if isinstance(base, np.memmap) else base.base
    assert isinstance(memmap, np.memmap) and after._view.reader is not None
    memmap._mmap.madvise(mmap.MADV_DONTNEED)  # the load's own checks touched a few rows
    rows_file = next((tmp_path / "vectors").glob("rows-*.npy")).resolve()
    assert _resident_kb(rows_file) == 0
    queries = near(rng, docs)
    assert results(after, queries, k=20) == results(before, queries, k=20)
    assert _resident_kb(rows_file) == 0
    before.close()
    after.close()


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux only")
def test_a_graph_built_from_mapped_rows_lets_their_pages_go(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    docs = clustered(rng, 300)
    save(build(docs), tmp_path)  # no graph saved: one is built in the background from the mapped rows
    index = load(tmp_path)
    assert index.wait_for_graph(timeout=60) and index.graph_rows == index.rows
    rows_file = next((tmp_path / "vectors").glob("rows-*.npy")).resolve()
    assert _resident_kb(rows_file) == 0
    queries = near(rng, docs)
    reference = build(docs, ann_min_vectors=100)
    assert [[c for c, _ in r] for r in results(index, queries)] == [
        [c for c, _ in r] for r in results(reference, queries)
    ]
    index.close()
    reference.close()


def test_uploads_and_deletes_after_a_mapped_start(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    docs = clustered(rng, 200)
    save(build(docs, ann_min_vectors=100), tmp_path / "first")
    index = load(tmp_path / "first")
    covered = index.graph_rows
    more = clustered(rng, 60, first_doc=1000, first_key=100_000)
    for d, (keys, vecs) in more.items():  # into the in-memory tail; the mapped graph thaws to absorb them
        index.add(d, keys, vecs)
    keys, vecs = clustered(rng, 1, first_key=200_000)[0]
    index.add(5, keys, vecs)  # replaces a mapped document
    for d in (1, 2, 1003):
        assert index.remove(d)
    expected = {**docs, **more, 5: (keys, vecs)}
    for d in (1, 2, 1003):
        del expected[d]
    assert index.wait_for_graph(timeout=60) and index.graph_rows > covered
    assert index.ann_graph is not None and index.ann_graph.mapped is None  # thawed: extended in memory
    reference = build(expected)
    queries = near(rng, expected)
    assert [[c for c, _ in r] for r in results(index, queries)] == [
        [c for c, _ in r] for r in results(reference, queries)
    ]
    assert 5 in index and 1 not in index and len(index) == len(reference)

    # Saved again: the mapped base file is linked, not rewritten; the rows since go to a second file.
    saved = save(index, tmp_path / "second")
    assert saved.linked
    first_rows = next((tmp_path / "first" / "vectors").glob("rows-*.npy"))
    assert os.stat(saved.base_file).st_ino == os.stat(first_rows).st_ino
    vector_snapshot.settle(index, saved)  # the graph maps onto the file just written
    assert index.ann_graph is not None and index.ann_graph.mapped == saved.graph_file
    again = load(tmp_path / "second")
    assert results(again, queries) == results(index, queries)
    for i in (index, again, reference):
        i.close()


def test_compaction_after_a_mapped_start_writes_a_new_array(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    docs = clustered(rng, 500)
    save(build(docs), tmp_path / "a")
    index = load(tmp_path / "a", ann_min_vectors=0)
    assert index.mapped_rows == index.rows
    for d in range(0, 500, 2):  # enough to compact
        index.remove(d)
        del docs[d]
    assert index.mapped_rows == 0  # compacted: one new array in memory
    queries = near(rng, docs)
    assert results(index, queries) == results(build(docs), queries)
    saved = save(index, tmp_path / "b")
    assert not saved.linked
    vector_snapshot.settle(index, saved)  # mapped again from the new file
    assert index.mapped_rows == index.rows
    assert results(index, queries) == results(build(docs), queries)


def _tamper(snapshot: Path, **changes: object) -> None:
    path = snapshot / "vectors" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(changes)
    path.write_text(json.dumps(manifest))


def test_mismatched_rows_are_refused(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    save(build(clustered(rng, 50)), tmp_path)
    with pytest.raises(SnapshotMismatch, match="other-model"):
        vector_snapshot.load(tmp_path, "other-model", DIM)
    with pytest.raises(SnapshotMismatch, match="dimensions"):
        vector_snapshot.load(tmp_path, MODEL, DIM * 2)
    rows = json.loads((tmp_path / "vectors" / "manifest.json").read_text())["rows"]
    _tamper(tmp_path, rows=rows - 1)  # the row count disagrees with the files
    with pytest.raises(SnapshotMismatch):
        vector_snapshot.load(tmp_path, MODEL, DIM)
    _tamper(tmp_path, rows=rows)
    keys = np.load(tmp_path / "vectors" / "doc_keys.npy")
    np.save(tmp_path / "vectors" / "doc_keys.npy", keys[::-1].copy())  # keys of other rows
    with pytest.raises(SnapshotMismatch):
        vector_snapshot.load(tmp_path, MODEL, DIM)
    (tmp_path / "vectors" / "doc_keys.npy").write_bytes(b"torn")
    with pytest.raises((SnapshotMismatch, OSError, ValueError)):
        vector_snapshot.load(tmp_path, MODEL, DIM)


@pytest.mark.parametrize("keep", [0, 10, 200])
def test_a_torn_rows_file_is_refused(tmp_path: Path, keep: int) -> None:
    save(build(clustered(np.random.default_rng(6), 50)), tmp_path)
    rows_file = next((tmp_path / "vectors").glob("rows-*.npy"))
    rows_file.write_bytes(rows_file.read_bytes()[:keep])  # no header, half a header, a header and part of the rows
    with pytest.raises((ValueError, OSError, EOFError)):
        vector_snapshot.load(tmp_path, MODEL, DIM)


def test_a_graph_that_does_not_match_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(5)
    docs = clustered(rng, 200)
    index = build(docs, ann_min_vectors=100)
    queries = near(rng, docs)
    save(index, tmp_path / "a")
    other_docs = {d: (keys, normalise(rng.standard_normal(vecs.shape))) for d, (keys, vecs) in docs.items()}
    save(build(other_docs, ann_min_vectors=100), tmp_path / "other")
    graph_rows = index.graph_rows

    def refused(snapshot: Path, why: str) -> None:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="calypso.index"):
            restored = load(snapshot)
        assert why in caplog.text, caplog.text
        assert restored.ann_graph is None or restored.ann_graph.mapped is None  # not the saved graph
        assert restored.wait_for_graph(timeout=60) and restored.graph_rows == restored.rows  # rebuilt
        assert [[c for c, _ in r] for r in results(restored, queries)] == [
            [c for c, _ in r] for r in results(index, queries)
        ]
        restored.close()

    _tamper(tmp_path / "a", graph_rows=graph_rows - 1)  # covers other rows than the manifest says
    refused(tmp_path / "a", "expected")
    _tamper(tmp_path / "a", graph_rows=graph_rows)
    graph_file = next((tmp_path / "a" / "vectors").glob("graph-*.usearch"))
    data = bytearray(graph_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph_file.write_bytes(bytes(data))
    refused(tmp_path / "a", "checksum")
    # Another index's graph of as many rows, checksum and all: its rows do not find themselves in it.
    other_dir = tmp_path / "other" / "vectors"
    other_graph = next(other_dir.glob("graph-*.usearch"))
    other = json.loads((other_dir / "manifest.json").read_text())
    assert other["graph_rows"] == graph_rows
    graph_file.write_bytes(other_graph.read_bytes())
    crc = json.loads((tmp_path / "a" / "vectors" / "manifest.json").read_text())["crc"]
    crc[graph_file.name] = other["crc"][other_graph.name]
    _tamper(tmp_path / "a", crc=crc)
    refused(tmp_path / "a", "find themselves")
    index.close()


def test_searches_racing_adds_saves_and_remaps_stay_consistent(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    docs = clustered(rng, 150)
    save(build(docs, ann_min_vectors=100), tmp_path / "s0")
    index = load(tmp_path / "s0")
    queries = near(rng, docs, 10)
    known = {c for keys, _ in docs.values() for c in keys}
    errors: list[BaseException] = []
    stop = threading.Event()

    def search() -> None:
        try:
            while not stop.is_set():
                for q in queries:
                    found = index.search(q, 10)
                    assert len(found) == 10 and all(c in known for c, _ in found)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=search) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for step in range(1, 6):  # adds into the tail, a save, the rows and graph remapped under the searches
            more = clustered(rng, 20, first_doc=1000 * step, first_key=100_000 * step)
            known |= {c for keys, _ in more.values() for c in keys}
            for d, (keys, vecs) in more.items():
                index.add(d, keys, vecs)
            vector_snapshot.settle(index, save(index, tmp_path / f"s{step}"))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert index.wait_for_graph(timeout=60)
    # Saved once more now the graph has absorbed what it will: a reload of s5 could still be absorbing rows the index's
    # graph took after that save, searching exactly meanwhile (products that can differ in the last bit).
    vector_snapshot.settle(index, save(index, tmp_path / "s6"))
    again = load(tmp_path / "s6")
    assert again.graph_rows == index.graph_rows and not again.building
    assert results(again, queries) == results(index, queries)
    index.close()
    again.close()
