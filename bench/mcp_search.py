"""`search` over MCP beside `POST /v1/search` over HTTP, in the same run, against one `calypso serve`.

    .venv/bin/python -m bench.mcp_search                # the Alps PDF, its 39 questions, 10 rounds
    .venv/bin/python -m bench.mcp_search --rounds 3

The Alps Wikipedia PDF (25 pages) is ingested into a fresh data directory; `calypso serve` runs on it as
its own process (keyword search: CALYPSO_EMBEDDING_MODEL=none unless --embeddings). Each round sends every
question once per client, the clients taking turns question by question, so all see the same server
state (the client that goes first changes from question to question). Clients, each over one
keep-alive connection, 5 passages per search, the same passages checked on all three:

* http: ``POST /v1/search`` (httpx);
* mcp raw: a JSON-RPC ``tools/call`` POSTed to ``/mcp`` (httpx): the server's cost of MCP alone;
* mcp client: ``call_tool("search")`` of the official `mcp` client (2026-07-28 protocol), which also
  validates ``structuredContent`` against the tool's ``outputSchema``: what an agent sees.

Target (issue 27): MCP at most 2 ms more than HTTP at p50. Besides each client's percentiles, "paired"
is the median over questions of (that client's time - http's time for the same question in the same
turn): on a shared machine whose load drifts during the run, the steadier figure.

Then the optional ``verify`` tool, over the official client: each question's gold fact (the sentence of
the PDF that answers it) checked by searching it (it should be supported), and checked against the top
3 passages of another question whose gold pages differ (it should not be), with its latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.common.stats import percentile
from calypso.config import Settings
from calypso.services import open_services
from calypso.services.ingestion import Upload

DATA = Path(os.environ.get("CALYPSO_EVAL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
ALPS = DATA / "alps-wiki-qa"
K = 5


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(home: Path, port: int, embeddings: bool) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CALYPSO_HOME": str(home), "CALYPSO_LOG_LEVEL": "warning"}
    if not embeddings:
        env["CALYPSO_EMBEDDING_MODEL"] = "none"
    process = subprocess.Popen(
        [sys.executable, "-m", "calypso.cli", "serve", "--port", str(port), "--grpc-port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.post(f"http://127.0.0.1:{port}/v1/search", json={"query": "Alps"}, timeout=120).raise_for_status()
            return process
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("server did not start")


async def run(url: str, questions: list[str], rounds: int) -> dict[str, list[float]]:
    from mcp.client import Client

    timings: dict[str, list[float]] = {"http": [], "mcp raw": [], "mcp client": []}
    raw_headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    with httpx.Client(base_url=url, timeout=120) as http:
        async with Client(f"{url}/mcp") as client:

            async def over_http(question: str) -> list[int]:
                response = http.post("/v1/search", json={"query": question, "max_num_results": K})
                response.raise_for_status()
                return [hit["attributes"]["chunk_index"] for hit in response.json()["data"]]

            async def over_raw_mcp(question: str) -> list[int]:
                call = {"name": "search", "arguments": {"query": question, "max_results": K}}
                message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
                raw = http.post("/mcp", content=json.dumps(message), headers=raw_headers)
                raw.raise_for_status()
                return [hit["chunk_index"] for hit in raw.json()["result"]["structuredContent"]["results"]]

            async def over_mcp_client(question: str) -> list[int]:
                result = await client.call_tool("search", {"query": question, "max_results": K})
                assert not result.is_error and result.structured_content is not None
                return [hit["chunk_index"] for hit in result.structured_content["results"]]

            clients = {"http": over_http, "mcp raw": over_raw_mcp, "mcp client": over_mcp_client}
            for warm in questions[:5]:  # connections open, caches warm
                for send in clients.values():
                    await send(warm)
            turn = 0
            for _ in range(rounds):
                for question in questions:
                    names = list(clients)
                    names = names[turn % 3 :] + names[: turn % 3]  # who goes first changes question by question
                    turn += 1
                    found = {}
                    for name in names:
                        t0 = time.perf_counter()
                        found[name] = await clients[name](question)
                        timings[name].append((time.perf_counter() - t0) * 1000)
                    assert found["mcp raw"] == found["mcp client"] == found["http"], question
    return timings


async def run_verify(url: str, rows: list[dict]) -> tuple[int, int, int, int, list[float]]:
    """(gold facts supported, facts checked, mismatched facts not supported, mismatches checked, ms per call)."""
    from mcp.client import Client

    supported = refuted = mismatches = 0
    timings: list[float] = []
    async with Client(f"{url}/mcp") as client:
        tops = []
        for row in rows:
            searched = await client.call_tool("search", {"query": row["question"], "max_results": 3})
            assert searched.structured_content is not None
            tops.append([hit["id"] for hit in searched.structured_content["results"]])
        for i, row in enumerate(rows):
            fact = row["facts"][0]
            t0 = time.perf_counter()
            result = await client.call_tool("verify", {"claim": fact})
            timings.append((time.perf_counter() - t0) * 1000)
            assert result.structured_content is not None
            supported += bool(result.structured_content["supported"])
            other = rows[(i + 1) % len(rows)]
            if set(other["gold_pdf_pages"]) & set(row["gold_pdf_pages"]):
                continue
            t0 = time.perf_counter()
            result = await client.call_tool("verify", {"claim": fact, "passage_ids": tops[(i + 1) % len(rows)]})
            timings.append((time.perf_counter() - t0) * 1000)
            assert result.structured_content is not None
            mismatches += 1
            refuted += not result.structured_content["supported"]
    return supported, len(rows), refuted, mismatches, timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--embeddings", action="store_true", help="hybrid search with the configured model")
    args = parser.parse_args()
    load_start = " ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = [json.loads(line) for line in (ALPS / "alps_qa_with_pdf_pages.jsonl").read_text().splitlines()]
    questions = [row["question"] for row in rows]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = Settings(home=home, **({} if args.embeddings else {"embedding_model": "none"}))
        services = open_services(settings)
        pdf = ALPS / "alps_wiki.pdf"
        services.ingestion.ingest(Upload(pdf.read_bytes(), pdf.name))
        services.close()
        port = free_port()
        process = serve(home, port, args.embeddings)
        try:
            timings = asyncio.run(run(f"http://127.0.0.1:{port}", questions, args.rounds))
            verified = asyncio.run(run_verify(f"http://127.0.0.1:{port}", rows))
        finally:
            process.terminate()
            process.wait(timeout=60)
    searches = len(questions) * args.rounds
    print(f"Alps PDF, {len(questions)} questions x {args.rounds} rounds = {searches} searches per client, {K} passages")
    print(f"load average at start and end: {load_start}, {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'client':<12} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'p50 - http':>11} {'paired':>8}")
    base = percentile(timings["http"], 50)
    for name, values in timings.items():
        p50 = percentile(values, 50)
        # The median of (this client - http) question by question: what load drifting over the run leaves alone.
        paired = percentile([a - b for a, b in zip(values, timings["http"])], 50)
        print(
            f"{name:<12} {p50:8.2f} {percentile(values, 90):8.2f} {percentile(values, 99):8.2f} "
            f"{p50 - base:+11.2f} {paired:+8.2f}"
        )
    supported, facts, refuted, mismatches, verify_ms = verified
    print(
        f"verify: gold facts supported {supported}/{facts}; facts against another question's passages "
        f"not supported {refuted}/{mismatches}; p50 {percentile(verify_ms, 50):.2f} ms, "
        f"p99 {percentile(verify_ms, 99):.2f} ms ({len(verify_ms)} calls)"
    )


if __name__ == "__main__":
    main()
