"""In-memory BM25 keyword index over chunk texts, updated incrementally.

Layout (Lucene-like): every chunk gets a *row* id in insertion order. Added chunks are
buffered as term-id streams and compiled lazily, at the next search, into an immutable
*segment* (CSR posting lists of numpy arrays over a contiguous row range). Small tail
segments are merged geometrically, so bulk loading is one sort and a single add costs a
small merge. Removals are tombstones (exact df is kept via each segment's forward index);
a global compaction renumbers rows once a quarter of them are dead.

Scoring is Lucene's BM25 (Lucene >= 8, and bm25s' "lucene" method, so scores compare):
``idf * tf / (tf + k1*(1 - b + b*dl/avgdl))``, ``idf = ln(1 + (N - df + 0.5)/(df + 0.5))``;
the classic constant factor (k1+1) is dropped as it never changes a ranking. Postings
store a code into a per-segment table of distinct (tf, dl) pairs, so a change of avgdl
only recomputes those small tables and scores stay exact (equal to a from-scratch build)
after any adds and removes.

This module keeps the index's rows, vocabulary and segments under writes; a query is scored over
its snapshot by ``bm25_search.py``, and ``bm25_files.py`` is its layout on disk.
"""

from __future__ import annotations

import math
import sys
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calypso.heap import return_freed_memory
from calypso.retrieval import bm25_files
from calypso.retrieval.bm25_files import Saved
from calypso.retrieval.bm25_search import Snapshot, top_k
from calypso.retrieval.bm25_segments import _I64, _Int32s, _Int64s, _merge, _Segment, write_merged
from calypso.text.languages import detect
from calypso.text.tokenize import DEFAULT_ANALYZER

# Tuned on SciFact qrels/train.tsv (bench/retrieval_quality.py).
DEFAULT_K1 = 1.2
DEFAULT_B = 0.5

_SMALL_SEGMENT = 1 << 16  # postings: tail segments below this are always merged
_MERGE_RATIO = 4  # merge the two newest segments while the older is < 4x the newer
# Postings: tail segments are not merged beyond this or an eighth of the index, whichever is larger. That
# bounds a merge's temporaries (a merge of everything at 200k passages peaked 400 MB above the index) and
# keeps the number of segments a search visits small (each costs a few microseconds per query term).
_MAX_MERGED = 1 << 21
_COMPILE_TOKENS = 1 << 20  # a bulk load compiles its pending rows every ~1M tokens (bounds the build's peak)
# A build given a spill directory writes its compiled postings there once this many are held in memory, and
# searches them from those files: its peak no longer grows with the index (10 bytes a posting and the merges'
# temporaries: 1.2-1.3 GB at 1M passages before).
_SPILL_POSTINGS = 1 << 22
_ADD_BATCH = 4096  # chunks analysed per locked append (bounds the Python term lists held at once)
_COMPACT_MIN = 1024  # renumber rows once this many, and a quarter of them, are dead
_LANGUAGE_SAMPLE = 8  # detect the language of one passage in this many (for query_language)

# (chunk_key, text), (chunk_key, text, terms) or (chunk_key, text, terms, language): terms already analyzed
# (e.g. stored) skip tokenising; their text may then be "" (the language, when given, is the passage's).
Chunks = Sequence[tuple[int, str] | tuple[int, str, list[str] | None] | tuple[int, str, list[str] | None, str | None]]


class _Vocab(dict[str, int]):
    """term -> term id, assigning the next id to unseen terms (writer side only)."""

    def __missing__(self, term: str) -> int:
        tid = self[term] = len(self)
        return tid


