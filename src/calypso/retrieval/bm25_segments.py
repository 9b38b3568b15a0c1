"""The immutable posting segments of the BM25 index (``retrieval/bm25.py``), and how two are merged.

A segment holds the postings of a contiguous row range in CSR form, inverted (term -> rows) for search
and forward (row -> terms) to keep document frequencies exact when rows are removed; its (tf, dl) pairs
are coded into small per-segment tables so a change of avgdl only recomputes those (see bm25.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calypso.retrieval.row_file import SliceFile

_I64 = np.int64

_Int64s = NDArray[np.int64]
_Int32s = NDArray[np.int32]
_Intps = NDArray[np.intp]
# Indices into a segment's (tf, dl) pair tables: uint16, or uint32 beyond 65536 pairs (signed while being built).
_Codes = NDArray[np.integer[Any]]
_Floats = NDArray[np.float32]
_Bools = NDArray[np.bool_]
_Params = tuple[float, float, float]  # (k1, b, avgdl): the statistics an impact table was computed for


def _codes(key: _Int64s) -> tuple[_Intps, _Codes]:
    """(sorted distinct values, index of each value); a bitmap when the range is small."""
    top = int(key.max(initial=-1)) + 1
    if top <= 1 << 24:
        present = np.zeros(top, bool)
        present[key] = True
        return np.flatnonzero(present), (np.cumsum(present, dtype=np.int32) - 1)[key]
    return np.unique(key, return_inverse=True)


class PostingFiles:
    """A saved segment's files (``<prefix>.<array>.npy``) with its inverted postings read by ``pread``: searches
    copy only the slices of their terms, so the postings stay out of the process's memory whatever it searches."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self._rows, self._codes = SliceFile(self.path("rows")), SliceFile(self.path("codes"))
        self._forward = SliceFile(self.path("fwd_terms"))

    @property
    def n_postings(self) -> int:
        return self._rows.length

    def close(self) -> None:
        for file in (self._rows, self._codes, self._forward):
            file.close()

    def path(self, array: str) -> Path:
        return _array_path(self.prefix, array)

    def postings(self, start: int, stop: int) -> tuple[_Int32s, _Codes]:
        """The rows and (tf, dl) codes of postings [start, stop)."""
        return self._rows.read(start, stop), self._codes.read(start, stop)

    def forward(self, start: int, stop: int) -> _Int32s:
        """Forward postings [start, stop): the rows' term ids."""
        return self._forward.read(start, stop)


def _array_path(prefix: Path, array: str) -> Path:
    return prefix.with_name(f"{prefix.name}.{array}.npy")


