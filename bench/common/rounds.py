"""What the HTTP path adds to a search, measured beside it (issue 45, goal 1): one ``calypso serve`` and one
in-process ``SearchService`` over the same data, the same claims asked of both, interleaved query by query.

Each round takes claims no earlier round asked (so every hybrid search embeds its query, in process and in the
server alike) and times four things per claim, in blocks of ``BLOCK`` claims asked one way, the ways' order rotated
block by block: keyword search in process (``embedding_weight=0``), the same over HTTP
(``ranking_options.hybrid_search``), hybrid in process, hybrid over HTTP (``served.SearchClient``: one keep-alive
connection of the standard library's client). A round reports each one's p50 and p99, the server's own mean from its request-duration histogram, and what
HTTP adds (HTTP minus in process, p50 and p99); the summary is the median over rounds with the spread.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bench.common.proc import loadavg
from bench.common.served import NAMESPACE, SearchClient, Server
from bench.common.stats import percentile
from calypso.config import Settings
from calypso.models import RankingOptions
from calypso.services import open_services

KINDS = ("keyword_in_process", "keyword_http", "hybrid_in_process", "hybrid_http")
KEYWORD_ONLY = {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}
WARM = 20  # claims asked of both before a round's first (the first round only)
# Claims asked one way in a row before the next way: a model run in one process made the other's next request
# 3-6 ms slower (measured: keyword over HTTP 2.7 ms alone, 6.4-9.8 ms right after a model run in this process,
# even 20 ms after), so claim-by-claim alternation measured the handover, not the request path.
BLOCK = 25


def slices(queries: list[str], rounds: int, per_round: int) -> Iterator[list[str]]:
    """``rounds`` lists of ``per_round`` claims, none asked twice while there are enough (then reused)."""
    for r in range(rounds):
        start = (WARM + r * per_round) % max(1, len(queries) - per_round)
        yield queries[start : start + per_round]


@contextmanager
def served(settings: Settings, port: int, probe: str, wait_for: str | None) -> Iterator[Server]:
    server = Server(settings, port, probe, wait_for)
    try:
        yield server
    finally:
        server.stop()


def interleaved(
    settings: Settings,
    queries: list[str],
    server: Server,
    rounds: int,
    per_round: int,
    between: Callable[[int], None] | None = None,
) -> list[dict]:
    """The rounds against ``server`` (already up) and a ``SearchService`` of this process on ``settings``; one dict
    per round. ``between(r)``: called before round ``r`` (a profiler attached, say)."""
    services = open_services(settings)
    results: list[dict] = []
    try:
        search = services.search
        keyword = RankingOptions(embedding_weight=0)
        client = SearchClient(server.url)
        try:

            def in_process(q: str, ranking: RankingOptions | None) -> None:
                search.search(q, search.scope(NAMESPACE, max_results=10, ranking=ranking))

            def over_http(q: str, ranking: dict | None) -> None:
                body: dict = {"query": q, "max_num_results": 10}
                if ranking is not None:
                    body["ranking_options"] = ranking
                client.search(body)

            calls: dict[str, Callable[[str], None]] = {
                "keyword_in_process": lambda q: in_process(q, keyword),
                "keyword_http": lambda q: over_http(q, KEYWORD_ONLY),
                "hybrid_in_process": lambda q: in_process(q, None),
                "hybrid_http": lambda q: over_http(q, None),
            }
            for q in queries[:WARM]:
                for call in calls.values():
                    call(q)
            for r, claims in enumerate(slices(queries, rounds, per_round)):
                if between is not None:
                    between(r)
                times: dict[str, list[float]] = {kind: [] for kind in KINDS}
                load_before = loadavg()
                seconds, requests = server.search_totals()
                for b, first in enumerate(range(0, len(claims), BLOCK)):
                    for kind in KINDS[b % 4 :] + KINDS[: b % 4]:
                        for q in claims[first : first + BLOCK]:
                            t = time.perf_counter()
                            calls[kind](q)
                            times[kind].append((time.perf_counter() - t) * 1000)
                seconds_after, requests_after = server.search_totals()
                row: dict = {"round": r + 1, "queries": len(claims), "load": f"{load_before} -> {loadavg()}"}
                for kind, ts in times.items():
                    row[f"{kind}_p50"], row[f"{kind}_p99"] = percentile(ts, 50), percentile(ts, 99)
                    row[f"{kind}_mean"] = sum(ts) / len(ts)
                row["server_mean"] = 1000 * (seconds_after - seconds) / max(1.0, requests_after - requests)
                for name in ("keyword", "hybrid"):
                    for stat in ("p50", "p99"):
                        row[f"{name}_added_{stat}"] = row[f"{name}_http_{stat}"] - row[f"{name}_in_process_{stat}"]
                results.append(row)
                print(round_line(row), flush=True)
        finally:
            client.close()
    finally:
        services.close()
    return results


def round_line(row: dict) -> str:
    return (
        f"  round {row['round']} ({row['queries']} claims): keyword in process {row['keyword_in_process_p50']:.2f} "
        f"(p99 {row['keyword_in_process_p99']:.2f}) / HTTP {row['keyword_http_p50']:.2f} "
        f"({row['keyword_http_p99']:.2f}) ms, added {row['keyword_added_p50']:+.2f} ({row['keyword_added_p99']:+.2f}); "
        f"hybrid in process {row['hybrid_in_process_p50']:.2f} ({row['hybrid_in_process_p99']:.2f}) / HTTP "
        f"{row['hybrid_http_p50']:.2f} ({row['hybrid_http_p99']:.2f}) ms, added {row['hybrid_added_p50']:+.2f} "
        f"({row['hybrid_added_p99']:+.2f}); server's own mean over both {row['server_mean']:.2f} ms; load "
        f"{row['load']}"
    )


def summary(rows: list[dict]) -> dict:
    """Median over rounds of each figure, with its range (``<figure>_range``: min-max)."""
    out: dict = {"rounds": len(rows)}
    for key in rows[0]:
        values = [r[key] for r in rows if isinstance(r.get(key), float)]
        if len(values) == len(rows):
            out[key] = statistics.median(values)
            out[f"{key}_range"] = f"{min(values):.2f}-{max(values):.2f}"
    return out