class BM25Index:
    """BM25 over chunks grouped by document, with incremental add/remove.

    - ``add(doc_key, [(chunk_key, text), ...])`` indexes one document's chunks (chunk keys
      are globally unique ints, e.g. SQLite rowids). Re-adding a doc key replaces it.
    - ``remove(doc_key)`` takes effect for every search that starts after it returns.
    - ``search(query, k, doc_keys)`` returns up to ``k`` ``(chunk_key, score)`` by
      descending score (ties: earlier-added first), only scores > 0, optionally restricted
      to chunks of ``doc_keys`` (an empty collection gives no results).
    - N, avgdl and df always reflect the live chunks, so scores equal a fresh build's.

    Thread-safety: one lock serialises writers and the compile/swap of the read snapshot;
    searches otherwise run lock-free on an immutable snapshot, from any number of threads.

    ``save(directory)`` writes the index as ``.npy`` arrays plus small tables; ``load``
    maps the posting arrays from those files (read-only, paged in on use) instead of
    rebuilding, and the loaded index takes adds and removes like a built one.

    ``analyzer`` maps a text to its terms (default: :func:`calypso.text.tokenize.tokenize`).
    """

    def __init__(
        self, k1: float = DEFAULT_K1, b: float = DEFAULT_B, analyzer: Callable[[str], list[str]] | None = None
    ) -> None:
        self.k1, self.b = float(k1), float(b)
        self._analyze = analyzer or DEFAULT_ANALYZER.tokenize
        # Languages of a sample of the passages added (never decremented): a query too short to tell
        # its language is analysed in the most common one, so "Was ist Berlin?" is German in a German
        # knowledge base and English claims stay English in SciFact.
        self._languages: Counter[str] = Counter()
        self._seen = 0
        self._lock = threading.RLock()
        self._vocab = _Vocab()
        self._docs: dict[int, tuple[int, int]] = {}  # doc key -> (first row, n rows)
        self._df = np.zeros(0, _I64)  # live df over compiled segments
        cap = 1024
        self._row_key = np.zeros(cap, _I64)
        self._row_len = np.zeros(cap, np.int32)
        self._row_live = np.zeros(cap, bool)
        self._n_rows = 0  # rows ever assigned (live + dead) since the last compaction
        self._n_live = 0
        self._total_len = 0  # sum of live rows' lengths (for avgdl)
        self._segs: list[_Segment] = []
        self._seg_stop = 0  # rows below this are compiled; pending rows follow
        self._pending: list[_Int32s] = []  # term-id streams of the pending rows
        self._dead: list[_Int64s] = []  # removed rows that are still in segments
        self._n_dead = 0  # dead rows in the row tables (compaction trigger)
        self._snap: Snapshot | None = None
        self._spill: Path | None = None  # where add_many spills compiled postings (see _spill_segments)
        self._spilled = 0  # segments spilled so far (their file names)

    def set_params(self, k1: float, b: float) -> None:
        """Change k1/b in place (only the small per-segment tables are recomputed)."""
        with self._lock:
            self.k1, self.b = float(k1), float(b)
            self._snap = None

    # ----------------------------------------------------------------- writing
    def add(self, doc_key: int, chunks: Chunks) -> None:
        """Index all chunks ``(chunk_key, text)`` of one document (replaces the doc)."""
        self.add_many([(doc_key, chunks)])

    def add_many(self, items: Iterable[tuple[int, Chunks]], *, spill: Path | None = None) -> None:
        """Bulk :meth:`add`; tokenises outside the lock, appends in batches.

        ``spill``: a directory for compiled postings while this bulk load runs (a build before a save): beyond
        ``_SPILL_POSTINGS`` in memory they are written there and searched from the files, so the load's peak stays
        flat whatever the index's size. The files must stay until the index is saved and settled elsewhere."""
        batch: list[tuple[int, list[int], list[list[str]]]] = []
        n_chunks = 0
        self._spill = spill
        try:
            for doc_key, chunks in items:
                keys = [int(c[0]) for c in chunks]
                self._sample_languages(chunks)
                terms = [c[2] if len(c) > 2 and c[2] is not None else self._analyze(c[1]) for c in chunks]
                batch.append((int(doc_key), keys, terms))
                n_chunks += len(keys)
                if n_chunks >= _ADD_BATCH:
                    self._append(batch)
                    batch, n_chunks = [], 0
            if batch:
                self._append(batch)
        finally:
            self._spill = None

    def _sample_languages(self, chunks: Chunks) -> None:
        for chunk in chunks:
            if self._seen % _LANGUAGE_SAMPLE == 0:
                language = chunk[3] if len(chunk) > 3 else None
                if language is None and chunk[1]:
                    language = detect(chunk[1])
                if language is not None:
                    self._languages[language] += 1
            self._seen += 1

    def query_language(self) -> str:
        """The language a query that does not tell its own is analysed in: the passages' most common."""
        common = self._languages.most_common(1)
        return common[0][0] if common else "en"

    def _analyze_query(self, query: str) -> list[str]:
        if self._analyze == DEFAULT_ANALYZER.tokenize:
            return DEFAULT_ANALYZER.tokenize(query, self.query_language())
        return self._analyze(query)

    def _append(self, batch: list[tuple[int, list[int], list[list[str]]]]) -> None:
        keys = [k for _, ks, _ in batch for k in ks]
        toks = [t for _, _, ts in batch for t in ts]
        lens = np.fromiter(map(len, toks), _I64, len(toks))
        with self._lock:
            r0, r1 = self._n_rows, self._n_rows + len(keys)
            self._reserve(r1)
            self._row_key[r0:r1] = keys
            self._row_len[r0:r1] = lens
            self._row_live[r0:r1] = True
            total = int(lens.sum())
            vocab = self._vocab.__getitem__
            self._pending.append(np.fromiter(map(vocab, chain.from_iterable(toks)), np.int32, total))
            self._n_rows, self._n_live, self._total_len = r1, self._n_live + r1 - r0, self._total_len + total
            row = r0
            for doc_key, ks, _ in batch:
                if doc_key in self._docs:
                    self._remove_locked(doc_key)
                self._docs[doc_key] = (row, len(ks))
                row += len(ks)
            if sum(map(len, self._pending)) >= _COMPILE_TOKENS:  # a bulk load: compile as it goes
                self._compile_pending()
                if self._spill is not None:
                    self._spill_segments(self._spill)
            self._snap = None

    def _spill_segments(self, directory: Path) -> None:
        """Write the segments held in memory (the newest) as one into ``directory`` once they hold
        ``_SPILL_POSTINGS``, and search that one from its files."""
        start = len(self._segs)
        while start and self._segs[start - 1].files is None:
            start -= 1
        held = self._segs[start:]
        if sum(s.n_postings for s in held) < _SPILL_POSTINGS:
            return
        i = self._spilled
        self._spilled += 1
        directory.mkdir(parents=True, exist_ok=True)
        write_merged(held, directory / f"seg{i}")
        self._segs[start:] = [bm25_files.open_segment(directory, i, held[0].row_start)]
        del held
        return_freed_memory()

    def _reserve(self, n: int) -> None:
        if n <= len(self._row_key):
            return
        cap = max(n, 2 * len(self._row_key))
        for name in ("_row_key", "_row_len", "_row_live"):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: self._n_rows] = old[: self._n_rows]
            setattr(self, name, new)  # old array stays valid for snapshots holding it

    def remove(self, doc_key: int) -> None:
        """Remove a document's chunks; unknown keys are ignored."""
        with self._lock:
            self._remove_locked(doc_key)

    def _remove_locked(self, doc_key: int) -> None:
        entry = self._docs.pop(doc_key, None)
        if entry is None:
            return
        start, n = entry
        stop = start + n
        self._row_live[start:stop] = False
        self._n_live -= n
        self._total_len -= int(self._row_len[start:stop].sum())
        self._n_dead += n
        if start < self._seg_stop:  # compiled: keep df exact via the forward index
            seg = next(s for s in self._segs if s.row_start <= start < s.row_stop)
            lo, hi = seg.fwd_ptr[start - seg.row_start], seg.fwd_ptr[stop - seg.row_start]
            np.subtract.at(self._df, seg.fwd_terms[lo:hi], 1)
            self._dead.append(np.arange(start, stop, dtype=_I64))
        self._snap = None  # pending rows are simply skipped when compiled

    # --------------------------------------------------------------- compiling
    def _snapshot(self) -> Snapshot:
        snap = self._snap
        if snap is not None:
            return snap
        with self._lock:
            if self._snap is None:
                self._compile_pending()
                if self._n_dead > max(_COMPACT_MIN, self._n_rows // 4):
                    self._compact()
                avgdl = self._total_len / self._n_live if self._n_live else 1.0
                dead = np.concatenate(self._dead) if self._dead else None
                self._dead = [dead] if dead is not None else []
                params = (self.k1, self.b, avgdl)
                self._snap = Snapshot(
                    segs=tuple(self._segs),
                    df=self._df.copy(),
                    n_live=self._n_live,
                    luts=tuple(s.lut(self.k1, self.b, avgdl) for s in self._segs),
                    n_rows=self._n_rows,
                    row_key=self._row_key,
                    dead=dead,
                    docs=self._docs,
                    params=params,
                    paid=[0] * len(self._segs),
                    impacts=[s.impact[1] if s.impact and s.impact[0] == params else None for s in self._segs],
                )
            return self._snap

    def _compile_pending(self) -> None:
        r0, r1 = self._seg_stop, self._n_rows
        if r0 == r1:
            return
        tids = np.concatenate(self._pending)
        self._pending, self._seg_stop = [], r1
        nv = len(self._vocab)
        if len(self._df) < nv:
            self._df = np.append(self._df, np.zeros(nv - len(self._df), _I64))
        lens = self._row_len[r0:r1].astype(_I64)
        ends = np.cumsum(lens)
        counts, terms, tfs = [], [], []
        a = 0
        while a < r1 - r0:  # batches of ~2M tokens bound the temporaries
            t0 = int(ends[a - 1]) if a else 0
            b = max(a + 1, int(np.searchsorted(ends, t0 + (1 << 21), side="right")))
            local = np.repeat(np.arange(b - a, dtype=_I64), lens[a:b])
            key = local * nv + tids[t0 : int(ends[b - 1])]
            key = key[self._row_live[r0 + a : r0 + b][local]]  # rows removed while pending
            key.sort()  # runs of equal (row, term) keys: distinct terms per row and tf
            first = np.ones(len(key), bool)
            np.not_equal(key[1:], key[:-1], out=first[1:])
            starts = np.flatnonzero(first)
            row, term = np.divmod(key[starts], nv)
            counts.append(np.bincount(row, minlength=b - a))
            terms.append(term.astype(np.int32))
            tfs.append(np.diff(np.append(starts, len(key))).astype(np.int32))
            a = b
        del tids, local, key, first, starts, row, term
        term = np.concatenate(terms)
        del terms
        tf = np.concatenate(tfs)
        del tfs
        self._df += np.bincount(term, minlength=len(self._df))
        self._segs.append(_Segment.from_forward(r0, np.concatenate(counts), term, tf, self._row_len[r0:r1]))
        segs = self._segs
        limit = max(_MAX_MERGED, sum(s.n_postings for s in segs) // 8)
        # Not into a segment read from files: ``save`` merges those, a stream that holds none of them in memory.
        while (
            len(segs) > 1
            and segs[-2].files is None
            and (
                segs[-2].n_postings < _SMALL_SEGMENT
                or segs[-2].n_postings < _MERGE_RATIO * segs[-1].n_postings
                and segs[-2].n_postings + segs[-1].n_postings <= limit
            )
        ):
            segs[-2:] = [_merge(segs[-2:], self._row_live)]

    def _compact(self) -> None:
        """Renumber live rows densely and rewrite all segments without the dead ones."""
        n = self._n_rows
        live = self._row_live[:n]
        row_map = np.cumsum(live) - 1
        segs = [_merge(self._segs, self._row_live, row_map)] if self._segs else []
        for name in ("_row_key", "_row_len"):
            setattr(self, name, getattr(self, name)[:n][live].copy())
        self._row_live = np.ones(len(self._row_key), bool)
        # A live doc's rows are all live; a doc without chunks has no row to map.
        self._docs = {d: (int(row_map[s]) if c else 0, c) for d, (s, c) in self._docs.items()}
        self._segs, self._n_rows = segs, self._n_live
        self._seg_stop = self._n_live
        self._dead, self._n_dead = [], 0

    # --------------------------------------------------------------- searching
    def search(self, query: str, k: int = 10, doc_keys: Collection[int] | None = None) -> list[tuple[int, float]]:
        """Top-k ``(chunk_key, score)`` for ``query``; see the class docstring."""
        terms = self._analyze_query(query)
        if k <= 0 or not terms or (doc_keys is not None and not doc_keys):
            return []
        snap = self._snapshot()
        get = self._vocab.get
        qtf: dict[int, int] = {}
        for t in terms:  # repeated query terms weigh more, as in Lucene / bm25s
            tid = get(t)
            if tid is not None and tid < len(snap.df) and snap.df[tid] > 0:
                qtf[tid] = qtf.get(tid, 0) + 1
        if not qtf:
            return []
        return top_k(snap, qtf, k, doc_keys)

    def max_score(self, query: str) -> float:
        """A score no chunk reaches for ``query``: the sum of its terms' idf, each times its count in the query.

        A term adds ``idf * tf / (tf + k1 * norm)`` < idf to a chunk's score, so a search's scores divided by
        this lie in [0, 1) (calypso.retrieval.scoring); 0.0 when no query term is in the index.
        """
        snap = self._snapshot()
        get = self._vocab.get
        total = 0.0
        for t in self._analyze_query(query):
            tid = get(t)
            if tid is not None and tid < len(snap.df) and snap.df[tid] > 0:
                df = float(snap.df[tid])
                total += math.log1p((snap.n_live - df + 0.5) / (df + 0.5))
        return total

    # ------------------------------------------------------------ persisting
    def __contains__(self, doc_key: object) -> bool:
        """Whether a document (by key) is indexed."""
        return doc_key in self._docs

    def save(self, directory: Path, meta: dict[str, Any] | None = None, *, whole: bool = False) -> Saved:
        """Write the index into ``directory`` (created; files in it are replaced), ``meta`` in its manifest;
        returns what was written, for :meth:`settle`.

        A segment read from an earlier save's files is hard-linked from them (they never change) where it can
        be. The segments held in memory (the newest) are written as one, with the older ones while those are
        smaller than ``_MERGE_RATIO`` times them (``bm25_files.saved_groups``): a built index is saved as a single
        segment, which a search reads with one ``pread`` a term, and each posting is rewritten a logarithmic
        number of times over the index's life.

        ``whole``: every segment is written as one (a build's spilled segments, merged as a stream).

        Only the default analyzer's indexes can be saved: the manifest names its version,
        and ``load`` refuses files written under another one.
        """
        if self._analyze != DEFAULT_ANALYZER.tokenize:
            raise ValueError("only an index using the default analyzer can be saved")
        with self._lock:
            self._snapshot()  # compiles pending rows: everything is in segments
            n = self._n_rows
            tables: dict[str, NDArray[Any]] = {
                "row_key": self._row_key[:n].copy(),
                "row_len": self._row_len[:n].copy(),
                "row_live": self._row_live[:n].copy(),
                "df": self._df.copy(),
                "docs": np.array([(d, s, c) for d, (s, c) in self._docs.items()], _I64).reshape(-1, 3),
            }
            segs = list(self._segs)  # immutable: written outside the lock
            groups = ((tuple(segs),) if segs else ()) if whole else bm25_files.saved_groups(segs, _MERGE_RATIO)
            vocab = list(self._vocab)  # insertion order is term id order
            manifest = {
                "k1": self.k1,
                "b": self.b,
                "n_rows": n,
                "n_live": self._n_live,
                "total_len": self._total_len,
                "segments": [group[0].row_start for group in groups],
                "languages": dict(self._languages),
                "seen": self._seen,
                "meta": meta or {},
            }
        bm25_files.write(directory, tables, groups, vocab, manifest)
        return groups

    def settle(self, directory: Path, saved: Saved) -> None:
        """After ``save(directory)`` is committed: search the saved segments from its files instead of memory
        (those not merged away since), so a built index lets go of its postings and the older snapshot can go."""
        opened = [bm25_files.open_segment(directory, i, group[0].row_start) for i, group in enumerate(saved)]
        with self._lock:
            segs = self._segs
            for group, seg in zip(saved, opened):
                at = next((j for j, s in enumerate(segs) if s is group[0]), len(segs))
                held = segs[at : at + len(group)]
                if len(held) == len(group) and all(a is b for a, b in zip(held, group)):
                    segs[at : at + len(group)] = [seg]  # still there, unmerged
            self._snap = None

    @staticmethod
    def manifest(directory: Path) -> dict[str, Any]:
        """The manifest ``save`` wrote (with the caller's ``meta``); OSError/ValueError when unreadable."""
        return bm25_files.read_manifest(directory)

    @classmethod
    def load(cls, directory: Path) -> BM25Index:
        """An index from ``save``'s files: its segments' arrays mapped read-only, their postings read from the
        files by searches (``PostingFiles``); the small tables in memory.

        Raises ValueError when the files come from another format or analyzer version
        (build afresh then), OSError when they are missing.
        """
        manifest = bm25_files.read_manifest(directory)
        bm25_files.check_version(directory, manifest)
        array = partial(bm25_files.read_array, directory)
        index = cls(k1=manifest["k1"], b=manifest["b"])
        index._vocab.update((t, i) for i, t in enumerate(bm25_files.read_vocab(directory)))
        n = int(manifest["n_rows"])
        # Row tables are written in place by adds and removes: in memory (13 bytes a row).
        index._row_key, index._row_len, index._row_live = array("row_key"), array("row_len"), array("row_live")
        if len(index._row_key) != n or len(index._vocab) > len(array("df")):
            raise ValueError(f"index files in {directory} do not agree with their manifest")
        index._df = array("df")
        index._docs = {int(d): (int(s), int(c)) for d, s, c in array("docs").tolist()}
        index._n_rows = index._seg_stop = n
        index._n_live, index._total_len = int(manifest["n_live"]), int(manifest["total_len"])
        index._languages.update(manifest.get("languages", {}))
        index._seen = int(manifest.get("seen", 0))
        index._segs = [
            bm25_files.open_segment(directory, i, int(row_start)) for i, row_start in enumerate(manifest["segments"])
        ]
        dead = np.flatnonzero(~index._row_live)
        index._dead = [dead] if len(dead) else []
        index._n_dead = len(dead)
        return index

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        """Number of live chunks."""
        return self._n_live

    @property
    def doc_count(self) -> int:
        """Number of live documents."""
        return len(self._docs)

    @property
    def dead_rows(self) -> int:
        """Removed chunks still occupying rows until the next compaction."""
        return self._n_dead

    @property
    def segment_count(self) -> int:
        """Number of compiled posting segments; merging keeps it logarithmic in the number of adds."""
        return len(self._segs)

    def memory_bytes(self) -> int:
        """Approximate bytes held: numpy arrays plus vocabulary and doc-map dicts."""
        arrays = (
            sum(s.nbytes() for s in self._segs)
            + self._df.nbytes
            + sum(a.nbytes for a in (self._row_key, self._row_len, self._row_live))
        )
        arrays += sum(p.nbytes for p in self._pending)
        vocab = sys.getsizeof(self._vocab) + sum(sys.getsizeof(t) + 28 for t in self._vocab)
        docs = sys.getsizeof(self._docs) + len(self._docs) * (28 + 64 + 2 * 28)
        return arrays + vocab + docs
