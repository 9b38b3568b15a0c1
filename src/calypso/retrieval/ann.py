"""An approximate nearest-neighbour graph (usearch HNSW, int8) that proposes candidates for ``ExactVectorIndex``.

The graph's keys are row positions of the exact index's float32 matrix, so it only ever proposes
rows: the exact index scores them from its own rows, filters them by its live mask, and adds the
rows the graph has not absorbed yet. Scores therefore stay exact cosines; the graph decides only
which rows are looked at. Measured at 200k x 384 (docs/benchmarks/hybrid.md, "ANN vector index"): int8,
connectivity 16, expansion 128, 200 candidates reranked exactly: 0.5 ms p50 against 10.5 ms for
the exact product, recall@100 0.987, +111 MB, built in ~19 s on 2 threads.

Extending a graph that searches use would race usearch's growth of its arrays, so searches and
extensions exclude each other, but a search never waits: ``candidates`` returns None while an
extension runs (the caller searches exactly, ~12 ms at 200k), and an extension waits only for the
searches already inside (each under a millisecond). A plain lock would serialise concurrent
searches; copying the graph to extend a new one would double its memory.

A graph is saved with its namespace's index snapshot (``retrieval/vector_snapshot.py``) and restored
from it memory-mapped (usearch's ``view``): its pages are file-backed, not anonymous memory. A mapped
graph is immutable, so extending one first copies it into memory ("thaws" it); ``remap`` maps it back
onto the file a save just wrote.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("calypso.index")

CONNECTIVITY = 16  # edges per node: 32 gained no recall worth its memory in the lead's runs
EXPANSION_ADD = 128
EXPANSION_SEARCH = 128  # usearch widens it to the candidates asked for
BUILD_THREADS = max(1, min(2, os.cpu_count() or 1))  # searches stay single-threaded
EXTEND_ROWS = 8192  # rows per usearch call: a stop request or waiting searches get in between (~0.5 s)

_notified = False


def _usearch() -> Any:
    """The usearch ``Index`` class, or None when the package is missing (logged once)."""
    global _notified
    # onnxruntime (the local embedding model) must be loaded first: importing it after usearch 2.26's
    # compiled module crashes the process (segfault in onnxruntime's pybind state; the other order works).
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401
    try:
        from usearch.index import Index
    except ImportError:
        if not _notified:
            _notified = True
            log.warning("usearch is not installed: vector search stays exact (pip install 'usearch>=2.26,<3')")
        return None
    return Index


def available() -> bool:
    return _usearch() is not None


class GraphIndex:
    """An HNSW graph over rows ``[0, covered)`` of one matrix; ``candidates`` gives row positions.

    ``mapped``: the file the graph is memory-mapped from while it is unchanged since (None: in memory).
    """

    def __init__(self, dimension: int, *, _index: Any = None, covered: int = 0, mapped: Path | None = None) -> None:
        index_class = _usearch()
        if index_class is None:
            raise RuntimeError("usearch is not installed")
        self.dimension = dimension
        self._index = (
            _index
            if _index is not None
            else index_class(
                ndim=dimension,
                metric="ip",  # rows are unit vectors: inner product is the cosine
                dtype="i8",
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
                expansion_search=EXPANSION_SEARCH,
                enable_key_lookups=False,  # keys are row positions; no key -> slot table needed
            )
        )
        self.covered = covered
        self.mapped = mapped
        self._state = threading.Condition()
        self._searching = 0
        self._extending = False

    @classmethod
    def restore(cls, path: Path, dimension: int, covered: int) -> GraphIndex:
        """The graph saved at ``path``, memory-mapped; ValueError when it is not a graph of ``covered`` rows
        of ``dimension`` (int8, inner product) as this module builds them."""
        index_class = _usearch()
        if index_class is None:
            raise RuntimeError("usearch is not installed")
        try:
            meta = index_class.metadata(str(path))
            found = (meta or {}).get("dimensions"), (meta or {}).get("count_present"), (meta or {}).get("count_deleted")
            kinds = str((meta or {}).get("kind_scalar")), str((meta or {}).get("kind_metric"))
            if found != (dimension, covered, 0) or not kinds[0].endswith("I8") or not kinds[1].endswith("IP"):
                raise ValueError(
                    f"graph file holds {found[1]} rows of {found[0]} dimensions ({kinds}), expected {covered} of {dimension}"
                )
            index = index_class.restore(str(path), view=True)
        except RuntimeError as exc:  # usearch's own complaint about the file
            raise ValueError(f"graph file unreadable: {exc}") from exc
        if index is None or index.ndim != dimension or len(index) != covered:
            raise ValueError("graph file does not restore as saved")
        index.expansion_search = EXPANSION_SEARCH  # not kept in the file
        return cls(dimension, _index=index, covered=covered, mapped=path)

    def save(self, path: Path) -> int:
        """Write the graph to ``path``; returns the rows it covers. Call it inside ``pinned``."""
        self._index.save(str(path))
        return self.covered

    @contextlib.contextmanager
    def pinned(self) -> Iterator[None]:
        """No extension while inside (waits for one under way): ``covered`` and the file a save writes hold still."""
        with self._state:
            self._state.wait_for(lambda: not self._extending)
            self._searching += 1
        try:
            yield
        finally:
            with self._state:
                self._searching -= 1
                if not self._searching:
                    self._state.notify_all()

    def remap(self, path: Path, covered: int) -> bool:
        """Map the graph onto ``path`` (its own save, of ``covered`` rows) instead of holding it in memory;
        False when it changed since that save."""
        if self.covered != covered:
            return False
        if self.mapped is not None:  # the same file, linked under a new name: follow it (the old one may go)
            self.mapped = path
            return True
        restored = GraphIndex.restore(path, self.dimension, covered)
        with self._exclusive():
            if self.covered != covered:
                return False
            self._index, self.mapped = restored._index, path
        return True

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        with self._state:
            self._state.wait_for(lambda: not self._extending)
            self._extending = True  # new searches go exact from here on
            while self._searching:
                self._state.wait()
        try:
            yield
        finally:
            with self._state:
                self._extending = False
                self._state.notify_all()

    def extend(
        self, rows: np.ndarray, start: int, threads: int = BUILD_THREADS, stop: Callable[[], bool] | None = None
    ) -> bool:
        """Add ``rows`` as positions ``start, start+1, ...`` (``start`` must equal ``covered``), a slice at a
        time; False when ``stop()`` said to give up between two slices (what was added stays)."""
        if start != self.covered:
            raise ValueError(f"the graph covers {self.covered} rows, not {start}")
        for at in range(0, len(rows), EXTEND_ROWS):
            if stop is not None and stop():
                return False
            part = np.ascontiguousarray(rows[at : at + EXTEND_ROWS], dtype=np.float32)
            with self._exclusive():
                if self.mapped is not None:  # a mapped graph is read-only: continue in a copy in memory
                    self._index, self.mapped = self._index.copy(), None
                    self._index.expansion_search = EXPANSION_SEARCH
                keys = np.arange(start + at, start + at + len(part), dtype=np.uint64)
                self._index.add(keys, part, threads=threads)
                self.covered = start + at + len(part)
        return True

    def candidates(self, query: np.ndarray, count: int) -> tuple[np.ndarray, int] | None:
        """Up to ``count`` row positions near ``query`` and the rows the graph covered; None while it is extended."""
        with self._state:
            if self._extending:
                return None
            self._searching += 1
            covered = self.covered
        try:
            found = self._index.search(query, count, threads=1)
            keys = np.asarray(found.keys, dtype=np.uint64).astype(np.int64)
        finally:
            with self._state:
                self._searching -= 1
                if not self._searching:
                    self._state.notify_all()
        return keys[(keys >= 0) & (keys < covered)], covered

    @property
    def memory_bytes(self) -> int:
        return int(self._index.memory_usage)