class _Segment:
    """Immutable postings for rows [row_start, row_stop).

    Inverted: ``terms`` (sorted term ids), ``indptr``, ``rows`` (int32, ascending per
    term), ``codes`` (index into ``pair_tf``/``pair_dl``). Forward: ``fwd_terms`` sliced by
    ``fwd_ptr[row - row_start]``, the distinct terms of each row, used to keep df exact.
    ``files``: where a loaded segment's arrays are saved; its searches read postings from them (see
    :class:`PostingFiles`), its arrays are mapped for what reads them whole (merges, compaction).
    """

    _ARRAYS = ("terms", "indptr", "rows", "codes", "pair_tf", "pair_dl", "fwd_ptr", "fwd_terms")
    __slots__ = (
        "codes",
        "files",
        "fwd_ptr",
        "fwd_terms",
        "impact",
        "indptr",
        "pair_dl",
        "pair_tf",
        "row_start",
        "row_stop",
        "rows",
        "terms",
    )

    terms: _Intps
    indptr: _Int64s
    rows: _Int32s
    codes: _Codes
    pair_tf: _Intps
    pair_dl: _Intps
    fwd_ptr: _Int64s
    fwd_terms: _Int32s

    def __init__(
        self,
        row_start: int,
        *,
        terms: _Intps,
        indptr: _Int64s,
        rows: _Int32s,
        codes: _Codes,
        pair_tf: _Intps,
        pair_dl: _Intps,
        fwd_ptr: _Int64s,
        fwd_terms: _Int32s,
        files: PostingFiles | None = None,
    ) -> None:
        self.row_start = row_start
        self.files = files
        self.impact: tuple[_Params, _Floats] | None = None  # see search
        self.terms, self.indptr, self.rows, self.codes = terms, indptr, rows, codes
        self.pair_tf, self.pair_dl, self.fwd_ptr, self.fwd_terms = pair_tf, pair_dl, fwd_ptr, fwd_terms
        self.row_stop = row_start + len(self.fwd_ptr) - 1

    @classmethod
    def from_forward(
        cls, row_start: int, fwd_counts: _Intps, fwd_term: _Int32s, fwd_tf: _Int32s, row_len: _Int32s
    ) -> _Segment:
        """From forward postings: for each row in turn (``fwd_counts[i]`` postings) its
        distinct term ids ascending (int32) and their tf; ``row_len`` of the same rows."""
        span, n = len(fwd_counts), len(fwd_term)
        fwd_ptr = np.zeros(span + 1, _I64)
        np.cumsum(fwd_counts, out=fwd_ptr[1:])
        # Pair key tf*width + dl per posting (in-place ops: this runs on ~10M postings).
        width = int(row_len.max(initial=0)) + 1
        key = fwd_tf.astype(_I64)
        key *= width
        key += np.repeat(row_len, fwd_counts)
        pairs, fcodes = _codes(key)
        del key
        fcodes = fcodes.astype(np.uint16 if len(pairs) <= 1 << 16 else np.uint32)
        counts = np.bincount(fwd_term) if n else np.zeros(0, _I64)
        terms = np.flatnonzero(counts)
        indptr = np.zeros(len(terms) + 1, _I64)
        np.cumsum(counts[terms], out=indptr[1:])
        # Inverted order (term, then row): a value sort of term<<40 | forward position is
        # ~4x faster than a stable argsort and keeps rows ascending within each term.
        if len(counts) < (1 << 23) and n < (1 << 40):
            pos = fwd_term.astype(_I64)
            pos <<= 40
            for i in range(0, n, 1 << 20):  # blockwise: no full-size arange temporary
                pos[i : i + (1 << 20)] |= np.arange(i, min(n, i + (1 << 20)), dtype=_I64)
            pos.sort()
            pos &= (1 << 40) - 1
        else:
            pos = np.argsort(fwd_term, kind="stable")
        rows = np.repeat(np.arange(row_start, row_start + span, dtype=np.int32), fwd_counts)[pos]
        codes = fcodes[pos]
        del pos, fcodes
        pair_tf, pair_dl = np.divmod(pairs, width)
        return cls(
            row_start,
            terms=terms,
            indptr=indptr,
            rows=rows,
            codes=codes,
            pair_tf=pair_tf,
            pair_dl=pair_dl,
            fwd_ptr=fwd_ptr,
            fwd_terms=fwd_term,
        )

    @property
    def n_postings(self) -> int:
        return len(self.rows)

    def postings(self, start: int, stop: int) -> tuple[_Int32s, _Codes]:
        """Postings [start, stop) in posting order: read from the files when it has them, else sliced."""
        if self.files is not None:
            return self.files.postings(start, stop)
        return self.rows[start:stop], self.codes[start:stop]

    def forward(self, start: int, stop: int) -> _Int32s:
        return self.files.forward(start, stop) if self.files is not None else self.fwd_terms[start:stop]

    def lut(self, k1: float, b: float, avgdl: float) -> _Floats:
        """Per (tf, dl) pair: tf / (tf + k1*(1-b+b*dl/avgdl)), as float32."""
        tf = self.pair_tf.astype(np.float64)
        norm = k1 * (1.0 - b + b * self.pair_dl / max(avgdl, 1e-9))
        return (tf / (tf + norm)).astype(np.float32)

    def nbytes(self) -> int:
        """Bytes held in memory: a segment read from its files keeps only its term directory and pair tables."""
        impact = self.impact[1].nbytes if self.impact is not None else 0
        names = self._ARRAYS if self.files is None else ("terms", "indptr", "pair_tf", "pair_dl")
        arrays: int = sum(getattr(self, a).nbytes for a in names)
        return impact + arrays


def _merge(segs: Sequence[_Segment], live: _Bools, row_map: _Int64s | None = None) -> _Segment:
    """One segment from adjacent ones, dropping dead rows (and renumbering rows by
    ``row_map`` when given). A scatter per input, no sort: within a term, inputs' posting
    lists are concatenated in row order."""
    terms = np.unique(np.concatenate([s.terms for s in segs]))
    width = max(int(s.pair_dl.max(initial=0)) for s in segs) + 1
    pkeys = [s.pair_tf * width + s.pair_dl for s in segs]
    pairs = np.unique(np.concatenate(pkeys))
    fwd_terms, fwd_counts, parts = [], [], []
    for s, pk in zip(segs, pkeys):
        lv = live[s.row_start : s.row_stop]
        cnt = np.diff(s.fwd_ptr)
        fwd_terms.append(s.fwd_terms[np.repeat(lv, cnt)])
        cnt[~lv] = 0
        fwd_counts.append(cnt if row_map is None else cnt[lv])
        tix = np.repeat(np.searchsorted(terms, s.terms), np.diff(s.indptr))
        keep = live[s.rows]
        parts.append((tix[keep], s.rows[keep], np.searchsorted(pairs, pk)[s.codes[keep]]))
    counts = [np.bincount(t, minlength=len(terms)) for t, _, _ in parts]
    total = np.sum(counts, axis=0)
    indptr = np.zeros(len(terms) + 1, _I64)
    np.cumsum(total, out=indptr[1:])
    rows = np.empty(indptr[-1], np.int32)
    codes = np.empty(indptr[-1], np.uint16 if len(pairs) <= 1 << 16 else np.uint32)
    base = indptr[:-1].copy()
    for (tix, r, c), cnt in zip(parts, counts):
        run_start = np.cumsum(cnt) - cnt  # where each term's run starts in this input
        pos = base[tix] + np.arange(len(tix)) - run_start[tix]
        rows[pos] = r if row_map is None else row_map[r]
        codes[pos] = c
        base += cnt
    nz = total > 0
    indptr = np.zeros(int(nz.sum()) + 1, _I64)
    np.cumsum(total[nz], out=indptr[1:])
    fwd_cnt = np.concatenate(fwd_counts)
    fwd_ptr = np.zeros(len(fwd_cnt) + 1, _I64)
    np.cumsum(fwd_cnt, out=fwd_ptr[1:])
    pair_tf, pair_dl = np.divmod(pairs, width)
    return _Segment(
        segs[0].row_start if row_map is None else 0,
        terms=terms[nz],
        indptr=indptr,
        rows=rows,
        codes=codes,
        pair_tf=pair_tf,
        pair_dl=pair_dl,
        fwd_ptr=fwd_ptr,
        fwd_terms=np.concatenate(fwd_terms),
    )


