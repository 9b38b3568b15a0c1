"""The keyword index's memory and speed with its postings in memory, mapped, or read from the snapshot's files.

    .venv/bin/python -m bench.keyword_postings --size 1000000 --reference /work/calypso-base/src

Issue 30 goal 4 (an API process's memory at 1M passages). ``size`` synthetic passages (``bench/search_speed.py``'s,
same seed) in documents of 20 are indexed in this process, timed over every SciFact claim (top 10, two passes:
the second after the per-posting impacts are computed), saved into a snapshot and ``settle``d onto its files,
then timed again. Fresh interpreters then load the snapshot and time the same queries, in turns: this tree
(postings read from the files by ``pread``) and, with ``--reference``, another tree's ``src`` (whose ``load``
maps them). Each prints its p50/p99 and VmRSS = RssAnon + RssFile after the queries, minus the same process's
figures before it loaded the index (the bare interpreter with numpy and calypso imported).

The last line: ``summary: ...``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import beir as be
from bench.common.paths import REPO
from bench.common.proc import proc_status_mb
from bench.common.stats import percentile
from bench.common.synthetic import synthetic_passages
from calypso.heap import return_freed_memory
from calypso.retrieval.bm25 import BM25Index

PER_DOC = 20
FIELDS = ("VmRSS", "RssAnon", "RssFile")

# Run in a fresh interpreter with the tree under test first on the path (PYTHONPATH): load, time, report.
CHILD = """
import gc, json, os, sys, time
from pathlib import Path
from bench.common.proc import proc_status_mb
from calypso.retrieval.bm25 import BM25Index
fields = {fields!r}
before = {{f: proc_status_mb(os.getpid(), f) for f in fields}}
queries = json.loads(Path({queries!r}).read_text())
started = time.perf_counter()
index = BM25Index.load(Path({directory!r}))
loaded = time.perf_counter() - started
times = []
for round in range(2):
    for q in queries:
        t = time.perf_counter()
        index.search(q, 10)
        times.append(time.perf_counter() - t)
gc.collect()
after = {{f: proc_status_mb(os.getpid(), f) for f in fields}}
print(json.dumps({{"times": times[len(queries):], "load_s": loaded, "mb": {{f: after[f] - before[f] for f in fields}}}}))
"""


def time_queries(index: BM25Index, queries: list[str]) -> list[float]:
    times = []
    for q in queries:
        started = time.perf_counter()
        index.search(q, 10)
        times.append(time.perf_counter() - started)
    return times


def figures(label: str, times: list[float]) -> tuple[float, float]:
    p50, p99 = percentile(times, 50) * 1e3, percentile(times, 99) * 1e3
    print(f"  {label}: p50 {p50:.2f} ms, p99 {p99:.2f} ms", flush=True)
    return p50, p99


def child(src: str, directory: Path, queries_file: Path) -> dict:
    code = CHILD.format(
        fields=FIELDS,
        queries=str(queries_file),
        directory=str(directory),
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, str(REPO)]))  # the tree under test, then bench/
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=0, help="first N SciFact claims (0: all)")
    parser.add_argument("--rounds", type=int, default=2, help="turns of the fresh-interpreter loads")
    parser.add_argument("--reference", help="another tree's src directory: its load maps the postings")
    args = parser.parse_args()
    queries = list(be.load_queries(be.scifact_dir()).values())
    queries = queries[: args.queries] if args.queries else queries
    print(f"load average {os.getloadavg()}; {len(queries)} queries", flush=True)

    texts = synthetic_passages(args.size)
    started = time.perf_counter()
    index = BM25Index()
    index.add_many(
        (d, [(d * PER_DOC + j, texts[d * PER_DOC + j]) for j in range(min(PER_DOC, args.size - d * PER_DOC))])
        for d in range((args.size + PER_DOC - 1) // PER_DOC)
    )
    index.search("warm", 1)
    del texts
    gc.collect()
    return_freed_memory()
    print(
        f"{args.size:,} passages indexed in {time.perf_counter() - started:.1f} s, {index.segment_count} segments",
        flush=True,
    )
    time_queries(index, queries)  # the first pass pays for the impacts
    expected = [index.search(q, 10) for q in queries]
    memory_p50, _ = figures("in memory (impacts computed)", time_queries(index, queries))
    held = index.memory_bytes() / 2**20
    rss_built = proc_status_mb(os.getpid(), "VmRSS")

    with tempfile.TemporaryDirectory(prefix="calypso-keyword-") as tmp:
        directory = Path(tmp) / "snap"
        started = time.perf_counter()
        index.settle(directory, index.save(directory))
        gc.collect()
        return_freed_memory()
        on_disk = sum(p.stat().st_size for p in directory.iterdir()) / 2**20
        print(f"  saved and settled in {time.perf_counter() - started:.1f} s: {on_disk:.0f} MB of files", flush=True)
        settled_p50, _ = figures("settled onto the files (this process)", time_queries(index, queries))
        same = sum(index.search(q, 10) == e for q, e in zip(queries, expected))
        print(f"  {same} of {len(queries)} queries give the same top 10 and scores as in memory", flush=True)
        print(f"  segments: {index.segment_count} settled", flush=True)
        rss_settled = proc_status_mb(os.getpid(), "VmRSS")
        print(
            f"  memory_bytes {held:.0f} MB in memory, {index.memory_bytes() / 2**20:.0f} MB settled; "
            f"this process's VmRSS {rss_built:.0f} -> {rss_settled:.0f} MB",
            flush=True,
        )
        del index
        gc.collect()

        queries_file = Path(tmp) / "queries.json"
        queries_file.write_text(json.dumps(queries))
        trees = [("this tree (pread)", str(Path(__file__).resolve().parents[1] / "src"))]
        if args.reference:
            trees.append(("reference (mapped)", args.reference))
        results: dict[str, list[dict]] = {label: [] for label, _ in trees}
        for _ in range(args.rounds):
            for label, src in trees:
                result = child(src, directory, queries_file)
                results[label].append(result)
                mb = result["mb"]
                p50, p99 = percentile(result["times"], 50) * 1e3, percentile(result["times"], 99) * 1e3
                print(
                    f"  {label}, fresh process: loaded in {result['load_s']:.2f} s; p50 {p50:.2f} ms, p99 {p99:.2f}"
                    f" ms; VmRSS +{mb['VmRSS']:.0f} = {mb['RssAnon']:.0f} anonymous + {mb['RssFile']:.0f} file MB",
                    flush=True,
                )

    def best(label: str, key: str) -> float:
        runs = results.get(label, [])
        return min(r["mb"][key] for r in runs) if runs else float("nan")

    def p50_of(label: str) -> float:
        runs = results.get(label, [])
        return min(percentile(r["times"], 50) for r in runs) * 1e3 if runs else float("nan")

    print(
        f"summary: size={args.size} memory_p50_ms={memory_p50:.2f} settled_p50_ms={settled_p50:.2f}"
        f" loaded_p50_ms={p50_of('this tree (pread)'):.2f} loaded_rss_mb={best('this tree (pread)', 'VmRSS'):.0f}"
        f" reference_p50_ms={p50_of('reference (mapped)'):.2f}"
        f" reference_rss_mb={best('reference (mapped)', 'VmRSS'):.0f} memory_bytes_mb={held:.0f}"
        f" files_mb={on_disk:.0f}"
    )


if __name__ == "__main__":
    main()
