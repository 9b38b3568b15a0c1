"""Many concurrent streamed answers through a fast scripted upstream: do they all complete, and at what cost?

    .venv/bin/python -m bench.stream_load                 # 200 and 1,000 streams
    .venv/bin/python -m bench.stream_load --levels 50 200 # other levels

Three processes on loopback: the fake OpenAI-compatible upstream
(``calypso.generation.fake_upstream``, each answer 60 tokens: first after
100 ms, then 5 ms apart, about 0.4 s), ``calypso serve --demo`` pointed at it
(keyword search, ``CALYPSO_EMBEDDING_MODEL=none``, so the figures are the
streaming path's and not the embedding model's), and this client, which opens
every stream of a level at once (aiohttp, no connection limit) as
``POST /v1/chat/completions`` with ``stream: true`` and reads each to
``[DONE]``. A stream is *completed* when it ends with ``[DONE]`` and no error
chunk; *refused* when it got an HTTP error (counted by status and code: a
retryable 503 is the server saying so cleanly); *broken* when it failed after
starting or the connection broke. Server CPU is the server process's user +
system seconds over the level (from /proc), divided by the streams started;
RSS is the server's resident memory after the level and its peak (VmHWM).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import aiohttp
import httpx

ANSWER = (
    "Refunds are available within 30 days of purchase [Source 1]. "
    "Ask for one through the account page or by writing to support [Source 2], "
    "and keep the receipt, which the refund desk asks for in every case [Source 1]."
)
QUESTION = "How long do I have to ask for a refund?"

# The fake upstream, in its own process so that its CPU is not the server's.
FAKE = """
import sys, time
from calypso.generation.fake_upstream import FakeUpstream, Script
script = Script.from_text({answer!r}, token_size=3, first_token_delay=0.1, token_delay=0.005)
with FakeUpstream(default=script, port={port}):
    print("ready", flush=True)
    sys.stdin.read()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def memory_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def start_fake(port: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", FAKE.format(answer=ANSWER, port=port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise SystemExit("the fake upstream did not start")
    return process


def start_server(
    home: Path, port: int, upstream_port: int, extra_env: dict[str, str], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CALYPSO_HOME": str(home),
        "CALYPSO_LOG_LEVEL": "warning",
        "CALYPSO_LLM_BASE_URL": f"http://127.0.0.1:{upstream_port}/v1",
        "CALYPSO_LLM_MODEL": "fake-model",
        "CALYPSO_EMBEDDING_MODEL": "none",
        **extra_env,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "calypso.cli", "serve", "--demo", "--port", str(port), "--grpc-port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.post(f"http://127.0.0.1:{port}/v1/search", json={"query": QUESTION}, timeout=60).raise_for_status()
            return process
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the server did not start")


async def one_stream(session: aiohttp.ClientSession, url: str) -> str:
    """'completed', 'broken: …', or 'refused: STATUS code' for one streamed answer."""
    body = {"model": "calypso-rag-agent", "stream": True, "messages": [{"role": "user", "content": QUESTION}]}
    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                try:
                    error = (await response.json()).get("error") or {}
                except (aiohttp.ContentTypeError, json.JSONDecodeError):
                    error = {}
                retry = " retry-after" if "Retry-After" in response.headers else ""
                return f"refused: {response.status} {error.get('code')}{retry}"
            done = False
            async for raw in response.content:
                line = raw.decode().strip()
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: {") and '"error"' in line[:20]:
                    return f"broken: error event {json.loads(line[6:])['error'].get('code')}"
            return "completed" if done else "broken: no [DONE]"
    except (TimeoutError, aiohttp.ClientError) as exc:
        return f"broken: {type(exc).__name__}"


async def level(url: str, count: int) -> tuple[collections.Counter[str], float]:
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(one_stream(session, url) for _ in range(count)))
        return collections.Counter(outcomes), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", type=int, nargs="+", default=[200, 1000])
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra server setting, e.g. CALYPSO_LLM_MAX_CONNECTIONS=64",
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    upstream_port, port = free_port(), free_port()
    fake = start_fake(upstream_port)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            log = open(Path(tmp) / "server.log", "w+b")  # warnings per refused stream: counted, not printed
            server = start_server(Path(tmp), port, upstream_port, extra, log)
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            try:
                asyncio.run(level(url, 20))  # warm: bot, index, upstream connections
                print(f"server settings: {extra or 'defaults'}; upstream answer ~0.4 s (60 tokens)")
                print(
                    f"{'streams':>8} {'completed':>9} {'broken':>6} {'refused':>7} {'wall s':>7} "
                    f"{'CPU s/stream':>12} {'RSS MB':>7} {'peak MB':>7}  outcomes"
                )
                per_stream: dict[int, float] = {}
                for count in args.levels:
                    cpu_before = cpu_seconds(server.pid)
                    outcomes, wall = asyncio.run(level(url, count))
                    cpu = (cpu_seconds(server.pid) - cpu_before) / count
                    per_stream[count] = cpu
                    broken = sum(n for k, n in outcomes.items() if k.startswith("broken"))
                    refused = sum(n for k, n in outcomes.items() if k.startswith("refused"))
                    print(
                        f"{count:>8} {outcomes['completed']:>9} {broken:>6} {refused:>7} {wall:>7.1f} "
                        f"{cpu * 1000:>9.2f} ms {memory_mb(server.pid, 'VmRSS'):>7.0f} "
                        f"{memory_mb(server.pid, 'VmHWM'):>7.0f}  {dict(outcomes)}"
                    )
                    time.sleep(1)  # let the server settle (closed sockets, idle connections) between levels
                low, high = min(per_stream), max(per_stream)
                if low != high:
                    print(
                        f"CPU per stream at {high} / at {low}: {per_stream[high] / per_stream[low]:.2f} (target <= 1.5)"
                    )
            finally:
                server.terminate()
                server.wait(timeout=60)
                log.seek(0)
                lines = log.read().decode(errors="replace").splitlines()
                print(f"server log: {len(lines)} lines" + (f", last: {lines[-1][:200]}" if lines else ""))
                log.close()
    finally:
        assert fake.stdin is not None
        fake.stdin.close()
        fake.wait(timeout=30)


if __name__ == "__main__":
    main()
