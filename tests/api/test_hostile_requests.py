"""Malformed and hostile requests are 4xx in OpenAI's shape, never a 500, and store nothing."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from tests_support import WAIT

from calypso.api.app import create_app
from calypso.config import Settings
from testkit.live_server import LiveServer, free_port


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
    (
        "/v1/responses",
        {"input": "refund", "tools": [{"type": "file_search", "vector_store_ids": ["general"], "filters": "x"}]},
        "tools[0].filters",
    ),
    (
        "/v1/responses",
        {
            "input": "refund",
            "tools": [
                {"type": "file_search", "vector_store_ids": ["general"], "filters": {"type": "or", "filters": [5]}}
            ],
        },
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
    """A real server on loopback: for the tests that check the connection after a hostile body."""
    settings = Settings(home=tmp_path / "home")
    with LiveServer(create_app(settings), free_port()) as server:
        yield server


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    """The app in process: the rest are plain requests and their answers."""
    with TestClient(create_app(Settings(home=tmp_path / "home")), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize(("path", "body", "param"), CASES)
def test_malformed_json_fields_are_400(client: httpx.Client, path: str, body: dict, param: str | None) -> None:
    response = client.post(path, json=body)
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


def test_upload_metadata_too_deep_or_too_big_is_400(client: httpx.Client) -> None:
    for raw in ("[" * 3000 + "]" * 3000, '{"a": ' + "1" * 5001 + "}", json.dumps(_nested(100))):
        response = client.post("/v1/documents", files={"file": ("m.txt", b"hello there")}, data={"metadata": raw})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"].startswith("metadata")
    assert client.get("/v1/documents").json()["data"] == []


def test_chunk_cursor_beyond_64_bits_is_400(client: httpx.Client) -> None:
    doc = client.post("/v1/documents", files={"file": ("a.txt", b"Some text here.")}, params=WAIT).json()
    for after in ("99999999999999999999999", "-99999999999999999999"):
        response = client.get(f"/v1/documents/{doc['id']}/chunks", params={"after": after})
        assert response.status_code == 400 and response.json()["error"]["param"] == "after", response.text


def test_non_ascii_authorization_header_is_401(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", auth="on")
    with LiveServer(create_app(settings), free_port()) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port)
        conn.putrequest("GET", "/v1/models")
        conn.putheader("Authorization", "Bearer k\xe9y-\xff".encode("latin-1"))
        conn.endheaders()
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 401 and body["error"]["type"] == "invalid_request_error"


def test_history_has_a_limit_and_auto_truncation_drops_the_oldest_turns(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", max_history_chars=3000)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        url = "/v1/responses"
        first = client.post(url, json={"input": "alpha " * 300}).json()  # 1,800 characters
        follow = {"input": "beta " * 300, "previous_response_id": first["id"]}  # 1,800 more: over 3,000
        refused = client.post(url, json=follow)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "context_length_exceeded"
        kept = client.post(url, json={**follow, "truncation": "auto"})
        assert kept.status_code == 200, kept.text
        stored = client.get(f"{url}/{kept.json()['id']}")
        assert stored.status_code == 200
        too_long = client.post(url, json={"input": "gamma " * 1000, "truncation": "auto"})
        assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"


def test_chat_history_over_the_limit_is_400_and_conversations_show_only_the_newest_turns(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", max_history_chars=3000)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        long = [{"role": "user", "content": "alpha " * 300}, {"role": "assistant", "content": "beta " * 300}]
        body = {"model": "calypso-rag-agent", "messages": [*long, {"role": "user", "content": "gamma " * 100}]}
        refused = client.post("/v1/chat/completions", json=body)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "context_length_exceeded" and error["param"] == "messages"

        conversation = client.post("/v1/conversations", json={}).json()["id"]
        url = f"/v1/conversations/{conversation}/messages"
        for word in ("alpha", "beta", "gamma", "delta"):  # four turns of 1,200+ characters each: over 3,000
            turn = client.post(url, json={"content": f"{word} " * 200})
            assert turn.status_code == 200, turn.text
        stored = client.get(f"/v1/conversations/{conversation}").json()["messages"]
        assert len(stored) == 8  # every turn is kept; only the model's view is trimmed
