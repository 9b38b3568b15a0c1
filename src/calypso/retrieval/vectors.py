"""Nearest-neighbour search over unit vectors, in memory, with exact scores: the embedded backend's vector index.

One index per namespace, beside its BM25 index, keyed the same way: chunk keys grouped by document
key, so a document is added or removed whole, and its rows are contiguous (a document -> row range
map serves filters without scanning every row). Rows are float32: numpy has no fast float16 kernel.

Small namespaces are searched by one matrix-vector product and a partial sort (1.3 ms at 20k x 384).
From ``ann_min_vectors`` rows on, a background thread builds an HNSW graph (``retrieval/ann.py``)
whose keys are row positions; a search then takes the graph's candidates, drops dead rows, scores
the nearest ``RERANK_ROWS`` of them (by the graph's int8 distances) exactly from the float32 rows, adds
an exact product over the "tail" (rows added since the graph's last extension), and keeps the top k:
scores are exact cosines either way, only which rows are looked at changes (10.5 ms -> ~0.5 ms at 200k;
recall of the exact top 10 0.99, top 100 0.97 for real questions: docs/benchmarks/hybrid.md, "ANN vector
index"). Until the graph is built, while it is extended, or when it proposes fewer than k usable rows, a
search is exact: it never waits for the graph.

- Removing a document marks its rows dead (the graph keeps proposing them; the live mask drops
  them). Compaction moves rows, so it drops the graph and a new one is built in the background.
- The tail is absorbed into the graph in batches of ``ABSORB_ROWS`` by the same background thread
  (a graph mapped from a snapshot is copied into memory to grow, so it waits for 1/16 of its rows).

Rows are held in two parts: a read-only ``base`` (memory-mapped from the namespace's snapshot,
``retrieval/vector_snapshot.py``: file-backed pages the kernel can reclaim, not anonymous memory) and
an in-memory ``tail`` the adds since go to. Compaction writes one new in-memory array; a save maps
the rows back from the file it wrote (``rebase``). Candidates in a mapped base are read from its file
(``retrieval/row_file.py``), not gathered from the map, whose faults would leave every page of it
resident after a few hundred searches; the map serves what reads every row (exact search, builds).

Writers take a lock; a search reads an immutable view (rows, keys, live mask, graph) taken under
the lock, so searches never see half a document. This module keeps the rows under writes and the
graph built; how a search reads the view is ``retrieval/vector_view.py``.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calypso.embeddings.base import DimensionMismatch
from calypso.retrieval import ann, vector_view
from calypso.retrieval.row_file import RowFile, release_pages
from calypso.retrieval.vector_view import View

log = logging.getLogger("calypso.index")

ABSORB_ROWS = 1024  # tail rows that make the background thread extend the graph (the tail costs ~30 us/1k)


@dataclass(frozen=True)
class Frozen:
    """What a save writes: one view of the rows and, when ``graph`` is set, the graph (pinned, so it holds
    still) covering rows ``[0, graph_rows)``; ``base_file``: the file the view's base is mapped from."""

    base: np.ndarray
    tail: np.ndarray
    chunk_keys: np.ndarray
    doc_keys: np.ndarray
    live: np.ndarray
    ranges: dict[int, tuple[int, int]]
    graph: ann.GraphIndex | None
    graph_rows: int
    base_file: Path | None
    generation: int

    @property
    def rows(self) -> int:
        return len(self.chunk_keys)

    @property
    def signature(self) -> tuple[int, int, int, int]:
        """``ExactVectorIndex.signature`` of what this holds."""
        return self.generation, self.rows, self.rows - int(np.count_nonzero(self.live)), self.graph_rows


