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

    .venv/bin/python -m bench.retrieval_quality [--quick | --query-analysis]

Hybrid (issue 12): ``--dense DIR`` reads the corpus and query vectors that
``bench/embedding_models.py --model M`` saved in DIR (scifact-M.npy/.ids,
scifact-queries-M.npy/.ids) and prints BM25, dense and fused runs side by side. Fusion
parameters are chosen on qrels/train.tsv only (grid printed), then reported on test:

    .venv/bin/python -m bench.retrieval_quality --quick --dense /tmp/calypso-embed-bench --dense-model minilm-int8-onnx
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from bench.common import beir as be
from calypso.retrieval.bm25 import DEFAULT_B, DEFAULT_K1, BM25Index
from calypso.retrieval.hybrid import fuse, rrf
from calypso.retrieval.query import keyword_query
from calypso.text.tokenize import STOPWORDS_EN_EXTENDED, Analyzer

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
    ap.add_argument("--dense", type=Path, help="directory with vectors saved by bench/embedding_models.py")
    ap.add_argument("--dense-model", default="minilm-int8-onnx")
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
    if args.dense:
        hybrid(args.dense, args.dense_model, indexes[chosen], k1, b, queries, train, test)
    print(f"\n({time.perf_counter() - t0:.0f}s)")


def _load_vectors(d: Path, stem: str) -> tuple[np.ndarray, list[str]]:
    return np.load(d / f"{stem}.npy"), (d / f"{stem}.ids").read_text().split("\n")


def hybrid(d: Path, model: str, bm25: tuple, k1: float, b: float, queries: dict, train: dict, test: dict) -> None:
    docs, doc_ids = _load_vectors(d, f"scifact-{model}")
    qv, q_ids = _load_vectors(d, f"scifact-queries-{model}")
    qrow = {q: i for i, q in enumerate(q_ids)}
    idx, ids = bm25
    idx.set_params(k1, b)
    depth = 100
    lex = {q: [(ids[c], s) for c, s in idx.search(queries[q], k=depth)] for q in {*train, *test}}
    den: dict[str, list[tuple[str, float]]] = {}
    for q in {*train, *test}:
        sims = docs @ qv[qrow[q]]
        top = np.argpartition(-sims, depth)[:depth]
        top = top[np.argsort(-sims[top])]
        den[q] = [(doc_ids[j], float(sims[j])) for j in top]

    def per_q(make: object, qrels: dict) -> list[float]:
        run = {q: [doc for doc, _ in make(q)] for q in qrels}  # type: ignore[operator]
        return be.per_query(run, qrels)["ndcg@10"]

    weights = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8]  # dense share; text gets 1 - w
    candidates = {}
    for k in (10, 20, 40, 60, 100):
        for w in weights:
            candidates[("rrf", k, w)] = lambda q, k=k, w=w: rrf(
                [x for x, _ in lex[q]], [x for x, _ in den[q]], text_weight=1 - w, embedding_weight=w, k=k
            )
    for w in weights:
        candidates[("convex", 0, w)] = lambda q, w=w: fuse(lex[q], den[q], text_weight=1 - w, embedding_weight=w)
    train_scores = {key: mean(per_q(f, train)) for key, f in candidates.items()}
    print("\nfusion on train (nDCG@10): method, k, dense weight")
    for key, v in sorted(train_scores.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {key[0]:6s} k={key[1]:<3d} w_dense={key[2]:.1f}  {v:.4f}")
    best_rrf = max((k for k in candidates if k[0] == "rrf"), key=train_scores.__getitem__)
    best = max(candidates, key=train_scores.__getitem__)
    print(f"\n| run ({model}) | split | nDCG@10 | Recall@100 |\n|---|---|---|---|")
    rows = [
        (f"BM25 k1={k1:g} b={b:g}", lambda q: lex[q]),
        ("dense (cosine, exact)", lambda q: den[q]),
        (f"hybrid RRF k={best_rrf[1]} w_dense={best_rrf[2]:.1f} (best RRF on train)", candidates[best_rrf]),
        (f"hybrid {best[0]} k={best[1]} w_dense={best[2]:.1f} (best on train)", candidates[best]),
        ("hybrid RRF k=60 w_dense=0.5 (untuned reference)", candidates[("rrf", 60, 0.5)]),
    ]
    for label, make in rows:
        for split, qrels in (("train", train), ("test", test)):
            run = {q: [doc for doc, _ in make(q)] for q in qrels}
            m = be.evaluate(run, qrels)
            print(f"| {label} | {split} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")


if __name__ == "__main__":
    main()
