"""Shared fixtures: an isolated data directory, a knowledge base, a live server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests_support import LiveServer, eval_data_dir, free_port

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.services import Services, open_services
from calypso.services.documents import DocumentService


@pytest.fixture
def data_dir() -> Path:
    return eval_data_dir()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", crawl_allow_private=True, chunk_size=800, chunk_overlap=120)


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    opened = open_services(settings)
    yield opened
    opened.close()


@pytest.fixture
def kb(services: Services) -> DocumentService:
    return services.documents


@pytest.fixture
def server(settings: Settings, services: Services) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings, services), free_port()) as live:
        yield live


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.fixture
def openai_client(server: LiveServer):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
