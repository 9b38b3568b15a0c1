"""Calypso loaded with synthetic passages, and served: the process, its memory and its search latency over HTTP."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from bench.common.paths import REPO
from bench.common.proc import largest_mappings, mem_available_mb, proc_status_mb
from bench.common.stats import percentile
from bench.common.synthetic import synthetic_document
from calypso.config import Settings
from calypso.services import open_services, open_storage
from calypso.store.base import DuplicateContent
from calypso.text.tokenize import analyze_many, encode_terms
from testkit.stores import add_document

PER_DOCUMENT = 100  # passages per synthetic document in build_home
TOKENIZE_BATCH = 4000  # passages analysed at once while loading
NAMESPACE = "general"


def load(settings: Settings, passages: list[str], per_doc: int, limit_s: float, label: str) -> dict:
    """Write the passages into the store in documents of ``per_doc``; stop early on time or memory."""
    storage = open_storage(settings)
    loaded, stopped = 0, ""
    t0 = last_print = time.perf_counter()
    try:
        for first in range(0, len(passages), TOKENIZE_BATCH):
            batch = passages[first : first + TOKENIZE_BATCH]
            terms = [encode_terms(t, language) for language, t in analyze_many(batch)]  # as ingestion stores them
            for offset in range(0, len(batch), per_doc):
                doc, pages, chunks, content = synthetic_document(
                    (first + offset) // per_doc, batch[offset : offset + per_doc], NAMESPACE
                )
                try:
                    add_document(storage, doc, pages, chunks, content, terms[offset : offset + per_doc])
                except DuplicateContent:
                    continue
                loaded += len(chunks)
            now = time.perf_counter()
            if now - last_print > 30:
                last_print = now
                print(f"  [{label}] loaded {loaded:,} passages in {now - t0:.0f} s", flush=True)
            if loaded < len(passages) and now - t0 > limit_s:
                stopped = f"stopped at {loaded:,} passages: --load-limit {limit_s:.0f} s reached"
                break
            if mem_available_mb() < 2048:
                stopped = f"stopped at {loaded:,} passages: less than 2 GB of memory available"
                break
    finally:
        storage.close()
    seconds = time.perf_counter() - t0
    if stopped:
        print(f"  [{label}] {stopped}", flush=True)
    return {"passages": loaded, "load_s": seconds, "stopped": stopped}


def drop_embedding_cache(settings: Settings) -> None:
    """Forget cached query vectors, so the next search of each query runs the model."""
    for path in settings.home.glob("embedding-cache.sqlite*"):
        path.unlink()


class SearchClient:
    """``POST /v1/search`` over one keep-alive connection of the standard library's ``http.client``: the timed
    client of the benches. httpx (the OpenAI SDK's transport) costs 0.3-0.4 ms more a request in its own code
    (bench/http_clients.py), which is the client's time, not the server's request path."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=120)

    def search(self, body: dict) -> bytes:
        self.connection.request(
            "POST", "/v1/search", body=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )
        response = self.connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise SystemExit(f"POST /v1/search answered {response.status}: {data[:500]!r}")
        return data

    def close(self) -> None:
        self.connection.close()


class Server:
    """``calypso serve`` in its own process on a database; ready once a search answers."""

    def __init__(self, settings: Settings, port: int, probe: str, wait_for: str | None = None) -> None:
        """``wait_for``: also wait until the server logs a line matching it (a regular expression; INFO logs on,
        read by a thread)."""
        self.wait_for = wait_for
        self.logged = threading.Event()
        self.log_tail: list[str] = []
        self.wait_s: float | None = None
        env = {
            **os.environ,
            "CALYPSO_HOME": str(settings.home),
            "CALYPSO_DATABASE_URL": settings.database_url,
            "CALYPSO_EMBEDDING_MODEL": settings.embedding_model,
            "CALYPSO_LOG_LEVEL": "info" if wait_for else "warning",
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        }
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        t0 = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "calypso.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if wait_for:
            threading.Thread(target=self._read_log, daemon=True).start()
        try:
            self._wait(t0, probe)
            if wait_for:
                if not self.logged.wait(1800):
                    raise SystemExit(f"calypso serve never logged {wait_for!r}: {self.log_tail[-20:]}")
                self.wait_s = time.perf_counter() - t0
        except BaseException:
            self.stop()
            raise
        self.ready_s = time.perf_counter() - t0

    def _wait(self, t0: float, probe: str) -> None:
        while True:
            if self.process.poll() is not None:
                tail = "\n".join(self.log_tail[-20:]) if self.wait_for else self.process.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
                raise SystemExit(f"calypso serve exited: {tail}")
            if time.perf_counter() - t0 > 1800:
                raise SystemExit("calypso serve did not answer within 30 minutes")
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        httpx.post(self.url + "/v1/search", json={"query": probe}, timeout=1800).raise_for_status()

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:  # drained to the end: a full pipe would stall the server
            line = raw.decode(errors="replace").rstrip()
            self.log_tail = [*self.log_tail[-50:], line]
            if self.wait_for and re.search(self.wait_for, line):
                self.logged.set()

    def search_totals(self) -> tuple[float, float]:
        """(seconds, requests) the server itself measured for ``POST /v1/search`` so far (its request-duration
        histogram): the mean between two readings, against the client's, is what the client, the connection
        and uvicorn's parsing add."""
        text = httpx.get(self.url + "/metrics", timeout=30).text
        found = []
        for kind in ("sum", "count"):
            match = re.search(
                rf'^calypso_http_request_duration_seconds_{kind}{{method="POST",route="/v1/search"}} (\S+)$', text, re.M
            )
            found.append(float(match.group(1)) if match else float("nan"))
        return found[0], found[1]

    def memory(self) -> tuple[float, float]:
        return proc_status_mb(self.process.pid, "VmRSS"), proc_status_mb(self.process.pid, "VmHWM")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def over_http(
    settings: Settings, queries: list[str], port: int, wait_for: str | None = None, show_mappings: bool = False
) -> dict:
    server = Server(settings, port, queries[0], wait_for)
    try:
        times = []
        client = SearchClient(server.url)
        try:
            for q in queries[:20]:
                client.search({"query": q, "max_num_results": 10})
            seconds, requests = server.search_totals()
            for q in queries:
                t = time.perf_counter()
                client.search({"query": q, "max_num_results": 10})
                times.append((time.perf_counter() - t) * 1000)
        finally:
            client.close()
        seconds_after, requests_after = server.search_totals()
        server_ms = 1000 * (seconds_after - seconds) / (requests_after - requests)
        rss, hwm = server.memory()
        anon = proc_status_mb(server.process.pid, "RssAnon")  # anonymous memory
        file_backed = proc_status_mb(server.process.pid, "RssFile")  # mapped files: page cache the kernel can reclaim
        if show_mappings:
            for mapping, resident, anonymous in largest_mappings(server.process.pid):
                print(f"    {resident:7.1f} MB resident ({anonymous:6.1f} anonymous)  {mapping}", flush=True)
    finally:
        server.stop()
    return {
        "ready_s": server.ready_s,
        "waited_s": server.wait_s,
        "http_p50": percentile(times, 50),
        "http_p99": percentile(times, 99),
        "http_mean": sum(times) / len(times),
        "server_mean": server_ms,
        "server_rss_mb": rss,
        "server_rss_anon_mb": anon,
        "server_rss_file_mb": file_backed,
        "server_hwm_mb": hwm,
    }


def build_home(home: Path, passages: list[str], database_url: str = "") -> None:
    services = open_services(Settings(home=home, database_url=database_url))
    for first in range(0, len(passages), PER_DOCUMENT):
        batch = passages[first : first + PER_DOCUMENT]
        doc, pages, chunks, content = synthetic_document(first // PER_DOCUMENT, batch)
        terms = analyze_many(c.text for c in chunks)  # stored as ingestion stores them
        stored = [encode_terms(t, language) for language, t in terms]
        add_document(services.storage, doc, pages, chunks, content, stored)
    services.close()
