"""BM25Index: ranking, filters, incremental updates vs a fresh build, threads, SciFact quality."""

from __future__ import annotations

import math
import os
import random
import threading
from collections import Counter
from pathlib import Path

import pytest

from calypso.retrieval import bm25 as bm25_mod
from calypso.retrieval.bm25 import BM25Index
from calypso.text.tokenize import Analyzer, tokenize

REPO = Path(__file__).resolve().parents[2]
WORDS = [
    "refund",
    "invoice",
    "policy",
    "shipping",
    "return",
    "delay",
    "customer",
    "order",
    "warranty",
    "damage",
    "battery",
    "screen",
    "laptop",
    "phone",
    "charger",
    "cable",
    "receipt",
    "account",
    "password",
    "login",
]


def brute_force(
    docs: dict[int, list[tuple[int, str]]], query: str, k1: float, b: float, k: int = 10
) -> list[tuple[int, float]]:
    """Plain-Python Lucene BM25 (no (k1+1) factor, as Lucene >= 8) over the live chunks."""
    chunks = [(key, Counter(tokenize(text))) for cs in docs.values() for key, text in cs]
    n = len(chunks)
    if not n:
        return []
    avgdl = sum(sum(c.values()) for _, c in chunks) / n
    df = Counter(t for _, c in chunks for t in c)
    out = []
    for key, c in chunks:
        dl = sum(c.values())
        s = 0.0
        for t in tokenize(query):
            if c[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * c[t] / (c[t] + k1 * (1 - b + b * dl / avgdl))
        if s > 0:
            out.append((key, s))
    out.sort(key=lambda x: -x[1])
    return out[:k]


def random_doc(rng: random.Random, key0: int, n_chunks: int) -> list[tuple[int, str]]:
    return [(key0 + i, " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30)))) for i in range(n_chunks)]


def assert_same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert [round(s, 4) for _, s in got] == [round(s, 4) for _, s in want]
    # Keys may differ only among equal scores at the cut-off.
    assert {key for key, s in got if s > want[-1][1] + 1e-4} <= {key for key, _ in want}


def test_ranking_prefers_term_frequency_and_rare_terms() -> None:
    idx = BM25Index()
    idx.add(1, [(10, "refund policy for orders"), (11, "refund refund policy orders")])
    idx.add(2, [(20, "shipping policy orders"), (21, "warranty claims for orders")])
    assert [key for key, _ in idx.search("refund")] == [11, 10]
    # "warranty" (df 1) outweighs "policy" (df 3) for a two-term query.
    top = idx.search("warranty policy")
    assert top[0][0] == 21 and all(s > 0 for _, s in top)
    assert top == sorted(top, key=lambda x: -x[1])
    assert len(idx) == 4 and idx.doc_count == 2


def test_doc_keys_filter() -> None:
    idx = BM25Index()
    idx.add(1, [(10, "battery drains fast")])
    idx.add(2, [(20, "battery replacement"), (21, "battery battery warranty")])
    assert {k for k, _ in idx.search("battery", doc_keys={2})} == {20, 21}
    assert [k for k, _ in idx.search("battery", doc_keys=[1, 99, 1])] == [10]
    assert idx.search("battery", doc_keys=set()) == []
    assert idx.search("battery", doc_keys=[99]) == []


@pytest.mark.parametrize("n_filter", [2, 150])  # probes the allowed rows / scatters all
def test_doc_keys_filter_matches_unfiltered_ranking(n_filter: int) -> None:
    rng = random.Random(1)
    idx = BM25Index()
    idx.add_many((d, random_doc(rng, d * 10, 4)) for d in range(200))
    idx.remove(7)
    docs = set(rng.sample(range(200), n_filter)) | {7}
    for q in ["refund policy", "battery screen damage login"]:
        everything = idx.search(q, k=10_000)
        want = [(key, s) for key, s in everything if key // 10 in docs - {7}][:10]
        assert idx.search(q, k=10, doc_keys=docs) == want


def test_remove_then_add_back() -> None:
    idx = BM25Index()
    idx.add(1, [(10, "laptop screen cracked")])
    idx.add(2, [(20, "phone screen cracked"), (21, "charger cable")])
    idx.search("screen")  # compile, so the removal hits a segment
    idx.remove(2)
    assert [k for k, _ in idx.search("screen")] == [10]
    assert idx.search("charger") == []
    assert len(idx) == 1 and idx.doc_count == 1
    idx.remove(2)  # unknown keys are ignored
    idx.add(2, [(30, "phone screen replaced")])
    assert {k for k, _ in idx.search("screen")} == {10, 30}
    idx.add(2, [(31, "charger")])  # re-adding a doc key replaces its chunks
    assert idx.search("screen", k=5)[0][0] == 10 and [k for k, _ in idx.search("charger")] == [31]
    # Removing a doc before it was ever compiled.
    idx.add(3, [(40, "tablet screen")])
    idx.remove(3)
    assert 40 not in {k for k, _ in idx.search("screen")}


@pytest.mark.parametrize("small_segment", [0, 1 << 16])
def test_incremental_equals_fresh_build(monkeypatch: pytest.MonkeyPatch, small_segment: int) -> None:
    monkeypatch.setattr(bm25_mod, "_SMALL_SEGMENT", small_segment)  # 0: keep many segments
    monkeypatch.setattr(bm25_mod, "_COMPACT_MIN", 20)  # exercise compaction too
    rng = random.Random(7)
    idx, live, key = BM25Index(), {}, 0
    queries = ["refund policy", "battery screen damage", "customer order delay", "login"]
    for step in range(300):
        if live and rng.random() < 0.3:
            doc = rng.choice(sorted(live))
            idx.remove(doc)
            del live[doc]
        else:
            chunks = random_doc(rng, key, rng.randint(1, 4))
            key += len(chunks)
            idx.add(step, chunks)
            live[step] = chunks
        if step % 7 == 0:
            q = rng.choice(queries)
            assert_same(idx.search(q), brute_force(live, q, idx.k1, idx.b))
    assert len(idx) == sum(len(c) for c in live.values()) and idx.doc_count == len(live)
    fresh = BM25Index()
    fresh.add_many(live.items())
    for q in queries:
        assert idx.search(q, k=15) == fresh.search(q, k=15)
        assert_same(fresh.search(q, k=15), brute_force(live, q, idx.k1, idx.b, k=15))
    docs = set(rng.sample(sorted(live), 5))
    want = {k for d in docs for k, _ in live[d]}
    assert {k for k, _ in idx.search("refund battery order", k=100, doc_keys=docs)} <= want
    assert idx.search("refund battery", doc_keys=docs) == fresh.search("refund battery", doc_keys=docs)


def test_docs_without_chunks_survive_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_mod, "_COMPACT_MIN", 1)
    idx = BM25Index()
    idx.add(0, [])
    idx.add_many((d, [(d * 10, f"refund order {d}")]) for d in range(1, 20))
    idx.add(99, [])
    idx.search("refund")
    for d in range(1, 15):
        idx.remove(d)
    assert {k for k, _ in idx.search("refund", k=50)} == {d * 10 for d in range(15, 20)}
    assert idx.doc_count == 7 and len(idx) == 5 and idx.dead_rows == 0  # compacted
    idx.remove(0)
    idx.remove(99)
    assert idx.doc_count == 5 and idx.search("refund order 17")[0][0] == 170


def test_many_segments_are_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_mod, "_SMALL_SEGMENT", 0)
    idx = BM25Index()
    rng = random.Random(3)
    docs = {}
    for d in range(200):
        docs[d] = random_doc(rng, d * 10, 3)
        idx.add(d, docs[d])
        idx.search("refund")
    assert 1 <= idx.segment_count <= 8  # geometric merging keeps the segment count logarithmic
    fresh = BM25Index()
    fresh.add_many(docs.items())
    for q in ["refund policy", "battery screen damage", "customer order delay"]:
        assert idx.search(q, k=20) == fresh.search(q, k=20)


def test_stemming_stopwords_and_empty() -> None:
    idx = BM25Index()
    assert idx.search("refund") == [] and len(idx) == 0 and idx.doc_count == 0
    idx.add(1, [(10, "Our refund policy"), (11, "")])
    assert [k for k, _ in idx.search("refunds")] == [10]
    assert [k for k, _ in idx.search("REFUNDED!")] == [10]
    assert idx.search("the and of it") == []
    assert idx.search("") == [] and idx.search("refund", k=0) == []
    assert idx.search("unknownword") == []


def test_tokenize() -> None:
    assert tokenize("The Refunds, and a REFUND-policy: 5 x 42!") == ["refund", "refund", "polici", "42"]
    assert tokenize("") == [] and tokenize("the of and") == []
    assert Analyzer(min_len=1).tokenize("a 5 x") == ["5", "x"]  # "a" is a stopword


def test_threads_readers_and_writer() -> None:
    idx = BM25Index()
    rng = random.Random(11)
    for d in range(50):
        idx.add(d, random_doc(rng, d * 10, 3))
    stop, errors = threading.Event(), []
    removed: set[int] = set()

    def reader() -> None:
        try:
            while not stop.is_set():
                gone = set(removed)  # removed before this search started
                for key, score in idx.search("refund battery order", k=20):
                    assert score > 0 and key // 10 not in gone
        except Exception as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    def writer() -> None:
        wrng = random.Random(5)
        for d in range(50, 400):
            idx.add(d, random_doc(wrng, d * 10, 3))
            if d % 3 == 0:
                victim = wrng.randrange(d)
                idx.remove(victim)
                removed.add(victim)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    w = threading.Thread(target=writer)
    w.start()
    w.join()
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    assert idx.doc_count == 400 - len(removed)


def test_scifact_quality() -> None:
    data = Path(os.environ.get("CALYPSO_EVAL_DATA", REPO.parent / "shared" / "data")) / "beir-scifact"
    if not (data / "corpus.jsonl").is_file():
        msg = f"SciFact not found at {data} (set CALYPSO_EVAL_DATA)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    from bench.common import beir as beir_eval

    corpus = beir_eval.load_corpus(data)
    queries = beir_eval.load_queries(data)
    qrels = beir_eval.load_qrels(data, "test")
    ids = list(corpus)
    idx = BM25Index()
    idx.add_many((i, [(i, corpus[d])]) for i, d in enumerate(ids))
    run = {q: [ids[c] for c, _ in idx.search(queries[q], k=100)] for q in qrels}
    metrics = beir_eval.evaluate(run, qrels)
    assert metrics["ndcg@10"] >= 0.665, metrics
    assert metrics["recall@100"] >= 0.88, metrics
