"""ExactVectorIndex against brute force, with removals, filters and dimension checks."""

from __future__ import annotations

import numpy as np
import pytest

from calypso.embeddings.base import DimensionMismatch, normalise
from calypso.retrieval.vectors import ExactVectorIndex


def _docs(rng: np.random.Generator, n_docs: int, dim: int) -> dict[int, tuple[list[int], np.ndarray]]:
    out, key = {}, 0
    for d in range(n_docs):
        n = int(rng.integers(1, 6))
        out[d] = (list(range(key, key + n)), normalise(rng.standard_normal((n, dim))))
        key += n
    return out


def _brute(docs: dict, q: np.ndarray, k: int, allowed: set[int] | None = None) -> list[int]:
    pairs = [
        (float(v @ q), c)
        for d, (keys, vecs) in docs.items()
        if allowed is None or d in allowed
        for c, v in zip(keys, vecs)
    ]
    return [c for _, c in sorted(pairs, key=lambda p: (-p[0], p[1]))[:k]]


def test_matches_brute_force_through_adds_and_removes() -> None:
    rng = np.random.default_rng(7)
    docs = _docs(rng, 600, 32)
    index = ExactVectorIndex(32, model="test")
    for d, (keys, vecs) in docs.items():
        index.add(d, keys, vecs)
    for d in range(0, 600, 2):  # enough removals to compact
        assert index.remove(d)
        del docs[d]
    assert not index.remove(0)
    keys, vecs = _docs(rng, 1, 32)[0]
    index.add(1, [10_000 + k for k in keys], vecs)  # replaces document 1
    docs[1] = ([10_000 + k for k in keys], vecs)
    assert len(index) == sum(len(k) for k, _ in docs.values()) and 1 in index and 0 not in index
    for _ in range(20):
        q = normalise(rng.standard_normal((1, 32)))[0]
        assert [c for c, _ in index.search(q, 10)] == _brute(docs, q, 10)
        allowed = {1, 3, 5, 7, 99}
        assert [c for c, _ in index.search(q, 5, doc_keys=allowed)] == _brute(docs, q, 5, allowed)
    scores = [s for _, s in index.search(q, 50)]
    assert scores == sorted(scores, reverse=True) and all(-1.0001 <= s <= 1.0001 for s in scores)


def test_empty_and_edge_cases() -> None:
    index = ExactVectorIndex(4)
    q = np.array([1, 0, 0, 0], dtype=np.float32)
    assert index.search(q, 5) == []
    index.add(1, [10, 11], normalise(np.eye(4, dtype=np.float32)[:2]))
    assert index.search(q, 5) == [(10, 1.0), (11, 0.0)]
    assert index.search(q, 0) == [] and index.search(q, 5, doc_keys=[2]) == []


def test_dimension_mismatch_names_the_fix() -> None:
    index = ExactVectorIndex(4, model="minilm-l6-v2-int8")
    with pytest.raises(DimensionMismatch, match="calypso reindex"):
        index.add(1, [1], np.ones((1, 8), dtype=np.float32))
    with pytest.raises(DimensionMismatch, match="minilm-l6-v2-int8"):
        index.search(np.ones(8, dtype=np.float32))
