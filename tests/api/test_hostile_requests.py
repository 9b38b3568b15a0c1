"""Malformed and hostile requests are 4xx in OpenAI's shape, never a 500, and store nothing."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import httpx
import pytest
from tests_support import WAIT, LiveServer, free_port

from calypso.api.app import create_app
from calypso.config import Settings


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


TEXT_FIVE = [{"type": "input_text", "text": 5}]
CASES = [
    ("/v1/responses", {"input": [{"role": "user", "content": TEXT_FIVE}]}, "input[0].content[0].text"),
    ("/v1/responses", {"input": [{"role": "user", "content": TEXT_FIVE}], "stream": True}, "input[0].content[0].text"),
    (
        "/v1/chat/completions",
        {"model": "calypso-rag-agent", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
        "messages[0].content[0].text",
    ),
    ("/v1/responses", {"input": "refund", "tools": [{"type": "file_search", "filters": "x"}]}, "tools[0].filters"),
    (
        "/v1/responses",
        {"input": "refund", "tools": [{"type": "file_search", "filters": {"type": "or", "filters": [5]}}]},
        "tools[0].filters.filters[0]",
    ),
    ("/v1/search", {"query": "refund", "document_ids": ["x"] * 5000}, "document_ids"),
    ("/v1/bots", {"id": "deep", "generator_options": {"x": _nested(300)}}, None),
    ("/v1/responses", {"input": "refund", "tool_choice": "bogus"}, "tool_choice"),
    ("/v1/responses", {"input": "refund", "stream": "yes"}, "stream"),
    ("/v1/chat/completions", {"model": "calypso-rag-agent", "messages": [], "stream": "yes"}, "stream"),
    ("/v1/responses", {"input": "refund", "max_output_tokens": 10**30}, None),
    ("/v1/responses", {"input": "refund", "max_output_tokens": 10**15}, "max_output_tokens"),
    ("/v1/responses", {"input": "refund", "metadata": {"_aicore": 5}}, "metadata"),
]


@pytest.fixture
def live(tmp_path: Path):
    settings = Settings(home=tmp_path / "home")
    with LiveServer(create_app(settings), free_port()) as server:
        yield server


@pytest.mark.parametrize(("path", "body", "param"), CASES)
def test_malformed_json_fields_are_400(live: LiveServer, path: str, body: dict, param: str | None) -> None:
    response = httpx.post(f"{live.url}{path}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param


@pytest.mark.parametrize(
    ("path", "raw", "param"),
    [
        ("/v1/responses", b'{"input": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", None),
        ("/v1/responses", b'{"input": "refund \\ud800 policy"}', "input"),
        ("/v1/chat/completions", b'{"model": "m", "messages": [{"role": "user", "content": "a \\udfff"}]}', None),
        ("/v1/conversations", b'{"metadata": {"k": "\\ud83d"}}', "metadata.k"),
        ("/v1/search", b'{"query": "x", "max_num_results": ' + b"9" * 5001 + b"}", None),
        ("/v1/responses", b'{"input": "x", "temperature": NaN}', None),
    ],
)
def test_json_the_server_cannot_keep_is_400(live: LiveServer, path: str, raw: bytes, param: str | None) -> None:
    response = httpx.post(f"{live.url}{path}", content=raw, headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] in ("invalid_value", "invalid_json")
    if param is not None:
        assert response.json()["error"]["param"] == param
    # Nothing was stored, and the connection is still usable.
    assert httpx.get(f"{live.url}/v1/conversations", timeout=10).json()["data"] == []


def test_upload_metadata_too_deep_or_too_big_is_400(live: LiveServer) -> None:
    for raw in ("[" * 3000 + "]" * 3000, '{"a": ' + "1" * 5001 + "}", json.dumps(_nested(100))):
        response = httpx.post(
            f"{live.url}/v1/documents", files={"file": ("m.txt", b"hello there")}, data={"metadata": raw}, timeout=30
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"].startswith("metadata")
    assert httpx.get(f"{live.url}/v1/documents", timeout=10).json()["data"] == []


def test_chunk_cursor_beyond_64_bits_is_400(live: LiveServer) -> None:
    doc = httpx.post(f"{live.url}/v1/documents", files={"file": ("a.txt", b"Some text here.")}, params=WAIT).json()
    for after in ("99999999999999999999999", "-99999999999999999999"):
        response = httpx.get(f"{live.url}/v1/documents/{doc['id']}/chunks", params={"after": after})
        assert response.status_code == 400 and response.json()["error"]["param"] == "after", response.text


def test_non_ascii_authorization_header_is_401(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", auth="on")
    with LiveServer(create_app(settings), free_port()) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.putrequest("GET", "/v1/models")
        conn.putheader("Authorization", "Bearer k\xe9y-\xff".encode("latin-1"))
        conn.endheaders()
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 401 and body["error"]["type"] == "authentication_error"


def test_history_has_a_limit_and_auto_truncation_drops_the_oldest_turns(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", max_history_chars=3000)
    with LiveServer(create_app(settings), free_port()) as server:
        url = f"{server.url}/v1/responses"
        first = httpx.post(url, json={"input": "alpha " * 300}, timeout=30).json()  # 1,800 characters
        follow = {"input": "beta " * 300, "previous_response_id": first["id"]}  # 1,800 more: over 3,000
        refused = httpx.post(url, json=follow, timeout=30)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "context_length_exceeded"
        kept = httpx.post(url, json={**follow, "truncation": "auto"}, timeout=30)
        assert kept.status_code == 200, kept.text
        stored = httpx.get(f"{url}/{kept.json()['id']}", timeout=10)
        assert stored.status_code == 200
        too_long = httpx.post(url, json={"input": "gamma " * 1000, "truncation": "auto"}, timeout=30)
        assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"


def test_chat_history_over_the_limit_is_400_and_conversations_show_only_the_newest_turns(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", max_history_chars=3000)
    with LiveServer(create_app(settings), free_port()) as server:
        long = [{"role": "user", "content": "alpha " * 300}, {"role": "assistant", "content": "beta " * 300}]
        body = {"model": "calypso-rag-agent", "messages": [*long, {"role": "user", "content": "gamma " * 100}]}
        refused = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=30)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "context_length_exceeded" and error["param"] == "messages"

        conversation = httpx.post(f"{server.url}/v1/conversations", json={}, timeout=10).json()["id"]
        url = f"{server.url}/v1/conversations/{conversation}/messages"
        for word in ("alpha", "beta", "gamma", "delta"):  # four turns of 1,200+ characters each: over 3,000
            turn = httpx.post(url, json={"content": f"{word} " * 200}, timeout=30)
            assert turn.status_code == 200, turn.text
        stored = httpx.get(f"{server.url}/v1/conversations/{conversation}", timeout=10).json()["messages"]
        assert len(stored) == 8  # every turn is kept; only the model's view is trimmed
