"""In-process keyword search latency: calypso BM25Index vs bm25s vs SQLite FTS5 (OR query).

Corpora: (a) BEIR SciFact (5,183 title+abstract passages); (b) a synthetic knowledge base of
N (default 200k) passages of ~100 words, built deterministically from SciFact's sentences
(corpus_sentences.jsonl.gz, fixed seed). Queries: all SciFact claims, one at a time, k=10,
query tokenisation included for every engine; bm25s uses the same stemmer and stopwords.

Each engine is built in its own forked worker, one after the other, so its build time and
peak memory (VmHWM growth over the RSS at fork) are its own. The parent then times the
engines query by query, interleaved (each worker times its own call), so machine noise
hits all engines alike.

    .venv/bin/python bench/search_speed.py            # full run (200k synthetic)
    .venv/bin/python bench/search_speed.py --quick    # 20k synthetic, fewer queries
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import random
import re
import resource
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path

import beir_eval as be  # bench/ is sys.path[0] when run as a script
import numpy as np

try:
    import calypso  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from calypso.retrieval.bm25 import BM25Index
from calypso.retrieval.tokenize import STOPWORDS_EN

SEED = 20240531
Search = Callable[[str], list[tuple[int, float]]]


def synthetic_passages(n: int, seed: int = SEED) -> list[str]:
    """n passages of ~100 words: runs of consecutive SciFact sentences (title first) from
    a random start, continuing into the next abstract, until a random 80-120 word target."""
    sents: list[str] = []
    for _, title, sentences in be.iter_sentences(be.scifact_dir()):
        sents.append(title)
        sents.extend(sentences)
    nwords = [s.count(" ") + 1 for s in sents]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        i, target, words, parts = rng.randrange(len(sents)), rng.randint(80, 120), 0, []
        while words < target:
            parts.append(sents[i])
            words += nwords[i]
            i = (i + 1) % len(sents)
        out.append(" ".join(parts))
    return out


def _rss_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return float("nan")


def build_ours(texts: list[str], per_doc: int) -> tuple[Search, dict, BM25Index]:
    idx = BM25Index()
    idx.add_many(
        (d, [(i, texts[i]) for i in range(d * per_doc, min(len(texts), (d + 1) * per_doc))])
        for d in range((len(texts) + per_doc - 1) // per_doc)
    )
    idx.search("warm up compile")  # segments compile lazily at the first search
    return (lambda q: idx.search(q, k=10)), {"index_mb": idx.memory_bytes() / 2**20}, idx


def build_bm25s(texts: list[str], per_doc: int) -> tuple[Search, dict, None]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(k1=BM25Index().k1, b=BM25Index().b, method="lucene")
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    mb = sum(v.nbytes for v in retriever.scores.values() if isinstance(v, np.ndarray)) / 2**20

    def search(q: str) -> list[tuple[int, float]]:
        tok = bm25s.tokenize(q, stopwords="en", stemmer=stemmer, show_progress=False)
        try:
            docs, scores = retriever.retrieve(tok, k=10, show_progress=False)
        except ValueError:  # no query token in the vocabulary
            return []
        return [(d, s) for d, s in zip(docs[0].tolist(), scores[0].tolist()) if s > 0]

    return search, {"index_mb": mb}, None


def build_fts5(texts: list[str], per_doc: int) -> tuple[Search, dict, None]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE p USING fts5(body, tokenize='porter unicode61')")
    db.executemany("INSERT INTO p(rowid, body) VALUES (?, ?)", enumerate(texts))
    db.commit()
    word = re.compile(r"\w+").findall
    sql = "SELECT rowid, -bm25(p) FROM p WHERE p MATCH ? ORDER BY bm25(p) LIMIT 10"

    def search(q: str) -> list[tuple[int, float]]:
        terms = [w for w in word(q.lower()) if w not in STOPWORDS_EN]
        if not terms:
            return []
        return db.execute(sql, (" OR ".join(f'"{w}"' for w in terms),)).fetchall()

    return search, {"index_mb": float("nan")}, None


def _updates(idx: BM25Index, texts: list[str], queries: list[str], per_doc: int) -> dict:
    """Median time of add(one doc) / remove(one doc), and of the first search after each
    (which compiles the pending rows / swaps the snapshot)."""
    rng = random.Random(SEED)
    add, add_q, rem, rem_q = [], [], [], []
    next_key, n_docs = len(texts), (len(texts) + per_doc - 1) // per_doc
    for r in range(30):
        chunks = [(next_key + j, texts[rng.randrange(len(texts))]) for j in range(per_doc)]
        next_key += per_doc
        t = time.perf_counter()
        idx.add(n_docs + r, chunks)
        add.append(time.perf_counter() - t)
        t = time.perf_counter()
        idx.search(queries[r], k=10)
        add_q.append(time.perf_counter() - t)
        t = time.perf_counter()
        idx.remove(rng.randrange(n_docs))
        rem.append(time.perf_counter() - t)
        t = time.perf_counter()
        idx.search(queries[r], k=10)
        rem_q.append(time.perf_counter() - t)

    def med(ts: list[float]) -> float:
        return float(np.median(ts) * 1000)

    return {"add_ms": med(add), "add_search_ms": med(add_q), "rm_ms": med(rem), "rm_search_ms": med(rem_q)}


def _worker(conn, build, texts: list[str], queries: list[str], per_doc: int) -> None:
    gc.collect()
    rss0 = _rss_mb("VmRSS")
    t0 = time.perf_counter()
    search, info, idx = build(texts, per_doc)
    info["build_s"] = time.perf_counter() - t0
    info["peak_mb"] = _rss_mb("VmHWM") - rss0
    conn.send(info)
    while (msg := conn.recv()) is not None:
        if msg == "top10":
            conn.send({q: search(q) for q in queries[:300]})
        elif msg == "updates":
            conn.send(_updates(idx, texts, queries, per_doc) if idx is not None else {})
        elif msg == "mem":
            conn.send(idx.memory_bytes() / 2**20 if idx is not None else float("nan"))
        elif msg == "warm":  # all queries back to back: caches stay warm
            ts = []
            for q in queries:
                t = time.perf_counter()
                search(q)
                ts.append(time.perf_counter() - t)
            conn.send(ts)
        else:
            t = time.perf_counter()
            search(queries[msg])
            conn.send(time.perf_counter() - t)


class Worker:
    def __init__(self, build, texts: list[str], queries: list[str], per_doc: int) -> None:
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, build, texts, queries, per_doc))
        self.proc.start()
        self.info = self.conn.recv()  # wait: builds never overlap
        self.times: list[float] = []

    def ask(self, msg: object) -> object:
        self.conn.send(msg)
        return self.conn.recv()

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join()


def agreement(a: dict, b: dict) -> tuple[float, float]:
    """% of top-10 keys shared, and % of queries whose top-10 score lists are equal (the
    synthetic KB repeats passages, so equal-score ties may pick different keys)."""
    shared = [len({k for k, _ in a[q]} & {k for k, _ in b[q]}) / max(1, len(a[q])) for q in a]
    same = [
        len(a[q]) == len(b[q]) and all(abs(x[1] - y[1]) <= 1e-4 * max(1.0, abs(y[1])) for x, y in zip(a[q], b[q]))
        for q in a
    ]
    return 100 * sum(shared) / max(1, len(shared)), 100 * sum(same) / max(1, len(same))


def bench_corpus(name: str, texts: list[str], queries: list[str], per_doc: int, n_fts: int) -> tuple[list[tuple], dict]:
    engines = {
        "calypso": Worker(build_ours, texts, queries, per_doc),
        "bm25s": Worker(build_bm25s, texts, queries, per_doc),
        "fts5-OR": Worker(build_fts5, texts, queries, per_doc),
    }
    for w in engines.values():  # warm caches
        for i in range(20):
            w.ask(i)
    for i in range(len(queries)):  # interleaved, rotating who goes first
        names = list(engines)
        for e in names[i % 3 :] + names[: i % 3]:
            if e != "fts5-OR" or i < n_fts:
                engines[e].times.append(engines[e].ask(i))
    shared, same = agreement(engines["calypso"].ask("top10"), engines["bm25s"].ask("top10"))
    print(
        f"[{name}] calypso vs bm25s on 300 queries: top-10 keys shared {shared:.1f}%, "
        f"identical top-10 score lists {same:.1f}%"
    )
    warm = {e: np.array(engines[e].ask("warm")) * 1000 for e in ("calypso", "bm25s")}
    print(
        f"[{name}] calypso index after the query passes (impacts precomputed): {engines['calypso'].ask('mem'):.0f} MB"
    )
    upd = engines["calypso"].ask("updates")
    rows = []
    for e, w in engines.items():
        a = np.array(w.times) * 1000
        b = warm.get(e, np.array([np.nan]))
        rows.append(
            (
                name,
                len(texts),
                e,
                np.percentile(a, 50),
                np.percentile(a, 99),
                a.mean(),
                np.percentile(b, 50),
                np.percentile(b, 99),
                w.info["build_s"],
                w.info["index_mb"],
                w.info["peak_mb"],
            )
        )
        w.close()
    return rows, upd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20k synthetic, 300 queries")
    ap.add_argument("--n", type=int, default=None, help="synthetic passages (200k)")
    ap.add_argument("--per-doc", type=int, default=20, help="synthetic passages per doc")
    ap.add_argument("--fts-queries", type=int, default=None, help="FTS5 queries (200)")
    args = ap.parse_args()
    n = args.n or (20_000 if args.quick else 200_000)
    n_fts = args.fts_queries or (100 if args.quick else 200)
    queries = list(be.load_queries(be.scifact_dir()).values())
    if args.quick:
        queries = queries[:300]
    scifact = list(be.load_corpus(be.scifact_dir()).values())
    t = time.perf_counter()
    synth = synthetic_passages(n)
    print(
        f"synthetic KB: {n:,} passages, {sum(s.count(' ') + 1 for s in synth) / n:.0f} "
        f"words avg, built in {time.perf_counter() - t:.1f}s (seed {SEED})"
    )
    print(
        f"queries: {len(queries)} SciFact claims, k=10, one at a time, interleaved "
        f"(FTS5: first {n_fts}); BM25 k1={BM25Index().k1} b={BM25Index().b}\n"
    )
    rows, _ = bench_corpus("scifact", scifact, queries, 1, n_fts)
    more, upd = bench_corpus(f"synth{n // 1000}k", synth, queries, args.per_doc, n_fts)
    hdr = (
        "corpus",
        "passages",
        "engine",
        "p50 ms",
        "p99 ms",
        "mean ms",
        "warm p50",
        "warm p99",
        "build s",
        "index MB",
        "peak+ MB",
    )
    print("\n| " + " | ".join(hdr) + " |\n|" + "---|" * len(hdr))
    for r in rows + more:
        print(
            f"| {r[0]} | {r[1]:,} | {r[2]} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f} | "
            f"{r[6]:.2f} | {r[7]:.2f} | {r[8]:.1f} | {r[9]:.0f} | {r[10]:.0f} |"
        )
    print(
        "p50/p99/mean: engines interleaved query by query (each call on caches the other "
        "engines just used); warm: the same queries back to back in one engine"
    )
    print(
        f"\nincremental updates at {n:,} passages (calypso, median of 30, {args.per_doc}-chunk"
        f" docs): add {upd['add_ms']:.2f} ms (+ next search {upd['add_search_ms']:.2f} ms),"
        f" remove {upd['rm_ms']:.2f} ms (+ next search {upd['rm_search_ms']:.2f} ms)"
    )
    print(
        "index MB: calypso memory_bytes() after build (posting impacts, precomputed later "
        "under steady reads, add 4 B/posting), bm25s score-matrix arrays; peak+ MB: a "
        "worker's VmHWM growth during its build; parent peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )


if __name__ == "__main__":
    main()
