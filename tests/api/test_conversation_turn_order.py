"""Turns on one conversation are taken one at a time (issue 25): two concurrent ``POST /v1/responses`` with
the same ``conversation`` (or one of them a seed-004 message) over a real server and a slow upstream both
store every item, each turn's input then its output, and the later turn is answered with the earlier in
its history."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from calypso.api.app import create_app
from calypso.generation.fake_upstream import Script
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port

QUESTIONS = ("How many days do customers have to request a full refund?", "Can I return a gift card?")
SLOW = 0.5  # seconds before the upstream's first token: long enough for both requests to be in flight


def _text(item: dict[str, Any]) -> str:
    content = item.get("content") or []
    return "".join(part.get("text", "") for part in content) if isinstance(content, list) else str(content)


def _concurrently(*calls) -> list[httpx.Response]:
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def _streamed(http: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as response:
        response.read()
    return response


def _turns(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The items cut where each user message starts a turn."""
    turns: list[list[dict[str, Any]]] = []
    for item in items:
        if item.get("type") == "message" and item.get("role") == "user":
            turns.append([])
        turns[-1].append(item)
    return turns


@pytest.mark.parametrize("second_streams", [False, True], ids=["both-json", "one-streamed"])
def test_two_concurrent_responses_turns_on_one_conversation_neither_interleave_nor_lose_a_turn(
    agent_upstream, server, http: httpx.Client, second_streams: bool
) -> None:
    agent_upstream.script(Script.agent(first_token_delay=SLOW), Script.agent(first_token_delay=SLOW))
    conversation = http.post("/v1/conversations", json={}).json()["id"]
    bodies = [{"model": "calypso-rag-agent", "conversation": conversation, "input": q} for q in QUESTIONS]
    with httpx.Client(base_url=server.url, timeout=60) as other:
        second = (
            (lambda: _streamed(other, bodies[1]))
            if second_streams
            else (lambda: other.post("/v1/responses", json=bodies[1]))
        )
        answers = _concurrently(lambda: http.post("/v1/responses", json=bodies[0]), second)
    assert [a.status_code for a in answers] == [200, 200], [a.text[:300] for a in answers]
    if second_streams:
        assert "event: response.completed" in answers[1].text

    items = http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc", "limit": 100}).json()["data"]
    turns = _turns(items)
    assert [_text(turn[0]) for turn in turns] in ([*QUESTIONS], [*reversed(QUESTIONS)])
    for turn in turns:  # each turn: its user message, then its output, ending with the assistant's answer
        assert [i["type"] for i in turn][-1] == "message" and turn[-1]["role"] == "assistant"
        assert all(i.get("role") != "user" for i in turn[1:])
    # The turn answered second was asked with the first turn in its history: the upstream saw its question.
    first_asked = _text(turns[0][0])
    later = json.dumps(agent_upstream.requests[-1]["messages"])
    assert first_asked in later and len(agent_upstream.requests) == 2


def test_a_responses_turn_and_a_seed_004_message_share_the_conversation_lock(agent_upstream, server, http) -> None:
    agent_upstream.script(Script.agent(first_token_delay=SLOW), Script.agent(first_token_delay=SLOW))
    conversation = http.post("/v1/conversations", json={}).json()["id"]
    body = {"model": "calypso-rag-agent", "conversation": conversation, "input": QUESTIONS[0]}
    with httpx.Client(base_url=server.url, timeout=60) as other:
        answers = _concurrently(
            lambda: http.post("/v1/responses", json=body),
            lambda: other.post(f"/v1/conversations/{conversation}/messages", json={"content": QUESTIONS[1]}),
        )
    assert [a.status_code for a in answers] == [200, 200], [a.text[:300] for a in answers]
    messages = http.get(f"/v1/conversations/{conversation}").json()["messages"]
    # Seed 004's view: the text messages (the Responses turn's file_search_call is an item without text).
    roles = [m["role"] for m in messages if m["content"]]
    assert roles == ["user", "assistant", "user", "assistant"], messages
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert sorted(users) == sorted(QUESTIONS)
    assert users[0] in json.dumps(agent_upstream.requests[-1]["messages"])


def test_turns_sent_to_two_server_processes_on_one_postgres_database_are_ordered(
    backend, agent_upstream, settings, server, http
) -> None:
    """Two servers with their own services (as two `calypso serve` processes would be) over one database:
    their in-process locks know nothing of each other, the conversation's turn lease orders the turns."""
    if backend != "postgres":
        pytest.skip("SQLite has one process per data directory")
    agent_upstream.script(Script.agent(first_token_delay=SLOW), Script.agent(first_token_delay=SLOW))
    other_settings = settings.model_copy(update={"home": settings.home.parent / "other-home"})
    other_services = open_services(other_settings)
    try:
        with LiveServer(create_app(other_settings, other_services), free_port()) as other_server:
            conversation = http.post("/v1/conversations", json={}).json()["id"]
            bodies = [{"model": "calypso-rag-agent", "conversation": conversation, "input": q} for q in QUESTIONS]
            with httpx.Client(base_url=other_server.url, timeout=60) as other:
                answers = _concurrently(
                    lambda: http.post("/v1/responses", json=bodies[0]),
                    lambda: other.post("/v1/responses", json=bodies[1]),
                )
    finally:
        other_services.close()
    assert [a.status_code for a in answers] == [200, 200], [a.text[:300] for a in answers]
    items = http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc", "limit": 100}).json()["data"]
    turns = _turns(items)
    assert sorted(_text(turn[0]) for turn in turns) == sorted(QUESTIONS)
    assert _text(turns[0][0]) in json.dumps(agent_upstream.requests[-1]["messages"])
