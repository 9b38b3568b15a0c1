"""BEIR SciFact retrieval quality of calypso's BM25Index (nDCG@10, Recall@100 on qrels/test).

Tuning uses qrels/train.tsv only. Selection rule (fixed before looking at test):
1. for each tokenisation variant, the k1 x b grid point with the best train nDCG@10;
2. a variant replaces the default analyzer (Lucene stop set, tokens >= 2 chars, Snowball)
   only if it beats the default's best by more than one paired standard error over the
   train queries -- a product default should not change on noise.
Test figures are printed for the chosen configuration and two standard references.
Title and text are indexed as one passage (as BEIR does).
The last table compares queries as written with the query analysis ``DocumentService.search``
applies (``calypso.retrieval.query.keyword_query``) at the BM25Index defaults; ``--query-analysis``
prints only that table.

    .venv/bin/python bench/retrieval_quality.py [--quick | --query-analysis]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import beir_eval as be  # bench/ is sys.path[0] when run as a script

try:
    import calypso  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from calypso.retrieval.bm25 import DEFAULT_B, DEFAULT_K1, BM25Index
from calypso.retrieval.query import keyword_query
from calypso.retrieval.tokenize import STOPWORDS_EN_EXTENDED, Analyzer

K1S = [0.6, 0.8, 0.9, 1.0, 1.2, 1.5, 1.8, 2.0]
BS = [0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0]
DEFAULT = "default (lucene stop, >=2 chars, snowball)"
ANALYZERS = {
    DEFAULT: Analyzer(),
    "extended stopwords": Analyzer(stopwords=STOPWORDS_EN_EXTENDED),
    "keep 1-char tokens": Analyzer(min_len=1),
    "no stemming": Analyzer(stem=False),
}


def build(corpus: dict[str, str], analyzer: Analyzer) -> tuple[BM25Index, list[str]]:
    ids = list(corpus)
    idx = BM25Index(analyzer=analyzer.tokenize)
    idx.add_many((i, [(i, corpus[d])]) for i, d in enumerate(ids))
    return idx, ids


def scores(
    idx: BM25Index, ids: list[str], queries: dict[str, str], qrels: dict, k1: float, b: float
) -> dict[str, list[float]]:
    idx.set_params(k1, b)
    run = {q: [ids[c] for c, _ in idx.search(queries[q], k=100)] for q in qrels}
    return be.per_query(run, qrels)


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def paired_se(a: list[float], b: list[float]) -> float:
    d = [x - y for x, y in zip(a, b)]
    m = mean(d)
    return math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))


def query_analysis(corpus: dict[str, str], queries: dict[str, str], splits: dict[str, dict]) -> None:
    """nDCG@10 at the defaults, queries as written vs their content words (paired SE over queries)."""
    idx, ids = build(corpus, ANALYZERS[DEFAULT])
    analysed = {q: keyword_query(text) for q, text in queries.items()}
    tok = ANALYZERS[DEFAULT].tokenize
    changed = sum(tok(analysed[q]) != tok(queries[q]) for q in set().union(*splits.values()))
    print(f"query analysis changes the terms of {changed} of the {len(set().union(*splits.values()))} queries")
    print("\n| queries | split | nDCG@10 | Recall@100 |\n|---|---|---|---|")
    for split, qrels in splits.items():
        plain = scores(idx, ids, queries, qrels, DEFAULT_K1, DEFAULT_B)
        reduced = scores(idx, ids, analysed, qrels, DEFAULT_K1, DEFAULT_B)
        for label, m in (("as written", plain), ("query analysis", reduced)):
            print(f"| {label} | {split} | {mean(m['ndcg@10']):.4f} | {mean(m['recall@100']):.4f} |")
        gain, se = mean(reduced["ndcg@10"]) - mean(plain["ndcg@10"]), paired_se(reduced["ndcg@10"], plain["ndcg@10"])
        print(f"| difference | {split} | {gain:+.4f} +- {se:.4f} | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="coarser grid, default analyzer only")
    ap.add_argument("--query-analysis", action="store_true", help="only the query analysis comparison")
    args = ap.parse_args()
    if args.query_analysis:
        path = be.scifact_dir()
        corpus, queries = be.load_corpus(path), be.load_queries(path)
        t0 = time.perf_counter()
        query_analysis(corpus, queries, {s: be.load_qrels(path, s) for s in ("train", "test")})
        print(f"\n({time.perf_counter() - t0:.0f}s)")
        return
    k1s, bs = ([0.9, 1.2, 1.5], [0.5, 0.75, 0.9]) if args.quick else (K1S, BS)
    analyzers = {DEFAULT: ANALYZERS[DEFAULT]} if args.quick else ANALYZERS
    path = be.scifact_dir()
    corpus, queries = be.load_corpus(path), be.load_queries(path)
    train, test = be.load_qrels(path, "train"), be.load_qrels(path, "test")
    print(f"SciFact: {len(corpus):,} docs; train {len(train)} queries, test {len(test)}\n")
    t0 = time.perf_counter()
    best: dict[str, tuple[float, float, list[float]]] = {}
    indexes = {}
    for name, analyzer in analyzers.items():
        idx, ids = build(corpus, analyzer)
        indexes[name] = (idx, ids)
        grid = {(k1, b): scores(idx, ids, queries, train, k1, b)["ndcg@10"] for k1 in k1s for b in bs}
        (k1, b), per_q = max(grid.items(), key=lambda kv: mean(kv[1]))
        best[name] = (k1, b, per_q)
        if name == DEFAULT:
            print("train nDCG@10 sweep, default analyzer (rows k1, columns b):")
            print("| k1 \\ b | " + " | ".join(f"{b:g}" for b in bs) + " |")
            print("|---|" + "---|" * len(bs))
            for k1_ in k1s:
                print(f"| {k1_:g} | " + " | ".join(f"{mean(grid[(k1_, b_)]):.4f}" for b_ in bs) + " |")
            print()
    print("train nDCG@10, best k1/b per tokenisation (gain over default +- paired SE):")
    base = best[DEFAULT][2]
    chosen = DEFAULT
    for name, (k1, b, per_q) in best.items():
        gain, se = mean(per_q) - mean(base), paired_se(per_q, base) if per_q is not base else 0.0
        print(f"  {name:44s} k1={k1:<4g} b={b:<4g} nDCG@10={mean(per_q):.4f} ({gain:+.4f} +- {se:.4f})")
        if gain > se and gain > mean(best[chosen][2]) - mean(base):
            chosen = name
    k1, b, per_q = best[chosen]
    print(
        f"\nchosen on train: {chosen}, k1={k1:g}, b={b:g} (train nDCG@10 {mean(per_q):.4f})"
        f"; BM25Index defaults: k1={DEFAULT_K1:g}, b={DEFAULT_B:g}"
    )
    print("\n| configuration | split | nDCG@10 | Recall@100 |\n|---|---|---|---|")
    didx, dids = indexes[DEFAULT]
    rows = [
        (f"chosen: k1={k1:g} b={b:g}, {chosen}", k1, b, *indexes[chosen]),
        ("reference: k1=1.2 b=0.75 (Lucene defaults)", 1.2, 0.75, didx, dids),
        ("reference: k1=1.5 b=0.75 (bm25s defaults)", 1.5, 0.75, didx, dids),
    ]
    for label, k1_, b_, ix, ix_ids in rows:
        for split, qrels in (("train", train), ("test", test)):
            m = scores(ix, ix_ids, queries, qrels, k1_, b_)
            print(f"| {label} | {split} | {mean(m['ndcg@10']):.4f} | {mean(m['recall@100']):.4f} |")
    print()
    query_analysis(corpus, queries, {"train": train, "test": test})
    print(f"\n({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
