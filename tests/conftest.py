"""Shared fixtures: an isolated data directory, a knowledge base, a live server on loopback."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.knowledge import KnowledgeBase

REPO = Path(__file__).resolve().parents[1]


def eval_data_dir() -> Path:
    """The shared evaluation data; skip when absent, but fail under CI so CI always runs these tests."""
    path = Path(os.environ.get("CALYPSO_EVAL_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        message = f"evaluation data not found at {path} (set CALYPSO_EVAL_DATA)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def data_dir() -> Path:
    return eval_data_dir()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", crawl_allow_private=True, chunk_size=800, chunk_overlap=120)


@pytest.fixture
def kb(settings: Settings) -> Iterator[KnowledgeBase]:
    knowledge_base = KnowledgeBase(settings)
    yield knowledge_base
    knowledge_base.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """A real uvicorn server in a thread, on a free loopback port."""

    def __init__(self, app, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def server(settings: Settings, kb: KnowledgeBase) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings, kb), _free_port()) as live:
        yield live


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.fixture
def openai_client(server: LiveServer):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
