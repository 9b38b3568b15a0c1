"""In-process keyword search latency: calypso BM25Index vs bm25s vs SQLite FTS5 (OR query).

Corpora: (a) BEIR SciFact (5,183 title+abstract passages); (b) a synthetic knowledge base of
N (default 200k) passages of ~100 words, built deterministically from SciFact's sentences
(corpus_sentences.jsonl.gz, fixed seed). Queries: all SciFact claims, one at a time, k=10,
query tokenisation included for every engine; bm25s uses the same stemmer and stopwords.

Each engine is built in its own forked worker, one after the other, so its build time and
peak memory (VmHWM growth over the RSS at fork) are its own. The parent then times the
engines query by query, interleaved (each worker times its own call), so machine noise
hits all engines alike.

    .venv/bin/python -m bench.search_speed            # full run (200k synthetic)
    .venv/bin/python -m bench.search_speed --quick    # 20k synthetic, fewer queries
"""

from __future__ import annotations

import argparse
import re
import resource
import sqlite3
import time
from collections.abc import Callable

import numpy as np

from bench.common import beir as be
from bench.common.keyword_worker import Worker, build_bm25s
from bench.common.synthetic import SEED, synthetic_passages
from calypso.retrieval.bm25 import BM25Index
from calypso.text.tokenize import STOPWORDS_EN

Search = Callable[[str], list[tuple[int, float]]]


def build_ours(texts: list[str], per_doc: int) -> tuple[Search, dict, BM25Index]:
    idx = BM25Index()
    idx.add_many(
        (d, [(i, texts[i]) for i in range(d * per_doc, min(len(texts), (d + 1) * per_doc))])
        for d in range((len(texts) + per_doc - 1) // per_doc)
    )
    idx.search("warm up compile")  # segments compile lazily at the first search
    return (lambda q: idx.search(q, k=10)), {"index_mb": idx.memory_bytes() / 2**20}, idx


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
