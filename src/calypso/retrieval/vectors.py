"""Exact nearest-neighbour search over unit vectors, in memory: the embedded backend's vector index.

One index per namespace, beside its BM25 index, keyed the same way: chunk keys grouped
by document key, so a document is added or removed whole. Search is one float32
matrix-vector product and a partial sort: at 200k x 384 it takes 6.6 ms p50 on the
reference machine (docs/benchmarks.md, "Embedding models"), inside the hybrid query
budget with no ANN structure to build or persist. float16 storage would halve memory
but numpy has no fast kernel for it (35 times slower), so rows stay float32.

Writers take a lock; a search reads an immutable view (matrix, keys, live mask) taken
under the lock, so searches never see half a document.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from calypso.embeddings.base import DimensionMismatch


@dataclass(frozen=True)
class _View:
    rows: np.ndarray  # (n, d) float32, n = used rows
    chunk_keys: np.ndarray  # (n,) int64
    doc_keys: np.ndarray  # (n,) int64
    live: np.ndarray  # (n,) bool


class ExactVectorIndex:
    """Chunk vectors by document; ``search`` gives ``(chunk_key, cosine)`` best first."""

    def __init__(self, dimension: int, model: str = "") -> None:
        self.dimension = dimension
        self.model = model
        self._lock = threading.Lock()
        self._rows = np.zeros((0, dimension), dtype=np.float32)
        self._chunk_keys = np.zeros(0, dtype=np.int64)
        self._doc_keys = np.zeros(0, dtype=np.int64)
        self._live = np.zeros(0, dtype=bool)
        self._n = 0
        self._dead = 0
        self._docs: set[int] = set()
        self._view = self._snapshot()

    def __len__(self) -> int:
        return self._n - self._dead

    def __contains__(self, doc_key: int) -> bool:
        return doc_key in self._docs

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
            if doc_key in self._docs:
                self._remove_locked(doc_key)
            need = self._n + len(chunk_keys)
            if need > len(self._rows):
                cap = max(need, 2 * len(self._rows), 1024)
                self._rows = _grow(self._rows, cap)
                self._chunk_keys = _grow(self._chunk_keys, cap)
                self._doc_keys = _grow(self._doc_keys, cap)
                self._live = _grow(self._live, cap)
            s = slice(self._n, need)
            self._rows[s] = v
            self._chunk_keys[s] = chunk_keys
            self._doc_keys[s] = doc_key
            self._live[s] = True
            self._n = need
            self._docs.add(doc_key)
            self._view = self._snapshot()

    def remove(self, doc_key: int) -> bool:
        """Forget a document's chunks; False if it was not here."""
        with self._lock:
            if doc_key not in self._docs:
                return False
            self._remove_locked(doc_key)
            if self._dead > max(1024, self._n // 4):
                self._compact_locked()
            self._view = self._snapshot()
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
        if k <= 0 or not len(view.chunk_keys):
            return []
        sims = view.rows @ q
        mask = view.live
        if doc_keys is not None:
            mask = mask & np.isin(view.doc_keys, np.fromiter(doc_keys, dtype=np.int64))
        candidates = np.flatnonzero(mask)
        if not len(candidates):
            return []
        scores = sims[candidates]
        if len(candidates) > k:
            part = np.argpartition(-scores, k - 1)[:k]
            candidates, scores = candidates[part], scores[part]
        order = np.argsort(-scores, kind="stable")
        return [(int(view.chunk_keys[i]), float(scores[j])) for j, i in zip(order, candidates[order])]

    def trim(self) -> None:
        """Give back the spare capacity that growing by doubling left (up to half the matrix after a load)."""
        with self._lock:
            if self._dead:
                self._compact_locked()
            elif len(self._rows) > self._n:
                n = self._n
                self._rows = self._rows[:n].copy()
                self._chunk_keys = self._chunk_keys[:n].copy()
                self._doc_keys = self._doc_keys[:n].copy()
                self._live = self._live[:n].copy()
            self._view = self._snapshot()

    @property
    def capacity(self) -> int:
        return len(self._rows)

    def _remove_locked(self, doc_key: int) -> None:
        hit = (self._doc_keys[: self._n] == doc_key) & self._live[: self._n]
        self._dead += int(hit.sum())
        live = self._live.copy()  # a running search keeps the mask it took
        live[: self._n][hit] = False
        self._live = live
        self._docs.discard(doc_key)

    def _compact_locked(self) -> None:
        keep = np.flatnonzero(self._live[: self._n])
        self._rows = self._rows[keep].copy()
        self._chunk_keys = self._chunk_keys[keep].copy()
        self._doc_keys = self._doc_keys[keep].copy()
        self._live = np.ones(len(keep), dtype=bool)
        self._n, self._dead = len(keep), 0

    def _snapshot(self) -> _View:
        n = self._n
        return _View(self._rows[:n], self._chunk_keys[:n], self._doc_keys[:n], self._live[:n])


def _grow(a: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
    out[: len(a)] = a
    return out
