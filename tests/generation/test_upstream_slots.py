"""Upstream requests wait in our own slots, never in httpx's pool (encode/httpcore#1035), and a stream
that cannot get a slot hears a retryable 503 (HTTP) or an error event (a stream already started)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from calypso.generation.base import Finish, GenerationRequest
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.generation.upstream import UpstreamConfig, UpstreamGenerator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testkit.live_server import LiveServer, free_port

MESSAGES = [{"role": "user", "content": "Refunds?"}]
SLOW = Script(tokens=["Refunds take thirty days. "] * 40, token_delay=0.05)  # holds its slot for two seconds


def test_queued_requests_wait_in_our_slots_not_in_the_httpx_pool(fake: FakeUpstream) -> None:
    """Eight streams over two slots: httpx's pool never holds more requests than it has connections."""
    fake.script(*[Script(tokens=["tok"] * 10, token_delay=0.02) for _ in range(8)])
    config = UpstreamConfig(base_url=fake.base_url, max_connections=2, pool_timeout_seconds=30)
    # The generator's client, handed in so the test can watch its pool: as many connections as the generator makes.
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=config.max_connections))
    generator = UpstreamGenerator(config, client=client)
    pool_sizes: list[int] = []

    async def one() -> list[Any]:
        return [event async for event in generator.stream(GenerationRequest(messages=MESSAGES))]

    async def watch(tasks: list[asyncio.Task[list[Any]]]) -> None:
        while not all(task.done() for task in tasks):
            pool = client._transport._pool  # type: ignore[attr-defined]  # httpx's, not ours
            pool_sizes.append(len(pool._requests))  # requests httpcore holds: active plus queued
            await asyncio.sleep(0.005)

    async def run() -> list[list[Any]]:
        tasks = [asyncio.create_task(one()) for _ in range(8)]
        await watch(tasks)
        await client.aclose()
        return [task.result() for task in tasks]

    results = asyncio.run(run())
    assert all(isinstance(events[-1], Finish) for events in results)
    assert pool_sizes and max(pool_sizes) <= 2  # with httpx queueing it held all eight


@pytest.fixture(scope="module")
def busy_server(tmp_path_factory: pytest.TempPathFactory, server: FakeUpstream) -> Iterator[LiveServer]:
    """A server with one upstream slot and a short wait for it."""
    from calypso.api.app import create_app
    from calypso.config import Settings
    from calypso.demo import ingest_demo
    from calypso.services import open_services

    settings = Settings(
        home=tmp_path_factory.mktemp("busy"),
        generator="upstream",
        llm_base_url=server.base_url,
        llm_model="fake-model",
        embedding_model="none",
        llm_max_connections=1,
        llm_pool_timeout_seconds=0.2,
    )
    services = open_services(settings)
    ingest_demo(services.ingestion)
    try:
        with LiveServer(create_app(settings, services), free_port()) as live:
            yield live
    finally:
        services.close()


def _holding_the_slot(client: httpx.Client) -> Iterator[None]:
    """Start one slow chat stream and read up to its first content: from then on it holds the only slot."""
    body = {"stream": True, "messages": MESSAGES}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        lines = response.iter_lines()  # kept: a dropped iterator closes the connection, freeing the slot
        for line in lines:
            if '"content":"' in line and "Refunds" in line:
                break
        yield


def test_a_chat_stream_without_a_slot_is_a_retryable_503(fake: FakeUpstream, busy_server: LiveServer) -> None:
    fake.script(SLOW)
    with httpx.Client(base_url=busy_server.url, timeout=30) as client:
        for _ in _holding_the_slot(client):
            response = client.post("/v1/chat/completions", json={"stream": True, "messages": MESSAGES})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"  # OpenAI's SDKs retry a 503 after Retry-After
    error = response.json()["error"]
    assert error["code"] == "too_many_concurrent_requests" and error["type"] == "upstream_error"
    assert "CALYPSO_LLM_MAX_CONNECTIONS" in error["message"]


def test_a_responses_stream_without_a_slot_ends_with_an_error_event(
    fake: FakeUpstream, busy_server: LiveServer
) -> None:
    fake.script(SLOW)
    with httpx.Client(base_url=busy_server.url, timeout=30) as client:
        for _ in _holding_the_slot(client):
            with client.stream("POST", "/v1/responses", json={"stream": True, "input": "Refunds?"}) as response:
                events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
    error = next(event for event in events if event["type"] == "error")
    assert error["code"] == "too_many_concurrent_requests"
    assert events[-1]["type"] == "response.failed"
