"""Search over HTTP against data already loaded: what the request path adds, and requests/s under load.

    .venv/bin/python -m bench.kept_search HOME [--database-url URL] [--rounds 3] [--load 10]

For comparing code on one kept data directory (or PostgreSQL database) without loading it again: HOME is a
``CALYPSO_HOME`` that a run of ``bench/scale_search.py`` or ``bench/pg_hybrid_scale.py`` filled (keep one by
copying it before the bench removes it), and the embedding model and ``CALYPSO_PG_VECTOR_SEARCH`` come from the
environment, as for the server. Then:

- ``--rounds`` interleaved rounds of ``--round-queries`` fresh SciFact claims (``bench/common/rounds.py``): keyword
  and hybrid, in this process and through ``POST /v1/search``, what HTTP adds to each (medians over rounds);
- ``--load`` seconds of ``--clients`` keep-alive clients sending claims back to back to one ``calypso serve``
  (after 3 s of warm-up; ``bench.scale_search.load_test``): requests/s, p50, p99, errors, server cores.

Issue 45's third pass compared its changes with this (docs/benchmarks/search-speed.md).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from bench.common import beir as be
from bench.common import rounds as interleaved_rounds
from bench.common.proc import loadavg
from bench.common.served import Server
from bench.scale_search import load_test
from calypso.config import Settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("home", type=Path, help="a filled CALYPSO_HOME")
    ap.add_argument("--database-url", default="", help="its PostgreSQL database (none: SQLite in HOME)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round-queries", type=int, default=200)
    ap.add_argument("--load", type=float, default=0.0, help="seconds of load after the rounds (0: none)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--port", type=int, default=8795)
    args = ap.parse_args()
    settings = Settings(home=args.home, database_url=args.database_url)  # the model etc. from the environment
    claims = list(be.load_queries(be.scifact_dir()).values())
    print(
        f"{args.home} ({'PostgreSQL' if args.database_url else 'SQLite'}), model {settings.embedding_model}, "
        f"vectors {os.environ.get('CALYPSO_PG_VECTOR_SEARCH', 'memory') if args.database_url else 'memory'}; "
        f"load average {loadavg()}",
        flush=True,
    )
    if args.rounds:
        wait_for = None if args.database_url else r"vector graph:|graph of [1-9]"
        with interleaved_rounds.served(settings, args.port, claims[0], wait_for) as server:
            rows = interleaved_rounds.interleaved(settings, claims, server, args.rounds, args.round_queries)
        summary = interleaved_rounds.summary(rows)
        for name in ("keyword", "hybrid"):
            print(
                f"{name}: in process {summary[f'{name}_in_process_p50']:.2f} "
                f"({summary[f'{name}_in_process_p50_range']}), HTTP {summary[f'{name}_http_p50']:.2f} "
                f"({summary[f'{name}_http_p50_range']}), added p50 {summary[f'{name}_added_p50']:.2f} "
                f"({summary[f'{name}_added_p50_range']}), p99 {summary[f'{name}_added_p99']:.2f} ms",
                flush=True,
            )
    if args.load:
        server = Server(settings, args.port + 1, claims[0])
        try:
            load_test([server], claims, args.clients, 3.0)
            row = load_test([server], claims, args.clients, args.load)
        finally:
            server.stop()
        print(
            f"load: {args.clients} clients, {row['rps']:.0f} requests/s, p50 {row['p50']:.1f} ms, p99 "
            f"{row['p99']:.1f} ms, errors {row['errors']}, server cores {row['server_cores']:.2f}; load average "
            f"{loadavg()}",
            flush=True,
        )


if __name__ == "__main__":
    main()
