"""available / hidden / missing / none, on every answering endpoint; hidden leaks nothing."""

from __future__ import annotations

import json

import httpx
import pytest

from calypso.demo import ingest_demo

QUESTION = "How many days do customers have to request a full refund?"
NONSENSE = "xylophone zebra quasar"
LEAKS = ("refund_policy_2026.md", "file-", "/v1/files/", "file_citation", "url_citation", "[1]", "[Source", "Sources:")


@pytest.fixture
def bots(kb, request: pytest.FixtureRequest) -> httpx.Client:
    """A client once the demo documents and three bots are in: over a real server on loopback for the
    streamed cases (SSE), the app in process for the others."""
    callspec = getattr(request.node, "callspec", None)
    http: httpx.Client = request.getfixturevalue("http" if callspec and callspec.params.get("stream") else "api")
    ingest_demo(kb)
    for bot in (
        {"id": "hidden-bot", "sources_policy": "hidden"},
        {"id": "plain-bot", "namespace": None},
        {"id": "quiet-bot", "include_citations": False},
    ):
        assert http.post("/v1/bots", json=bot).status_code == 201
    return http


def _responses(http: httpx.Client, model: str, question: str, stream: bool = False) -> tuple[str, dict]:
    body = {"model": model, "input": question, "include": ["inline_citations"]}
    if not stream:
        reply = http.post("/v1/responses", json=body).json()
        return reply["metadata"]["_aicore"]["grounded_sources_state"], reply
    final = None
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as response:
        raw = "".join(line + "\n" for line in response.iter_lines())
    for line in raw.splitlines():
        if line.startswith("data: ") and '"response.completed"' in line:
            final = json.loads(line[6:])["response"]
    return final["metadata"]["_aicore"]["grounded_sources_state"], {"final": final, "raw": raw}


def _chat(http: httpx.Client, model: str, question: str, stream: bool = False) -> tuple[str, dict]:
    body = {"model": model, "messages": [{"role": "user", "content": question}]}
    if not stream:
        reply = http.post("/v1/chat/completions", json=body).json()
        return reply["choices"][0]["message"]["_aicore"]["grounded_sources_state"], reply
    with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as response:
        raw = "".join(line + "\n" for line in response.iter_lines())
    chunks = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
    finish = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    return finish["choices"][0]["delta"]["_aicore"]["grounded_sources_state"], {"raw": raw, "content": content}


def _conversation(http: httpx.Client, model: str, question: str, stream: bool = False) -> tuple[str, dict]:
    conversation = http.post("/v1/conversations", json={"model": model}).json()
    turn = http.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": question}).json()
    stored = http.get(f"/v1/conversations/{conversation['id']}").json()
    assert stored["messages"][-1]["_aicore"] == turn["message"]["_aicore"]
    return turn["message"]["_aicore"]["grounded_sources_state"], {"turn": turn, "stored": stored}


ENDPOINTS = [
    pytest.param(_responses, False, id="responses"),
    pytest.param(_responses, True, id="responses-stream"),
    pytest.param(_chat, False, id="chat"),
    pytest.param(_chat, True, id="chat-stream"),
    pytest.param(_conversation, False, id="conversation"),
]


@pytest.mark.parametrize(("endpoint", "stream"), ENDPOINTS)
def test_available_missing_none(bots, endpoint, stream) -> None:
    state, body = endpoint(bots, "calypso-rag-agent", QUESTION, stream)
    assert state == "available"
    assert "refund_policy_2026.md" in json.dumps(body)
    assert endpoint(bots, "calypso-rag-agent", NONSENSE, stream)[0] == "missing"
    assert endpoint(bots, "plain-bot", QUESTION, stream)[0] == "none"


@pytest.mark.parametrize(("endpoint", "stream"), ENDPOINTS)
def test_hidden_bot_leaks_no_source(bots, endpoint, stream) -> None:
    state, body = endpoint(bots, "hidden-bot", QUESTION, stream)
    assert state == "hidden"
    dumped = json.dumps(body)
    assert "30 days" in dumped  # the answer itself is there
    for leak in LEAKS:
        assert leak not in dumped, leak


@pytest.mark.parametrize(("endpoint", "stream"), ENDPOINTS)
def test_workspace_policy_hides_sources_for_every_bot(bots, endpoint, stream) -> None:
    policy = bots.put("/v1/admin/workspaces/default/policy", json={"sources_policy": "hidden"})
    assert policy.status_code == 200, policy.text
    state, body = endpoint(bots, "calypso-rag-agent", QUESTION, stream)
    assert state == "hidden"
    for leak in LEAKS:
        assert leak not in json.dumps(body), leak
    bots.put("/v1/admin/workspaces/default/policy", json={"sources_policy": "visible"})
    assert endpoint(bots, "calypso-rag-agent", QUESTION, stream)[0] == "available"


@pytest.mark.parametrize(("endpoint", "stream"), ENDPOINTS)
def test_citations_disabled_reports_hidden(bots, endpoint, stream) -> None:
    # include_citations false: the answer used sources but shows none, so they are not "available".
    state, body = endpoint(bots, "quiet-bot", QUESTION, stream)
    assert state == "hidden"
    assert "30 days" in json.dumps(body)


def test_a_bot_without_knowledge_base_says_what_is_true(bots) -> None:
    # The built-in answerer only quotes sources; without a knowledge base nothing was searched, so it
    # must not claim it "could not find anything in the knowledge base".
    reply = bots.post("/v1/responses", json={"model": "plain-bot", "input": QUESTION}).json()
    text = next(o for o in reply["output"] if o["type"] == "message")["content"][0]["text"]
    assert "could not find" not in text and "no knowledge base" in text
    assert reply["metadata"]["_aicore"]["retrieval_status"] == "not_run"
    chat = bots.post(
        "/v1/chat/completions", json={"model": "plain-bot", "messages": [{"role": "user", "content": QUESTION}]}
    )
    assert "no knowledge base" in chat.json()["choices"][0]["message"]["content"]
