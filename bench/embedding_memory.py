"""The resident memory a local embedding model costs a process, beside its query latency and passage throughput.

One fresh process per run: load the model, embed SciFact abstracts as passages (``embed``) and SciFact queries
one at a time (``query_embedder(model).embed([q])``), then read VmRSS, RssAnon and RssFile from
/proc/self/status (after ``malloc_trim``, as the server does after a load) and the largest mappings. The vectors
are written with ``--vectors`` so two versions of the code can be compared bit for bit.

``--served N``: instead, ``calypso serve`` with the model on N synthetic passages with random vectors (as
bench/scale_search.py writes them, so the server only embeds queries), the SciFact queries as hybrid
``POST /v1/search`` requests, then the server's VmRSS, RssAnon, RssFile and peak.

    .venv/bin/python -m bench.embedding_memory --model multilingual-e5-small-int8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from bench.common.proc import largest_mappings, loadavg, proc_status_mb

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "beir-scifact"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="multilingual-e5-small-int8")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--vectors", type=Path, help="write the passages' and queries' vectors here (.npz)")
    parser.add_argument("--mappings", type=int, default=6, help="the largest mappings to print")
    parser.add_argument("--served", type=int, default=0, help="measure calypso serve on this many passages")
    parser.add_argument("--port", type=int, default=18751)
    args = parser.parse_args()
    if args.served:
        served(args)
        return

    from calypso.config import Settings
    from calypso.embeddings import open_embedder
    from calypso.embeddings.base import query_embedder
    from calypso.heap import return_freed_memory

    queries = [json.loads(line)["text"] for line in (DATA / "queries.jsonl").open()][: args.queries]
    with (DATA / "corpus.jsonl").open() as corpus:
        abstracts = []
        for line in corpus:
            record = json.loads(line)
            abstracts.append(f"{record['title']}\n{record['text']}")
            if len(abstracts) == args.passages:
                break

    pid = os.getpid()
    before = proc_status_mb(pid, "RssAnon")
    model = open_embedder(Settings(embedding_model=args.model))
    searcher = query_embedder(model)
    started = time.perf_counter()
    model.embed(abstracts[:4])  # loads the model
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    passages = model.embed(abstracts)
    passages_per_s = len(abstracts) / (time.perf_counter() - started)
    searcher.embed(queries[:5])
    times, rows = [], []
    for query in queries:
        started = time.perf_counter()
        rows.append(searcher.embed([query])[0])
        times.append((time.perf_counter() - started) * 1000)
    return_freed_memory()
    memory = {field: proc_status_mb(pid, field) for field in ("VmRSS", "RssAnon", "RssFile", "VmHWM")}
    if args.vectors:
        np.savez(args.vectors, passages=passages, queries=np.stack(rows))
    print(
        f"{args.model}: VmRSS {memory['VmRSS']:.1f} MB (RssAnon {memory['RssAnon']:.1f}, RssFile "
        f"{memory['RssFile']:.1f}, peak {memory['VmHWM']:.1f}; RssAnon {before:.1f} before the model); "
        f"query p50 {statistics.median(times):.2f} ms (p90 {np.percentile(times, 90):.2f}); "
        f"passages {passages_per_s:.1f}/s; load {load_s:.2f} s; load average {loadavg()}"
    )
    for name, rss, anon in largest_mappings(pid, args.mappings):
        print(f"  {name}: Rss {rss:.1f} MB, anonymous {anon:.1f}")


def served(args: argparse.Namespace) -> None:
    import tempfile

    from bench.common.served import load, over_http
    from bench.common.synthetic import synthetic_passages
    from bench.scale_search import write_vectors
    from calypso.config import Settings

    queries = [json.loads(line)["text"] for line in (DATA / "queries.jsonl").open()][: args.queries]
    with tempfile.TemporaryDirectory(prefix="calypso-embedding-memory-") as home:
        settings = Settings(home=Path(home), database_url="", embedding_model=args.model)
        load(settings, synthetic_passages(args.served), 20, 600, "served")
        write_vectors(settings, args.model, 384, "served")
        r = over_http(settings, queries, args.port, show_mappings=args.mappings > 0)
    print(
        f"{args.model}, calypso serve on {args.served:,} passages: VmRSS {r['server_rss_mb']:.1f} MB (RssAnon "
        f"{r['server_rss_anon_mb']:.1f}, RssFile {r['server_rss_file_mb']:.1f}, peak {r['server_hwm_mb']:.1f}); "
        f"hybrid POST /v1/search p50 {r['http_p50']:.2f} ms; load average {loadavg()}"
    )


if __name__ == "__main__":
    main()
