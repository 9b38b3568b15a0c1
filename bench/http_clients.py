"""What the client library costs a search over HTTP: one server, the same keyword searches asked in process, over
the standard library's ``http.client`` (the timed client of the other benches, ``served.SearchClient``) and over
httpx (the OpenAI SDK's transport), each on one keep-alive connection, in blocks of 25 claims, the ways rotated.

    python -m bench.http_clients [--passages 20000] [--rounds 3]

Prints each way's p50 and p99 and the differences: what httpx adds over ``http.client`` is the client's own time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.common import beir as be
from bench.common.served import NAMESPACE, SearchClient, Server, load
from bench.common.stats import percentile
from bench.common.synthetic import synthetic_passages
from calypso.config import Settings
from calypso.models import RankingOptions
from calypso.services import open_services

BLOCK = 25
KEYWORD_ONLY = {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=8790)
    args = ap.parse_args()
    queries = list(be.load_queries(be.scifact_dir()).values())
    home = Path(tempfile.mkdtemp(prefix="calypso-http-clients-"))
    settings = Settings(home=home, embedding_model="none")
    load(settings, synthetic_passages(args.passages), 100, 3600, "http clients")
    server = Server(settings, args.port, queries[0])
    services = open_services(settings)
    lean = SearchClient(server.url)
    httpx_client = httpx.Client(base_url=server.url, timeout=120)
    try:
        search = services.search
        keyword = RankingOptions(embedding_weight=0)

        def body(q: str) -> dict:
            return {"query": q, "max_num_results": 10, "ranking_options": KEYWORD_ONLY}

        ways: dict[str, Callable[[str], object]] = {
            "in process": lambda q: search.search(q, search.scope(NAMESPACE, max_results=10, ranking=keyword)),
            "http.client": lambda q: lean.search(body(q)),
            "httpx": lambda q: httpx_client.post("/v1/search", json=body(q)).raise_for_status(),
        }
        for q in queries[:30]:
            for way in ways.values():
                way(q)
        times: dict[str, list[float]] = {name: [] for name in ways}
        print(f"load average before: {os.getloadavg()}", flush=True)
        names = list(ways)
        for _ in range(args.rounds):
            for b, first in enumerate(range(30, min(len(queries), 630), BLOCK)):
                for name in names[b % 3 :] + names[: b % 3]:
                    for q in queries[first : first + BLOCK]:
                        t = time.perf_counter()
                        ways[name](q)
                        times[name].append((time.perf_counter() - t) * 1000)
        print(f"load average after: {os.getloadavg()}")
        p50 = {name: statistics.median(ts) for name, ts in times.items()}
        for name, ts in times.items():
            print(f"  {name:12s} p50 {p50[name]:.3f} ms  p99 {percentile(ts, 99):.3f} ms  ({len(ts)} searches)")
        print(
            f"summary: passages={args.passages} http_client_adds_ms={p50['http.client'] - p50['in process']:.3f} "
            f"httpx_adds_ms={p50['httpx'] - p50['in process']:.3f} httpx_over_http_client_ms="
            f"{p50['httpx'] - p50['http.client']:.3f}"
        )
    finally:
        httpx_client.close()
        lean.close()
        services.close()
        server.stop()


if __name__ == "__main__":
    main()
