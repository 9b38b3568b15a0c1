"""The resident memory a local embedding model costs a process, beside its query latency and passage throughput.

One fresh process per run: load the model, embed SciFact abstracts as passages (``embed``) and SciFact queries
one at a time (``query_embedder(model).embed([q])``), then read VmRSS, RssAnon and RssFile from
/proc/self/status (after ``malloc_trim``, as the server does after a load) and the largest mappings. The vectors
are written with ``--vectors`` so two versions of the code can be compared bit for bit.

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
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
