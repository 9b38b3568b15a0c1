"""The ANN graph under ExactVectorIndex (real usearch): same top-k as exact search on clustered data,
never a dead or stale chunk, the unabsorbed tail found, compaction rebuilds, filters, fallbacks."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from calypso.embeddings.base import normalise
from calypso.retrieval import ann
from calypso.retrieval.vectors import ExactVectorIndex

if not ann.available():  # (imports usearch after onnxruntime: see ann._usearch)
    pytest.skip("usearch is not installed", allow_module_level=True)
import usearch.index  # noqa: E402

DIM = 32
ABSORB = 64  # tail rows absorbed per extension here (the server's is 1024)
Docs = dict[int, tuple[list[int], np.ndarray]]


class Twin:
    """The same writes into a graph-backed index and an exact one (the reference).

    The graph is built on one thread: usearch's two-thread builds vary from run to run, and the
    equality checks below should not depend on luck (the recall at scale is bench/ann_recall.py's).
    """

    def __init__(self, min_vectors: int = 100) -> None:
        self.graph = ExactVectorIndex(DIM, ann_min_vectors=min_vectors, absorb_rows=ABSORB, graph_threads=1)
        self.exact = ExactVectorIndex(DIM)
        self.live: dict[int, np.ndarray] = {}  # each document's vectors, in the order the indexes hold them

    def add(self, doc: int, keys: list[int], vectors: np.ndarray) -> None:
        self.graph.add(doc, keys, vectors)
        self.exact.add(doc, keys, vectors)
        self.live.pop(doc, None)  # a document added again moves to the end, as its rows do
        self.live[doc] = np.asarray(vectors, dtype=np.float32)

    def remove(self, doc: int) -> None:
        assert self.graph.remove(doc) and self.exact.remove(doc)
        del self.live[doc]

    def assert_same(self, queries: np.ndarray, k: int, doc_keys: set[int] | None = None) -> None:
        for q in queries:
            got = self.graph.search(q, k, doc_keys=doc_keys)
            want = self.exact.search(q, k, doc_keys=doc_keys)
            assert [c for c, _ in got] == [c for c, _ in want]
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)  # exact cosines


def clustered(rng: np.random.Generator, n_docs: int, first_key: int = 0, centres: int = 40) -> Docs:
    """Documents of 3-8 chunks around random cluster centres (as real embeddings cluster)."""
    centre = normalise(rng.standard_normal((centres, DIM)))
    docs, key = {}, first_key
    for d in range(n_docs):
        n = int(rng.integers(3, 9))
        vecs = centre[rng.integers(0, centres, n)] + 0.06 * rng.standard_normal((n, DIM)).astype(np.float32)
        docs[d] = (list(range(key, key + n)), normalise(vecs))
        key += n
    return docs


def queries(rng: np.random.Generator, n: int = 40) -> np.ndarray:
    """Random directions: far from every cluster, the graph's hard case (checked by recall only)."""
    return normalise(rng.standard_normal((n, DIM)))


def near(rng: np.random.Generator, twin: Twin, n: int = 40) -> np.ndarray:
    """Queries among the data, as real questions fall near their passages."""
    live = np.concatenate(list(twin.live.values()))
    rows = live[rng.choice(len(live), n)]
    return normalise(rows + 0.05 * rng.standard_normal(rows.shape).astype(np.float32))


def loaded(rng: np.random.Generator, n_docs: int = 150) -> tuple[Twin, Docs]:
    twin, docs = Twin(), clustered(rng, n_docs)
    for d, (keys, vecs) in docs.items():
        twin.add(d, keys, vecs)
    assert twin.graph.wait_for_graph(timeout=60)
    return twin, docs


def test_graph_gives_the_exact_top_k() -> None:
    rng = np.random.default_rng(1)
    twin, _ = loaded(rng)
    n = len(twin.exact)
    assert n > 600 and n - twin.graph.graph_rows < ABSORB and twin.exact.graph_rows == 0
    for k in (1, 10):
        twin.assert_same(near(rng, twin, 100), k)
    # Far from every cluster and at k=100 the graph is approximate: recall, and every score exact.
    hits = 0
    for q in np.concatenate([near(rng, twin), queries(rng)]):
        got, want = twin.graph.search(q, 100), twin.exact.search(q, 100)
        assert len(got) == 100
        hits += len({c for c, _ in got} & {c for c, _ in want})
        cosine = dict(twin.exact.search(q, n))
        assert all(s == pytest.approx(cosine[c], abs=1e-6) for c, s in got)
    assert hits / 8000 >= 0.95


def test_removed_and_replaced_documents_never_come_back() -> None:
    rng = np.random.default_rng(2)
    twin, docs = loaded(rng)
    removed = set(range(0, 45, 3))  # 15 documents: no compaction yet
    for d in removed:
        twin.remove(d)
    replaced = {1: 100_000, 4: 200_000}
    for d, first in replaced.items():  # new chunk keys and vectors: the old rows are dead in the graph
        keys, vecs = docs[d]
        twin.add(d, [first + i for i in range(len(keys))], normalise(vecs[::-1] + 0.5))
    assert twin.graph.graph_rows < twin.graph.rows  # the replacements sit in the tail
    stale = {c for d in removed | set(replaced) for c in docs[d][0]}
    probes = np.concatenate([docs[d][1] for d in removed | set(replaced)])  # aim at the dead rows
    for q in probes[::3]:
        found = [c for c, _ in twin.graph.search(q, 50)]
        assert not stale & set(found)
    twin.assert_same(probes, 10)


def test_tail_rows_are_found_before_the_graph_absorbs_them_then_absorbed() -> None:
    rng = np.random.default_rng(3)
    twin, _ = loaded(rng)
    covered = twin.graph.graph_rows
    target = normalise(rng.standard_normal((1, DIM)))
    twin.add(10_000, [900_000], target)
    assert twin.graph.graph_rows == covered  # one row: left in the tail
    assert twin.graph.search(target[0], 5)[0] == (900_000, pytest.approx(1.0))
    more = clustered(rng, ABSORB // 3, first_key=1_000_000)
    for d, (keys, vecs) in more.items():
        twin.add(20_000 + d, keys, vecs)
    assert twin.graph.wait_for_graph(timeout=60)
    assert twin.graph.graph_rows > covered and twin.graph.rows - twin.graph.graph_rows < ABSORB  # absorbed
    assert twin.graph.search(target[0], 5)[0] == (900_000, pytest.approx(1.0))
    twin.assert_same(near(rng, twin), 10)


def test_compaction_drops_the_graph_and_a_new_one_is_built() -> None:
    rng = np.random.default_rng(4)
    twin, docs = loaded(rng, n_docs=500)
    old_graph, rows = twin.graph.ann_graph, twin.graph.rows
    for d in range(0, 500, 2):  # over 1024 rows and a quarter dead: compacts
        twin.remove(d)
    assert twin.graph.wait_for_graph(timeout=60)
    assert twin.graph.ann_graph is not old_graph and twin.graph.rows < rows  # rows moved
    assert twin.graph.graph_rows == twin.graph.rows
    twin.assert_same(near(rng, twin), 20)
    twin.assert_same(np.concatenate([docs[d][1] for d in range(0, 20)]), 10)  # removed and kept ones


def test_filters_narrow_and_broad() -> None:
    rng = np.random.default_rng(5)
    twin, _ = loaded(rng)
    twin.remove(7)
    narrow = {3, 7, 11, 999}  # a few documents (one removed, one unknown): exact over their rows
    broad = set(range(0, 150, 2))  # half the rows: graph candidates, filtered
    for allowed in (narrow, broad):
        for k in (5, 20):
            twin.assert_same(near(rng, twin, 20), k, doc_keys=allowed)
    only_removed = twin.graph.search(queries(rng, 1)[0], 5, doc_keys={7})
    assert only_removed == []


def test_without_usearch_search_is_exact_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "usearch.index", None)  # import fails as if not installed
    monkeypatch.setattr(ann, "_notified", False)
    rng = np.random.default_rng(6)
    with caplog.at_level(logging.WARNING, logger="calypso.index"):
        twin = Twin(min_vectors=1)
    assert "usearch is not installed" in caplog.text
    assert twin.graph.ann_min_vectors == 0
    for d, (keys, vecs) in clustered(rng, 20).items():
        twin.add(d, keys, vecs)
    assert not twin.graph.wait_for_graph(timeout=5) and twin.graph.graph_rows == 0
    twin.assert_same(near(rng, twin), 10)


class GatedIndex(usearch.index.Index):  # type: ignore[misc]
    """usearch's own index whose ``add`` waits for a gate: holds a build or an extension open."""

    gate = threading.Event()
    entered = threading.Event()

    def add(self, *args: Any, **kwargs: Any) -> Any:
        GatedIndex.entered.set()
        assert GatedIndex.gate.wait(60)
        return super().add(*args, **kwargs)


def test_searches_during_a_build_or_an_extension_are_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usearch.index, "Index", GatedIndex)
    GatedIndex.gate.clear()
    GatedIndex.entered.clear()
    rng = np.random.default_rng(7)
    twin, docs = Twin(), clustered(rng, 60)
    for d, (keys, vecs) in docs.items():
        twin.add(d, keys, vecs)
    assert GatedIndex.entered.wait(10)  # the build is running
    assert twin.graph.graph_rows == 0 and not twin.graph.wait_for_graph(timeout=0.1)
    twin.assert_same(near(rng, twin), 10)  # exact meanwhile, not blocked
    GatedIndex.gate.set()
    assert twin.graph.wait_for_graph(timeout=60)

    GatedIndex.gate.clear()
    GatedIndex.entered.clear()
    for d, (keys, vecs) in clustered(rng, ABSORB // 3, first_key=500_000).items():
        twin.add(1000 + d, keys, vecs)
    assert GatedIndex.entered.wait(10)  # the tail is being absorbed into the published graph
    assert twin.graph.ann_graph is not None
    assert twin.graph.ann_graph.candidates(queries(rng, 1)[0], 10) is None  # the graph says "go exact"
    twin.assert_same(near(rng, twin), 10)
    GatedIndex.gate.set()
    assert twin.graph.wait_for_graph(timeout=60) and twin.graph.rows - twin.graph.graph_rows < ABSORB
    twin.assert_same(near(rng, twin), 10)


def test_concurrent_searches_and_writes_stay_consistent() -> None:
    rng = np.random.default_rng(8)
    twin, docs = loaded(rng)
    errors: list[BaseException] = []
    stop = threading.Event()
    removed: set[int] = set()

    def search() -> None:
        local = np.random.default_rng(9)
        try:
            while not stop.is_set():
                dead = {c for d in list(removed) for c in docs[d][0]}  # removed before this search began
                found = twin.graph.search(queries(local, 1)[0], 20)
                assert not dead & {c for c, _ in found}
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=search) for _ in range(3)]
    for t in threads:
        t.start()
    for d, (keys, vecs) in clustered(rng, 80, first_key=2_000_000).items():
        twin.add(5000 + d, keys, vecs)  # extensions run under the searches
        if d % 4 == 0:
            twin.remove(d)
            removed.add(d)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert twin.graph.wait_for_graph(timeout=60)
    twin.assert_same(near(rng, twin), 10)


def test_the_model_runtime_loads_after_the_graph() -> None:
    # A server whose namespace (and graph) loads before the embedding model imports onnxruntime after
    # usearch: that order crashed the process (segfault), so ann.py loads onnxruntime first.
    pytest.importorskip("onnxruntime")
    code = "from calypso.retrieval import ann; assert ann.available(); import onnxruntime; print('alive')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "alive" in done.stdout, (done.returncode, done.stderr[-2000:])


def test_a_bulk_load_builds_the_graph_once_at_its_end() -> None:
    rng = np.random.default_rng(10)
    index = ExactVectorIndex(DIM, ann_min_vectors=100, absorb_rows=ABSORB, graph_threads=1)
    with index.bulk():
        for d, (keys, vecs) in clustered(rng, 100).items():
            index.add(d, keys, vecs)
        assert not index.wait_for_graph(timeout=0.5)  # nothing started during the load
        index.trim()
    assert index.wait_for_graph(timeout=60) and index.graph_rows == index.rows  # one build over every row