class _NpyWriter:
    """A flat ``.npy`` array of known length and dtype written in pieces (what is written leaves memory)."""

    def __init__(self, path: Path, dtype: np.dtype[Any], length: int) -> None:
        self.file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.dtype, self.left = dtype, length
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)}
        np.lib.format.write_array_header_2_0(self.file, header)

    def write(self, part: NDArray[Any]) -> None:
        self.file.write(np.ascontiguousarray(part, self.dtype).data)
        self.left -= len(part)

    def close(self) -> None:
        self.file.close()
        if self.left:
            raise ValueError(f"{self.file.name}: {self.left} items short")


def write_merged(segs: Sequence[_Segment], prefix: Path, batch: int = 1 << 22) -> None:
    """Write adjacent segments as one (``<prefix>.<array>.npy``) without holding it: term by term in batches of
    about ``batch`` postings, each term's postings from every input in row order. Dead rows are kept (searches
    mask them, df already leaves them out), so rows keep their numbers; compaction drops them later."""
    if any(a.row_stop != b.row_start for a, b in zip(segs, segs[1:])):
        raise ValueError("only adjacent segments merge into one file")
    terms = np.unique(np.concatenate([s.terms for s in segs]))
    width = max(int(s.pair_dl.max(initial=0)) for s in segs) + 1
    pkeys = [s.pair_tf * width + s.pair_dl for s in segs]
    pairs = np.unique(np.concatenate(pkeys))
    recode = [np.searchsorted(pairs, pk) for pk in pkeys]  # each input's codes -> the merged table's
    where = [np.searchsorted(terms, s.terms) for s in segs]  # each input's terms among the merged ones
    total = np.zeros(len(terms), _I64)
    for s, w in zip(segs, where):
        total[w] += np.diff(s.indptr)
    indptr = np.zeros(len(terms) + 1, _I64)
    np.cumsum(total, out=indptr[1:])
    code_type = np.dtype(np.uint16 if len(pairs) <= 1 << 16 else np.uint32)
    pair_tf, pair_dl = np.divmod(pairs, width)
    for name, array in (("terms", terms), ("indptr", indptr), ("pair_tf", pair_tf), ("pair_dl", pair_dl)):
        np.save(_array_path(prefix, name), array)
    rows = _NpyWriter(_array_path(prefix, "rows"), np.dtype(np.int32), int(indptr[-1]))
    codes = _NpyWriter(_array_path(prefix, "codes"), code_type, int(indptr[-1]))
    t0 = 0
    while t0 < len(terms):  # terms [t0, t1): about ``batch`` postings
        t1 = max(t0 + 1, int(np.searchsorted(indptr, indptr[t0] + batch, side="right")) - 1)
        base = indptr[t0:t1] - indptr[t0]  # where each term's run starts in this batch
        out_rows = np.empty(int(indptr[t1] - indptr[t0]), np.int32)
        out_codes = np.empty(len(out_rows), code_type)
        for s, w, rc in zip(segs, where, recode):
            lo, hi = np.searchsorted(w, [t0, t1])
            if lo == hi:
                continue
            a, e = int(s.indptr[lo]), int(s.indptr[hi])
            r, c = s.postings(a, e)
            count = np.diff(s.indptr[lo : hi + 1])
            tix = np.repeat(w[lo:hi] - t0, count)
            pos = base[tix] + np.arange(e - a) - np.repeat(s.indptr[lo:hi] - a, count)
            out_rows[pos], out_codes[pos] = r, rc[c]
            base[w[lo:hi] - t0] += count
        rows.write(out_rows)
        codes.write(out_codes)
        t0 = t1
    rows.close()
    codes.close()
    offsets = np.cumsum([0] + [int(s.fwd_ptr[-1]) for s in segs])
    fwd_ptr = np.concatenate([np.zeros(1, _I64)] + [s.fwd_ptr[1:] + o for s, o in zip(segs, offsets)])
    np.save(_array_path(prefix, "fwd_ptr"), fwd_ptr)
    forward = _NpyWriter(_array_path(prefix, "fwd_terms"), np.dtype(np.int32), int(offsets[-1]))
    for s in segs:
        for a in range(0, int(s.fwd_ptr[-1]), batch):
            forward.write(s.forward(a, min(a + batch, int(s.fwd_ptr[-1]))))
    forward.close()
