"""BM25Index searched from its saved files (``save`` then ``settle``, or ``load``): the postings are read by
``pread`` and not held; results equal the in-memory index's through adds, removes, merges and compaction."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from calypso.retrieval import bm25 as bm25_mod
from calypso.retrieval import bm25_files
from calypso.retrieval.bm25 import BM25Index
from calypso.retrieval.bm25_segments import _merge, write_merged

WORDS = (
    "refund invoice policy shipping return delay customer order warranty damage battery screen laptop phone "
    "charger cable receipt account password login 退款 发票 政策 Rückgabe Lieferung Garantie"
).split()
QUERIES = ["refund policy", "battery screen damage", "customer order delay", "login", "退款政策", "Garantie Lieferung"]


def _doc(rng: random.Random, key0: int) -> list[tuple[int, str]]:
    return [(key0 + i, " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30)))) for i in range(3)]


def _built(n_docs: int, seed: int = 5) -> tuple[BM25Index, dict[int, list[tuple[int, str]]]]:
    rng = random.Random(seed)
    index, docs = BM25Index(), {}
    for d in range(n_docs):
        docs[d] = _doc(rng, d * 10)
        index.add(d, docs[d])
        if d % 7 == 0:
            index.search("refund")  # compiles: many small segments
    index.search("refund")
    return index, docs


def _fresh(docs: dict[int, list[tuple[int, str]]]) -> BM25Index:
    fresh = BM25Index()
    fresh.add_many(docs.items())
    return fresh


def _assert_equal(index: BM25Index, docs: dict[int, list[tuple[int, str]]]) -> None:
    fresh = _fresh(docs)
    some = set(sorted(docs)[::5])
    for q in QUERIES:
        assert index.search(q, k=25) == fresh.search(q, k=25)
        assert index.search(q, k=25, doc_keys=some) == fresh.search(q, k=25, doc_keys=some)


@pytest.fixture(autouse=True)
def _many_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_mod, "_SMALL_SEGMENT", 0)  # keep the small segments apart
    monkeypatch.setattr(bm25_mod, "_COMPACT_MIN", 20)
    monkeypatch.setattr(bm25_mod, "_MAX_MERGED", 1)  # merges stay under an eighth of the index
    monkeypatch.setattr(bm25_files, "_FILE_POSTINGS_MIN", 0)  # every saved segment is read from its files


def test_settle_searches_one_saved_segment_from_files(tmp_path: Path) -> None:
    index, docs = _built(300)
    assert index.segment_count > 3
    expected = {q: index.search(q, k=25) for q in QUERIES}
    in_memory = index.memory_bytes()
    saved = index.save(tmp_path / "a")
    assert len(saved) == 1 and len(saved[0]) > 3  # everything held in memory is written as one segment
    index.settle(tmp_path / "a", saved)
    assert index.segment_count == 1
    assert index.memory_bytes() < in_memory / 2  # the postings are no longer held
    assert {q: index.search(q, k=25) for q in QUERIES} == expected
    shutil.rmtree(tmp_path / "a")  # the open files outlive their names, as a later save's cleanup does
    assert {q: index.search(q, k=25) for q in QUERIES} == expected
    _assert_equal(index, docs)


def test_changes_after_settle_equal_a_fresh_build(tmp_path: Path) -> None:
    index, docs = _built(200)
    index.settle(tmp_path / "a", index.save(tmp_path / "a"))
    rng = random.Random(9)
    for step in range(200, 500):
        if rng.random() < 0.3:  # removes reach rows of the file-backed segment (its forward index keeps df exact)
            victim = rng.choice(sorted(docs))
            index.remove(victim)
            del docs[victim]
        else:
            docs[step] = _doc(rng, step * 10)
            index.add(step, docs[step])
        if step % 25 == 0:
            _assert_equal(index, docs)
    _assert_equal(index, docs)  # compaction ran over the file-backed segment on the way
    assert index.dead_rows < len(index)


def test_a_second_save_links_the_saved_segment_and_merges_the_new_ones(tmp_path: Path) -> None:
    index, docs = _built(400)
    index.settle(tmp_path / "a", index.save(tmp_path / "a"))
    rng = random.Random(11)
    for d in range(400, 410):
        docs[d] = _doc(rng, d * 10)
        index.add(d, docs[d])
        index.search("refund")
    assert index.segment_count >= 2
    saved = index.save(tmp_path / "b")
    assert [len(group) for group in saved] == [1, index.segment_count - 1]  # the big one is not rewritten
    assert saved[0][0].files is not None and all(seg.files is None for seg in saved[1])
    assert (tmp_path / "b" / "seg0.rows.npy").stat().st_ino == (tmp_path / "a" / "seg0.rows.npy").stat().st_ino
    index.settle(tmp_path / "b", saved)
    assert index.segment_count == 2
    _assert_equal(index, docs)
    loaded = BM25Index.load(tmp_path / "b")
    assert loaded.segment_count == 2
    _assert_equal(loaded, docs)
    for d in range(410, 430):  # as many postings again as the small saved segment: they are written together
        docs[d] = _doc(rng, d * 10)
        index.add(d, docs[d])
    index.search("refund")
    saved = index.save(tmp_path / "c")
    assert len(saved) == 2 and saved[1][0].files is not None and len(saved[1]) >= 2  # read back by pread
    index.settle(tmp_path / "c", saved)
    assert index.segment_count == 2
    _assert_equal(index, docs)
    _assert_equal(BM25Index.load(tmp_path / "c"), docs)


def test_settle_leaves_segments_merged_since_the_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index, docs = _built(100)
    saved = index.save(tmp_path / "a")
    monkeypatch.setattr(bm25_mod, "_SMALL_SEGMENT", 1 << 16)  # the next compile merges everything in memory
    docs[100] = [(1000, "refund refund policy")]
    index.add(100, docs[100])
    index.search("refund")
    index.settle(tmp_path / "a", saved)  # nothing it saved is still there as saved: nothing swapped
    _assert_equal(index, docs)


def test_write_merged_holds_the_postings_merge_holds(tmp_path: Path) -> None:
    index, docs = _built(150)
    for d in range(0, 150, 4):  # dead rows stay in the written segment, merge drops them
        index.remove(d)
    index.search("refund")
    segs = list(index._segs)
    write_merged(segs, tmp_path / "m", batch=64)  # many batches
    files = {name: np.load(tmp_path / f"m.{name}.npy") for name in ("terms", "indptr", "rows", "codes")}
    merged = _merge(segs, np.ones(segs[-1].row_stop, bool))  # every row kept, as written
    assert np.array_equal(files["terms"], merged.terms) and np.array_equal(files["indptr"], merged.indptr)
    assert np.array_equal(files["rows"], merged.rows) and np.array_equal(files["codes"], merged.codes)
    assert np.array_equal(np.load(tmp_path / "m.fwd_terms.npy"), np.concatenate([s.fwd_terms for s in segs]))


def test_load_reads_postings_from_files(tmp_path: Path) -> None:
    index, docs = _built(120)
    index.save(tmp_path / "a")
    loaded = BM25Index.load(tmp_path / "a")
    assert all(seg.files is not None for seg in loaded._segs)
    _assert_equal(loaded, docs)


def test_a_small_saved_segment_is_read_into_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index, docs = _built(120)
    postings = sum(seg.n_postings for seg in index._segs)
    monkeypatch.setattr(bm25_files, "_FILE_POSTINGS_MIN", postings + 1)  # no file kept open for so few
    index.settle(tmp_path / "a", index.save(tmp_path / "a"))
    assert index.segment_count == 1 and index._segs[0].files is None
    _assert_equal(index, docs)
    assert BM25Index.load(tmp_path / "a")._segs[0].files is None


def test_a_build_that_spills_its_postings_searches_and_saves_as_one_held_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bm25_mod, "_COMPILE_TOKENS", 300)
    monkeypatch.setattr(bm25_mod, "_SPILL_POSTINGS", 200)
    monkeypatch.setattr(bm25_mod, "_ADD_BATCH", 6)
    monkeypatch.setattr(bm25_files, "_FILE_POSTINGS_MIN", 0)
    rng = random.Random(9)
    docs = [(d, _doc(rng, d * 10)) for d in range(120)]
    held = BM25Index()
    held.add_many(docs)
    spilled = BM25Index()
    spilled.add_many(docs, spill=tmp_path / "spill")
    assert spilled.segment_count > 3 and all(seg.files is not None for seg in spilled._segs[:-1])
    for query in QUERIES:
        assert spilled.search(query, k=50) == held.search(query, k=50), query
    saved = spilled.save(tmp_path / "snap", whole=True)
    spilled.settle(tmp_path / "snap", saved)
    shutil.rmtree(tmp_path / "spill")
    assert spilled.segment_count == 1
    for query in QUERIES:
        assert spilled.search(query, k=50) == held.search(query, k=50), query
        assert BM25Index.load(tmp_path / "snap").search(query, k=50) == held.search(query, k=50), query
