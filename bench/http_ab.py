"""Two source trees' `calypso serve`, side by side on copies of one data directory, searched in turns.

    git worktree add --detach ../calypso-base <commit>
    .venv/bin/python -m bench.http_ab HOME ../calypso-base . --rounds 6            # keyword
    .venv/bin/python -m bench.http_ab HOME ../calypso-base . --model minilm-l6-v2-int8

HOME is a data directory with passages in its default namespace (for instance the one
`bench/scale_search.py` builds; copy it out of the run's temporary directory, or load your own). Each
tree gets its own copy (a serving process locks its directory) and its own process; after 20 warm-up
claims each, every round sends the same SciFact claims, one at a time over one keep-alive httpx
connection, to the first server and then to the second, so both see the same machine load. With a
model, each round takes fresh claims (a server memoises the vectors of recent queries). Prints each
round's p50 per tree. A difference smaller than the spread between rounds is noise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import beir as be


def serve(tree: Path, home: Path, port: int, model: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CALYPSO_HOME": str(home),
        "CALYPSO_EMBEDDING_MODEL": model,
        "CALYPSO_GRPC_PORT": "0",  # two servers cannot share the gRPC port
        "CALYPSO_LOG_LEVEL": "warning",
        "PYTHONPATH": str(tree.resolve() / "src"),
    }
    command = [sys.executable, "-m", "calypso.cli", "serve", "--port", str(port)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(client: httpx.Client, probe: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"a server exited ({process.args})")
        try:
            if client.get("/health").status_code == 200:
                client.post("/v1/search", json={"query": probe}, timeout=900).raise_for_status()
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("a server did not answer within 15 minutes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("home", type=Path, help="the data directory both servers copy")
    ap.add_argument("trees", type=Path, nargs=2, help="two source trees (checkouts), the reference first")
    ap.add_argument("--model", default="none", help="CALYPSO_EMBEDDING_MODEL (default: keyword only)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=200, help="claims per round")
    ap.add_argument("--port", type=int, default=8830)
    args = ap.parse_args()
    claims = list(be.load_queries(be.scifact_dir()).values())
    work = Path(tempfile.mkdtemp(prefix="calypso-ab-"))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        clients = []
        for i, tree in enumerate(args.trees):
            home = work / f"home{i}"
            shutil.copytree(args.home, home, ignore=shutil.ignore_patterns("*.lock", "server.json"))
            processes.append(serve(tree, home, args.port + i, args.model))
            clients.append(httpx.Client(base_url=f"http://127.0.0.1:{args.port + i}", timeout=120))
        for client, process in zip(clients, processes):
            wait_ready(client, claims[0], process)
            for claim in claims[:20]:
                client.post("/v1/search", json={"query": claim, "max_num_results": 10}).raise_for_status()
        rounds: list[list[float]] = [[], []]
        for r in range(args.rounds):
            start = 20 + (r * args.per_round if args.model != "none" else 0)
            batch = [claims[(start + j) % len(claims)] for j in range(args.per_round)]
            for i, client in enumerate(clients):
                times = []
                for claim in batch:
                    t = time.perf_counter()
                    client.post("/v1/search", json={"query": claim, "max_num_results": 10}).raise_for_status()
                    times.append((time.perf_counter() - t) * 1000)
                rounds[i].append(statistics.median(times))
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(f"POST /v1/search p50 ms per round ({args.per_round} claims, model {args.model}, load {load}):")
        for tree, p50s in zip(args.trees, rounds):
            print(f"  {str(tree):30} " + " ".join(f"{p:.2f}" for p in p50s))
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