class ExactVectorIndex:
    """Chunk vectors by document; ``search`` gives ``(chunk_key, cosine)`` best first (``store.base.VectorSearch``).

    ``ann_min_vectors``: build a graph for candidates once this many rows are live (0: always exact).
    ``absorb_rows``: tail rows that make the graph absorb them; ``graph_threads``: threads building it.
    """

    def __init__(
        self,
        dimension: int,
        model: str = "",
        *,
        ann_min_vectors: int = 0,
        absorb_rows: int = ABSORB_ROWS,
        graph_threads: int = ann.BUILD_THREADS,
    ) -> None:
        self.dimension = dimension
        self.model = model
        self.ann_min_vectors = ann_min_vectors if ann_min_vectors > 0 and ann.available() else 0
        self.absorb_rows = max(1, absorb_rows)
        self.graph_threads = graph_threads
        self._lock = threading.Lock()
        self._base = np.zeros((0, dimension), dtype=np.float32)  # rows [0, b): never written
        self._base_file: Path | None = None  # where _base is mapped from (a save links it instead of writing it)
        self._reader: RowFile | None = None  # _base's rows read from _base_file (see vector_view._scores)
        self._tail = np.zeros((0, dimension), dtype=np.float32)  # rows [b, b + capacity): adds write past n
        self._chunk_keys = np.zeros(0, dtype=np.int64)
        self._doc_keys = np.zeros(0, dtype=np.int64)
        self._live = np.zeros(0, dtype=bool)
        self._n = 0
        self._dead = 0
        self._ranges: dict[int, tuple[int, int]] = {}
        self._graph: ann.GraphIndex | None = None
        self._generation = 0  # bumped when rows move (compaction): a graph of an older one is dropped
        self._builder: threading.Thread | None = None
        self._idle = threading.Condition(self._lock)  # notified when the builder thread ends
        self._closed = False
        self._bulk = 0  # open bulk() blocks: no graph work starts meanwhile
        self._view = self._snapshot()
        if self.ann_min_vectors:
            _with_graphs.add(self)

    def __len__(self) -> int:
        return self._n - self._dead

    def __contains__(self, doc_key: int) -> bool:
        return doc_key in self._ranges

    def add(self, doc_key: int, chunk_keys: Sequence[int], vectors: np.ndarray) -> None:
        """Add one document's chunks; replaces the document if already present."""
        v = np.asarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[0] != len(chunk_keys):
            raise ValueError(f"expected {len(chunk_keys)} vectors, got shape {v.shape}")
        if v.shape[1] != self.dimension:
            raise DimensionMismatch(
                f"Vectors of {v.shape[1]} dimensions cannot join an index of {self.dimension}"
                f"{f' made by {self.model!r}' if self.model else ''}: run `calypso reindex` after changing "
                "the embedding model."
            )
        with self._lock:
            if doc_key in self._ranges:
                self._remove_locked(doc_key)
            need, b = self._n + len(chunk_keys), len(self._base)
            if need - b > len(self._tail):
                self._tail = _grow(self._tail, max(need - b, 2 * len(self._tail), 1024))
            if need > len(self._chunk_keys):
                cap = max(need, 2 * len(self._chunk_keys), 1024)
                self._chunk_keys = _grow(self._chunk_keys, cap)
                self._doc_keys = _grow(self._doc_keys, cap)
                self._live = _grow(self._live, cap)
            s = slice(self._n, need)
            self._tail[self._n - b : need - b] = v
            self._chunk_keys[s] = chunk_keys
            self._doc_keys[s] = doc_key
            self._live[s] = True
            self._ranges[doc_key] = (self._n, need)
            self._n = need
            self._view = self._snapshot()
            self._start_builder_locked()

    def remove(self, doc_key: int) -> bool:
        """Forget a document's chunks; False if it was not here."""
        with self._lock:
            if doc_key not in self._ranges:
                return False
            self._remove_locked(doc_key)
            if self._dead > max(1024, self._n // 4):
                self._compact_locked()
            self._view = self._snapshot()
            self._start_builder_locked()
            return True

    def search(
        self, query: np.ndarray, k: int = 10, doc_keys: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """Up to ``k`` live chunks by cosine with ``query`` (a unit vector), optionally within ``doc_keys``."""
        view = self._view
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dimension:
            raise DimensionMismatch(
                f"A {q.shape[0]}-dimensional query cannot search vectors of {self.dimension}"
                f"{f' made by {self.model!r}' if self.model else ''}: run `calypso reindex` after changing "
                "the embedding model, or set CALYPSO_EMBEDDING_MODEL back."
            )
        return vector_view.search(view, q, k, doc_keys)

    def trim(self) -> None:
        """Give back the spare capacity that growing by doubling left (up to half the matrix after a load)."""
        with self._lock:
            if self._dead:
                self._compact_locked()
            elif len(self._chunk_keys) > self._n:  # positions unchanged: the graph stays valid
                n = self._n
                self._tail = self._tail[: n - len(self._base)].copy()
                self._chunk_keys = self._chunk_keys[:n].copy()
                self._doc_keys = self._doc_keys[:n].copy()
                self._live = self._live[:n].copy()
            self._view = self._snapshot()
            self._start_builder_locked()

    @property
    def capacity(self) -> int:
        return len(self._base) + len(self._tail)

    @property
    def mapped_rows(self) -> int:
        """Rows read from a memory-mapped snapshot file (the rest are in memory)."""
        return len(self._base) if self._base_file is not None else 0

    @property
    def matrix_bytes(self) -> int:
        """Bytes of float32 rows held, mapped or in memory (dead rows and spare capacity included)."""
        return int(self._base.nbytes + self._tail.nbytes)

    def exact_scores(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every row's cosine with ``query`` and its chunk key, dead rows included (for measurements)."""
        view = self._view
        return vector_view.all_scores(view, np.asarray(query, dtype=np.float32).reshape(-1)), view.chunk_keys

    @property
    def rows(self) -> int:
        """Rows held, dead ones included (positions 0..rows-1)."""
        return self._n

    @property
    def graph_rows(self) -> int:
        """Rows the current graph covers (0: searches are exact)."""
        graph = self._graph
        return graph.covered if graph is not None else 0

    @property
    def ann_graph(self) -> ann.GraphIndex | None:
        """The graph that searches use now for candidates (None: they are exact)."""
        return self._view.graph

    @property
    def graph_bytes(self) -> int:
        graph = self._graph
        return graph.memory_bytes if graph is not None else 0

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Writes inside start no graph work until the block ends: a build racing a load slowed the load
        of 200k vectors threefold (5.9 s -> 19.8 s under load) for a graph that was not ready sooner."""
        with self._lock:
            self._bulk += 1
        try:
            yield
        finally:
            with self._lock:
                self._bulk -= 1
                self._start_builder_locked()

    def wait_for_graph(self, timeout: float | None = None) -> bool:
        """Wait until no graph work is pending; True when a graph then serves searches."""
        with self._idle:
            self._idle.wait_for(lambda: self._builder is None, timeout)
            return self._graph is not None

    def close(self, timeout: float | None = None) -> None:
        """Stop the background builder at its next slice of rows (searches stay possible, exact or not)."""
        with self._idle:
            self._closed = True
            if timeout is not None:
                self._idle.wait_for(lambda: self._builder is None, timeout)

    # -- saving and restoring (retrieval/vector_snapshot.py) ------------------------------
    @classmethod
    def restored(
        cls,
        dimension: int,
        model: str,
        *,
        base: np.ndarray,
        base_file: Path | None,
        tail: np.ndarray,
        chunk_keys: np.ndarray,
        doc_keys: np.ndarray,
        live: np.ndarray,
        ranges: dict[int, tuple[int, int]],
        graph: ann.GraphIndex | None,
        ann_min_vectors: int = 0,
        absorb_rows: int = ABSORB_ROWS,
        graph_threads: int = ann.BUILD_THREADS,
    ) -> ExactVectorIndex:
        """An index over saved rows (``base``: read-only, usually memory-mapped; ``tail``: copied into memory);
        the caller checked that the parts agree. A graph due and missing is built in the background."""
        index = cls(
            dimension, model, ann_min_vectors=ann_min_vectors, absorb_rows=absorb_rows, graph_threads=graph_threads
        )
        n = len(chunk_keys)
        with index._lock:
            index._base, index._base_file = base, base_file
            index._reader = _reader(base_file, len(base), dimension) if base_file is not None else None
            index._tail = np.array(tail, dtype=np.float32).reshape(-1, dimension)
            index._chunk_keys = np.array(chunk_keys, dtype=np.int64)
            index._doc_keys = np.array(doc_keys, dtype=np.int64)
            index._live = np.array(live, dtype=bool)
            index._n, index._dead = n, n - int(np.count_nonzero(index._live))
            index._ranges = dict(ranges)
            index._graph = graph if index.ann_min_vectors else None
            index._view = index._snapshot()
            index._start_builder_locked()
        return index

    @contextmanager
    def pinned_graph(self) -> Iterator[ann.GraphIndex | None]:
        """The current graph, not extended while inside (an extension under way is waited for)."""
        with self._lock:
            graph = self._graph
        if graph is None:
            yield None
            return
        with graph.pinned():
            yield graph

    def freeze(self, pinned: ann.GraphIndex | None) -> Frozen:
        """What a save writes now: the rows, and the graph if it is ``pinned`` (see ``pinned_graph``)."""
        with self._lock:
            view = self._view
            graph = pinned if pinned is not None and view.graph is pinned else None  # else: dropped meanwhile
            return Frozen(
                view.base,
                view.tail,
                view.chunk_keys,
                view.doc_keys,
                view.live,
                view.ranges.copy(),
                graph,
                graph.covered if graph is not None else 0,
                self._base_file if view.base is self._base else None,
                self._generation,
            )

    def rebase(self, saved: Frozen, rows: np.ndarray, rows_file: Path) -> bool:
        """Read rows ``[0, len(rows))`` from ``rows`` (``saved``'s rows as a save wrote them to ``rows_file``,
        memory-mapped) instead of memory; False when the rows moved since (compaction)."""
        with self._lock:
            b = len(self._base)
            if self._generation != saved.generation or not b <= len(rows) <= self._n:
                return False
            if rows is self._base:  # the same file, linked under a new name
                self._base_file = rows_file
                return True
            rest = self._tail[len(rows) - b : self._n - b]
            self._tail = np.array(rest, dtype=np.float32)  # the in-memory rows past the file, and room for more
            self._base, self._base_file = rows, rows_file
            self._reader = _reader(rows_file, len(rows), self.dimension)
            self._view = self._snapshot()
            return True

    def signature(self) -> tuple[int, int, int, int]:
        """Changes whenever what a save would write changes: (generation, rows, dead rows, graph rows)."""
        with self._lock:
            return self._generation, self._n, self._dead, self._graph.covered if self._graph is not None else 0

    @property
    def building(self) -> bool:
        """Whether graph work runs in the background now."""
        return self._builder is not None

    # -- the graph, built and extended in the background --------------------------------
    def _graph_work_locked(self) -> bool:
        if self._closed or self._bulk or not self.ann_min_vectors:
            return False
        if self._graph is None:
            return self._n - self._dead >= self.ann_min_vectors
        # A mapped graph is copied into memory to grow: let its tail (searched exactly) grow longer first.
        due = self.absorb_rows if self._graph.mapped is None else max(self.absorb_rows, self._graph.covered // 16)
        return self._n - self._graph.covered >= due

    def _start_builder_locked(self) -> None:
        if self._builder is None and self._graph_work_locked():
            self._builder = threading.Thread(target=self._build, name="vector-graph", daemon=True)
            self._builder.start()

    def _build(self) -> None:
        try:
            while True:
                with self._lock:
                    if not self._graph_work_locked():
                        return
                    # Rows [0, n) of these arrays never change: adds write past n; growth, compaction and
                    # rebase make new arrays. So they are read without the lock.
                    base, tail, n, graph, generation = self._base, self._tail, self._n, self._graph, self._generation
                if graph is None:
                    fresh = ann.GraphIndex(self.dimension)
                    while fresh.covered < n:
                        part = _rows_between(base, tail, fresh.covered, n)
                        if not fresh.extend(part, fresh.covered, self.graph_threads, self._stopping):
                            return
                    with self._lock:
                        if generation == self._generation:  # else rows moved meanwhile: build again
                            self._graph = fresh
                            self._view = self._snapshot()
                            log.info("vector graph: %d rows in %.1f MB", n, fresh.memory_bytes / 2**20)
                    # The build (and the exact searches meanwhile) mapped every page of a mapped base; searches
                    # through the graph read their rows from the file, so let those pages go.
                    release_pages(base)
                else:  # in place, a slice at a time: searches go exact while one is added (see ann.py)
                    # A bounded step, then the arrays are taken again: a load's old, larger buffer (trim
                    # replaces it) is not kept alive for the whole extension.
                    part = _rows_between(base, tail, graph.covered, min(n, graph.covered + 4 * ann.EXTEND_ROWS))
                    graph.extend(part, graph.covered, self.graph_threads, self._stopping)
        except Exception:  # noqa: BLE001 - searches stay exact; the next write tries again
            log.exception("vector graph build failed; searching exactly")
        finally:
            with self._lock:
                self._builder = None
                self._idle.notify_all()

    def _stopping(self) -> bool:
        return self._closed

    # -- rows -------------------------------------------------------------------------
    def _remove_locked(self, doc_key: int) -> None:
        start, end = self._ranges.pop(doc_key)
        self._dead += end - start
        live = self._live.copy()  # a running search keeps the mask it took
        live[start:end] = False
        self._live = live

    def _compact_locked(self) -> None:
        keep = np.flatnonzero(self._live[: self._n])
        moved_to = np.cumsum(self._live[: self._n]) - 1  # new position of each kept row
        b = len(self._base)
        in_base = keep[keep < b]
        rows = np.empty((len(keep), self.dimension), dtype=np.float32)
        rows[: len(in_base)] = self._base[in_base]
        rows[len(in_base) :] = self._tail[keep[len(in_base) :] - b]
        self._base, self._base_file, self._reader = rows, None, None  # in memory until the next save maps it
        self._tail = np.zeros((0, self.dimension), dtype=np.float32)
        self._chunk_keys = self._chunk_keys[keep].copy()
        self._doc_keys = self._doc_keys[keep].copy()
        self._live = np.ones(len(keep), dtype=bool)
        # A new dict: views of the old rows keep the old ranges.
        self._ranges = {d: (int(moved_to[s]), int(moved_to[s]) + e - s) for d, (s, e) in self._ranges.items()}
        self._n, self._dead = len(keep), 0
        if self._graph is not None:
            log.info("vector graph dropped: compaction moved the rows; rebuilding in the background")
        self._graph = None
        self._generation += 1

    def _snapshot(self) -> View:
        n, b = self._n, len(self._base)
        return View(
            self._base,
            self._tail[: n - b],
            self._chunk_keys[:n],
            self._doc_keys[:n],
            self._live[:n],
            n - self._dead,
            self._ranges,
            self._graph,
            self._reader,
        )


# Indexes that may run a builder: stopped at exit, as a thread still inside usearch when the interpreter
# goes down aborts the process ("terminate called without an active exception").
_with_graphs: weakref.WeakSet[ExactVectorIndex] = weakref.WeakSet()


@atexit.register
def _stop_builders() -> None:
    for index in list(_with_graphs):
        index.close(timeout=10)


def _rows_between(base: np.ndarray, tail: np.ndarray, start: int, end: int) -> np.ndarray:
    """Rows from ``start`` up to ``end`` or the end of the part ``start`` is in, whichever comes first."""
    b = len(base)
    return base[start : min(end, b)] if start < b else tail[start - b : end - b]


def _reader(path: Path, rows: int, dimension: int) -> RowFile | None:
    """Rows ``[0, rows)`` read from ``path``; None (they are gathered from the map) when it cannot be opened."""
    if not rows or not hasattr(os, "pread"):  # no pread (Windows): gathered from the map
        return None
    try:
        return RowFile(path, rows, dimension)
    except (OSError, ValueError) as exc:
        log.warning("vector rows in %s gathered from the memory map: %s", path, exc)
        return None


def _grow(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
    out[: len(a)] = a
    return out
