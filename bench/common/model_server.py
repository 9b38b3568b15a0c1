"""A real model served for Calypso, and Calypso served over it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.common.paths import REPO, data_dir
from calypso.config import Settings
from calypso.services import open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

TOOL = REPO.parent / "shared" / "tools" / "real-llm"


# ---------------------------------------------------------------------------------------------- the model
class ModelServer:
    """llama.cpp's server through the real-llm tool, in its own venv and process group."""

    def __init__(self, model: str, python: str, threads: int) -> None:
        gguf = subprocess.run(
            [str(TOOL / "get-model.sh"), model], check=True, capture_output=True, text=True
        ).stdout.strip()
        self.process = subprocess.Popen(
            [python, str(TOOL / "serve.py"), gguf, str(threads), "8192"],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise SystemExit(f"the model server did not start: {self.base_url!r}")

    def close(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(30)


def prepare_home(home: Path, names: list[str]) -> None:
    """The knowledge bases, ingested and embedded as the server would, one namespace per set."""
    services = open_services(Settings(home=home))
    try:
        root = data_dir()
        if {"alps", "unanswerable", "xling-es"} & set(names):
            pdf = root / "alps-wiki-qa" / "alps_wiki.pdf"
            services.ingestion.ingest(Upload(pdf.read_bytes(), pdf.name, "alps"))
        for name in ("zh", "de"):
            if name in names or f"xling-{name}" in names:
                folder = root / "multilingual" / ("cmrc2018-zh" if name == "zh" else "xquad-de")
                for line in (folder / "corpus.jsonl").open(encoding="utf-8"):
                    doc = json.loads(line)
                    body = f"{doc['title']}\n\n{doc['text']}\n" if doc.get("title") else f"{doc['text']}\n"
                    services.ingestion.ingest(Upload(body.encode("utf-8"), f"{doc['_id']}.txt", name))
        embed_all(services.vectors)
    finally:
        services.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Calypso:
    """``calypso serve`` in its own process, generating through ``upstream``."""

    def __init__(self, home: Path, upstream: str, max_tokens: int) -> None:
        self.port = free_port()
        env = {
            **os.environ,
            "CALYPSO_HOME": str(home),
            "CALYPSO_LLM_BASE_URL": upstream,
            "CALYPSO_LLM_MODEL": "model",
            "CALYPSO_GENERATOR": "upstream",
            "CALYPSO_LLM_TIMEOUT_SECONDS": "600",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "calypso", "serve", "--port", str(self.port), "--grpc-port", "0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(home / "serve.log", "w"),  # noqa: SIM115
            start_new_session=True,
        )
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                raise SystemExit(f"calypso serve exited: see {home / 'serve.log'}")
            time.sleep(0.5)
        # Warm up (the embedding model loads on the first search), so no answer's time carries the cold start.
        for name in ("alps", "zh", "de"):
            httpx.post(self.base_url + "/search", json={"query": "warm up", "namespace": name}, timeout=300)
        for name in ("alps", "zh", "de"):
            bot = {
                "id": name,
                "namespace": name,
                "generator": "upstream",
                "generator_options": {"max_tokens": max_tokens, "temperature": 0},
            }
            created = httpx.post(self.base_url + "/bots", json=bot, timeout=30)
            if created.status_code == 409:  # a reused home keeps its bots: bring them up to date
                bot.pop("id")
                created = httpx.patch(f"{self.base_url}/bots/{name}", json=bot, timeout=30)
            created.raise_for_status()

    def close(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(30)
