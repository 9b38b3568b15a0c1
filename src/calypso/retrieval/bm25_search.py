"""One query scored over a BM25 index's snapshot (``retrieval/bm25.py``): what a search does once its terms are known.

A query is one vectorised scatter-add of its terms' postings into a dense score array, then a top-k
selection above a cheap lower bound of the k-th score (no partition of all N scores). Postings are
scored through their segment's (tf, dl) table until the lookups have cost as much as precomputing
every posting's impact for the current statistics; then the impacts are precomputed (ski rental).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calypso.retrieval.bm25_segments import _I64, _Floats, _Int32s, _Int64s, _Params, _Segment

_DIRECT_TOPK_ROWS = 1 << 15  # below this, top-k takes all positive rows (no k-th bound)

# rows, codes, lut of one posting list; or rows, impacts, None once precomputed
# (the middle array's dtype depends on the third item, which the type cannot express)
_Slice = tuple[_Int32s, NDArray[Any], _Floats | None]
_TINY = float(np.finfo(np.float32).tiny)


def _scatter(scores: _Floats, plists: list[list[_Slice]], coefs: list[float]) -> None:
    """scores[rows] += coef * lut[codes] (or coef * impacts) over all the terms' postings.
    One add.at over concatenated postings: its per-call overhead dominates short lists."""
    items = [(sl, np.float32(c)) for pl, c in zip(plists, coefs) for sl in pl]
    w = np.empty(sum(len(sl[0]) for sl, _ in items), np.float32)
    o = 0
    for (rows, src, lut), c in items:
        e = o + len(rows)
        if lut is None:  # precomputed impacts
            np.multiply(src, c, out=w[o:e])
        else:
            # Codes are always in range: "clip" skips the bounds check ("raise" costs 1.7x: 0.77 against
            # 0.45 ms for 500k postings). Scaling the small table first saves a pass over the postings.
            (lut * c if len(src) > len(lut) else lut).take(src, out=w[o:e], mode="clip")
            if len(src) <= len(lut):
                w[o:e] *= c
        o = e
    if items:
        np.add.at(scores, np.concatenate([sl[0] for sl, _ in items]), w)


def _lookup(scores: _Floats, plist: list[_Slice], coef: float, cand: _Int32s) -> None:
    """Add one term's contribution to the (sorted, distinct, int32) ``cand`` rows only:
    binary search in the ascending posting rows instead of touching every posting."""
    for rows, codes, lut in plist:
        pos = np.searchsorted(rows, cand)
        pos[pos == len(rows)] = 0
        hit = rows[pos] == cand
        if hit.any():
            w = codes[pos[hit]] if lut is None else lut.take(codes[pos[hit]], mode="clip")
            scores[cand[hit]] += w * np.float32(coef)


def _kth_lower_bound(scores: _Floats, rows_lists: list[_Int32s], k: int) -> float:
    """A lower bound on the k-th best score: the k-th best distinct row among the given
    posting rows. A row occurs at most once per list, so the k*m best of m lists' entries
    hold at least k distinct rows. (-x partitions: numpy is slow on many equal maxima.)"""
    rows = np.concatenate(rows_lists) if len(rows_lists) > 1 else rows_lists[0]
    kk = k * len(rows_lists)
    if len(rows) < kk:
        return 0.0
    best = np.argpartition(-scores[rows], kk - 1)[:kk]
    u = np.unique(rows[best])
    return float(-np.partition(-scores[u], k - 1)[k - 1]) if len(u) >= k else 0.0


class Snapshot:
    """What a search reads: immutable, swapped in whole under the writer lock."""

    __slots__ = ("dead", "df", "docs", "impacts", "luts", "n_live", "n_rows", "paid", "params", "row_key", "segs")

    def __init__(
        self,
        *,
        segs: tuple[_Segment, ...],
        df: _Int64s,
        n_live: int,
        luts: tuple[_Floats, ...],
        n_rows: int,
        row_key: _Int64s,
        dead: _Int64s | None,
        docs: dict[int, tuple[int, int]],
        params: _Params,
        paid: list[int],
        impacts: list[_Floats | None],
    ) -> None:
        self.segs, self.df, self.n_live, self.luts, self.n_rows = segs, df, n_live, luts, n_rows
        self.row_key, self.dead, self.docs, self.params = row_key, dead, docs, params
        self.paid = paid  # postings looked up through each segment's lut (mutated by searches)
        self.impacts = impacts  # per segment: precomputed impacts, filled in by searches


def top_k(snap: Snapshot, qtf: dict[int, int], k: int, doc_keys: Collection[int] | None) -> list[tuple[int, float]]:
    """Top-k ``(chunk_key, score)`` of the query whose term ids in the index are ``qtf``'s keys (each with its count
    in the query), by descending score, ties earlier-added first, only scores > 0, within ``doc_keys`` if given."""
    tids = np.fromiter(qtf, _I64, len(qtf))
    df = snap.df[tids].astype(np.float64)
    idf = np.log1p((snap.n_live - df + 0.5) / (df + 0.5))
    coef = (idf * np.fromiter(qtf.values(), np.float64, len(qtf))).astype(np.float32)
    # Posting slices of each query term: one (rows, codes, lut) per segment holding it.
    plists: list[list[_Slice]] = [[] for _ in range(len(tids))]
    for si, (seg, lut) in enumerate(zip(snap.segs, snap.luts)):
        if not seg.n_postings:
            continue
        pos = np.searchsorted(seg.terms, tids)
        pos[pos >= len(seg.terms)] = 0
        hit = np.flatnonzero(seg.terms[pos] == tids)
        ptr = seg.indptr
        imp = snap.impacts[si]
        for i, a, e in zip(hit.tolist(), ptr[pos[hit]].tolist(), ptr[pos[hit] + 1].tolist()):
            if imp is not None:
                plists[i].append((seg.rows[a:e], imp[a:e], None))
            else:  # a segment read from files copies its slices from the page cache, for this search only
                plists[i].append((*seg.postings(a, e), lut))
                snap.paid[si] += e - a
        # Ski rental: once lookups through the (tf, dl) table have cost as much as precomputing every
        # posting's impact for these statistics, precompute it (in memory: not for a segment read from files).
        if imp is None and seg.files is None and snap.paid[si] > seg.n_postings:
            impacts = snap.impacts[si] = lut.take(seg.codes, mode="clip")
            seg.impact = (snap.params, impacts)
    scores = np.zeros(snap.n_rows, np.float32)
    if snap.dead is not None:
        scores[snap.dead] = -np.inf  # tombstones never reach a positive score
    if doc_keys is None:
        _scatter(scores, plists, coef.tolist())
        if snap.n_rows <= _DIRECT_TOPK_ROWS:  # small: every positive row is a cheap candidate
            return _top(scores, np.flatnonzero(scores > 0), k, snap.row_key)
        # Bound the k-th score from the rarest terms' rows, then select above it: a
        # dense compare is far cheaper than partitioning all N (mostly zero) scores.
        probe: list[_Int32s] = []
        for i in np.argsort(-coef, kind="stable").tolist():
            probe.extend(r for r, _, _ in plists[i])
            if sum(map(len, probe)) >= 4 * k:
                break
        theta = _kth_lower_bound(scores, probe, k) if probe else 0.0
        cand: NDArray[np.integer[Any]] = np.flatnonzero(scores >= max(theta, _TINY))
    else:
        cand = _doc_rows(snap.docs, doc_keys, snap.n_rows)
        n_post = sum(len(r) for pl in plists for r, _, _ in pl)
        if len(cand) * len(plists) * 4 < n_post:  # few allowed rows: look them up
            for pl, c in zip(plists, coef.tolist()):
                _lookup(scores, pl, c, cand)
        else:
            _scatter(scores, plists, coef.tolist())
        cand = cand[scores[cand] > 0]
    return _top(scores, cand, k, snap.row_key)


def _top(scores: _Floats, cand: NDArray[np.integer[Any]], k: int, row_key: _Int64s) -> list[tuple[int, float]]:
    vals = scores[cand]
    if len(cand) > 4 * k:  # keep every tie of the k-th value, then sort exactly
        sel = vals >= -np.partition(-vals, k - 1)[k - 1]  # (-x: fast with many ties)
        cand, vals = cand[sel], vals[sel]
    order = np.lexsort((cand, -vals))[:k]
    return list(zip(row_key[cand[order]].tolist(), vals[order].astype(float).tolist()))


def _doc_rows(docs: dict[int, tuple[int, int]], doc_keys: Collection[int], n_rows: int) -> _Int32s:
    # The snapshot's doc map: compaction swaps in a new dict, so row numbers match.
    spans = sorted(s for s in map(docs.get, set(doc_keys)) if s and s[0] < n_rows)
    if not spans:
        return np.zeros(0, np.int32)
    starts = np.fromiter((s[0] for s in spans), _I64, len(spans))
    counts = np.fromiter((s[1] for s in spans), _I64, len(spans))
    offs = np.repeat(starts - np.cumsum(counts) + counts, counts)
    rows = offs + np.arange(int(counts.sum()), dtype=_I64)
    return rows[rows < n_rows].astype(np.int32)  # int32 like posting rows (searchsorted)
