"""The local model's three ways of running, side by side in one process (issue 30, goals 1, 2 and 6).

    .venv/bin/python -m bench.query_model [--queries 400] [--passages 400] [--rounds 3]

- ``export``: the package's ``model.onnx`` as it ran before the compact graph (its dequantization folded into fp32
  weights by onnxruntime, some 300 operators), in a session with the same options as ours;
- ``fp32``: ``minilm_graph``'s compact graph at fp32, what passages are embedded by;
- ``int8``: the compact graph with int8 products, what queries are embedded by (``for_queries``).

Measured, in this order:

1. vectors: cosine of ``fp32`` and ``int8`` to ``export`` on SciFact claims (min / 5th percentile / median);
2. dense retrieval: nDCG@10 of the claims of ``qrels/train.tsv`` (what the int8 choice was tuned on) and of
   ``qrels/test.tsv`` against the corpus's ``export`` vectors, the claims embedded each way;
3. a query's embedding (``embed([claim])``, tokenizer and pooling included), the three interleaved claim by
   claim over ``--queries`` claims, ``--rounds`` times: p50/p99 ms;
4. passages/s: ``--passages`` abstracts, batch 4, each way in turn, ``--rounds`` times: wall and per CPU second;
5. memory: each way's RssAnon after it loads, each in a fresh child process (imports subtracted).

The last line is ``summary: export_query_p50_ms=… int8_query_p50_ms=… export_passages_s=… fp32_passages_s=…
int8_rss_mb=… export_rss_mb=… int8_test_ndcg=… export_test_ndcg=…``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import beir as be
from bench.common.proc import proc_status_mb
from bench.common.stats import percentile
from calypso.embeddings.local_onnx import LocalOnnxEmbedder

WAYS = ("export", "fp32", "int8")


class ExportEmbedder(LocalOnnxEmbedder):
    """The package's model.onnx itself, in a session with our options (what every release before ran)."""

    def _graph_file(self, model_path: Path, scratch: Path) -> Path:
        return model_path


def embedder(way: str) -> LocalOnnxEmbedder:
    if way == "export":
        return ExportEmbedder()
    base = LocalOnnxEmbedder()
    return base if way == "fp32" else base.for_queries()


def rss_anon_mb() -> float:
    return proc_status_mb(os.getpid(), "RssAnon")


def memory_child(way: str) -> None:
    """Run in a child: RssAnon added by loading ``way`` (after the imports every way needs)."""
    import onnx  # noqa: F401 - imported by every way's load
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401

    before = rss_anon_mb()
    model = embedder(way)
    model.embed(["how do cells divide?"])
    print(json.dumps({"way": way, "rss_anon_mb": rss_anon_mb() - before}))


def ndcg(query_vectors: np.ndarray, ids: list[str], doc_vectors: np.ndarray, doc_ids: list[str], qrels: dict) -> float:
    scores = query_vectors @ doc_vectors.T
    total = 0.0
    for row, qid in enumerate(ids):
        top = np.argsort(-scores[row])[:10]
        total += be.ndcg_at_k([doc_ids[j] for j in top], qrels[qid])
    return total / len(ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--passages", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory-child", choices=WAYS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return
    print(f"load average {os.getloadavg()}", flush=True)
    root = be.scifact_dir()
    corpus = be.load_corpus(root)
    doc_ids, docs = list(corpus), list(corpus.values())
    queries = be.load_queries(root)
    models = {way: embedder(way) for way in WAYS}
    for model in models.values():
        model.load()

    t = time.perf_counter()
    doc_vectors = models["export"].embed(docs)
    print(f"corpus: {len(docs):,} abstracts embedded by export in {time.perf_counter() - t:.0f} s", flush=True)
    figures: dict[str, float] = {}
    claims = list(queries.values())[: args.queries]
    reference = models["export"].embed(claims)
    for way in ("fp32", "int8"):
        cosines = (models[way].embed(claims) * reference).sum(axis=1)
        print(
            f"{way}: cosine to export over {len(claims)} claims min {cosines.min():.7f} p5 "
            f"{np.percentile(cosines, 5):.7f} median {np.median(cosines):.7f}",
            flush=True,
        )
    for split in ("train", "test"):
        qrels = be.load_qrels(root, split)
        ids = [q for q in qrels if q in queries]
        for way in WAYS:
            value = ndcg(models[way].embed([queries[q] for q in ids]), ids, doc_vectors, doc_ids, qrels)
            figures[f"{way}_{split}_ndcg"] = value
            print(f"dense nDCG@10, {split} ({len(ids)} claims), queries by {way}: {value:.4f}", flush=True)

    times: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for claim in claims:
            for way in WAYS:
                t = time.perf_counter()
                models[way].embed([claim])
                times[way].append((time.perf_counter() - t) * 1000)
    for way in WAYS:
        figures[f"{way}_query_p50_ms"] = percentile(times[way], 50)
        print(
            f"query embedding by {way}: p50 {percentile(times[way], 50):.2f} ms p99 {percentile(times[way], 99):.2f} ms",
            flush=True,
        )

    passages = docs[: args.passages]
    rates: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for _ in range(args.rounds):
        for way in WAYS:
            cpu, wall = time.process_time(), time.perf_counter()
            models[way].embed(passages)
            rates[way].append(
                (len(passages) / (time.perf_counter() - wall), len(passages) / (time.process_time() - cpu))
            )
    for way in WAYS:
        walls = [w for w, _ in rates[way]]
        figures[f"{way}_passages_s"] = float(np.median(walls))
        print(
            f"passages by {way}: {', '.join(f'{w:.1f}' for w in walls)} per s wall; "
            f"{', '.join(f'{c:.1f}' for _, c in rates[way])} per CPU second",
            flush=True,
        )

    for way in WAYS:
        out = subprocess.run(
            [sys.executable, __file__, "--memory-child", way], capture_output=True, text=True, check=True
        ).stdout
        figures[f"{way}_rss_mb"] = json.loads(out.strip().splitlines()[-1])["rss_anon_mb"]
        print(f"RssAnon added by loading {way}: {figures[f'{way}_rss_mb']:.1f} MB", flush=True)
    print(f"load average {os.getloadavg()}", flush=True)
    keys = (
        "export_query_p50_ms int8_query_p50_ms export_passages_s fp32_passages_s int8_passages_s export_rss_mb "
        "fp32_rss_mb int8_rss_mb export_test_ndcg int8_test_ndcg export_train_ndcg int8_train_ndcg"
    ).split()
    print("summary: " + " ".join(f"{k}={figures[k]:.4g}" for k in keys))


if __name__ == "__main__":
    main()
