"""One error shape and one code per fault on every POST endpoint (in the spirit of datasette's test_error_shape.py).

Each case sends one fault to one endpoint over real HTTP and pins the status,
``type``, ``code`` and ``param``, and that the body is exactly
``{"error": {"message", "type", "param", "code"}}``. Routes that take a pydantic
body parameter and routes that call ``parse_body`` must not be told apart.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path

import httpx
import pytest

from calypso.api.app import create_app
from calypso.bots import Bot
from calypso.config import Settings
from calypso.generation import registry
from calypso.generation.base import Finish, GenerationEvent, GenerationRequest, Generator, TextDelta
from calypso.scope import DEFAULT_WORKSPACE
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port

CHAT = {"model": "calypso-rag-agent", "messages": [{"role": "user", "content": "hi"}]}
MALFORMED = b'{"model": "calypso-rag-agent", "messages": ['
NOT_AN_OBJECT = b'[{"role": "user", "content": "hi"}]'

# (endpoint, fault, body, code, param): the body is JSON unless it is bytes; status is 400 throughout.
JSON_CASES = [
    # POST /v1/responses: a pydantic body parameter (RequestValidationError)
    ("/v1/responses", "unknown field", {"input": "hi", "bogus": 1}, "unknown_parameter", "bogus"),
    ("/v1/responses", "missing field", {"model": "calypso-rag-agent"}, "missing_required_parameter", "input"),
    ("/v1/responses", "wrong type", {"input": 5}, "invalid_type", "input"),
    ("/v1/responses", "wrong type in a list", {"input": [5]}, "invalid_type", "input[0]"),
    ("/v1/responses", "bad enum", {"input": "hi", "truncation": "sometimes"}, "invalid_value", "truncation"),
    ("/v1/responses", "out of range", {"input": "hi", "temperature": 3}, "decimal_above_max_value", "temperature"),
    ("/v1/responses", "malformed JSON", MALFORMED, "invalid_json", None),
    ("/v1/responses", "not an object", NOT_AN_OBJECT, "invalid_type", None),
    # POST /v1/chat/completions: parse_body
    ("/v1/chat/completions", "unknown field", {**CHAT, "bogus": 1}, "unknown_parameter", "bogus"),
    (
        "/v1/chat/completions",
        "unknown nested field",
        {**CHAT, "stream": True, "stream_options": {"bogus": True}},
        "unknown_parameter",
        "stream_options.bogus",
    ),
    ("/v1/chat/completions", "missing field", {"model": "x"}, "missing_required_parameter", "messages"),
    (
        "/v1/chat/completions",
        "missing nested field",
        {"model": "x", "messages": [{"content": "hi"}]},
        "missing_required_parameter",
        "messages[0].role",
    ),
    ("/v1/chat/completions", "wrong type", {"model": "x", "messages": "hi"}, "invalid_type", "messages"),
    (
        "/v1/chat/completions",
        "wrong nested type",
        {"model": "x", "messages": [{"role": "user", "content": 5}]},
        "invalid_type",
        "messages[0].content",
    ),
    (
        "/v1/chat/completions",
        "bad enum",
        {"model": "x", "messages": [{"role": "wizard", "content": "hi"}]},
        "invalid_value",
        "messages[0].role",
    ),
    ("/v1/chat/completions", "out of range", {**CHAT, "temperature": 3}, "decimal_above_max_value", "temperature"),
    ("/v1/chat/completions", "below range", {**CHAT, "max_tokens": 0}, "integer_below_min_value", "max_tokens"),
    ("/v1/chat/completions", "malformed JSON", MALFORMED, "invalid_json", None),
    ("/v1/chat/completions", "not an object", NOT_AN_OBJECT, "invalid_type", None),
    # POST /v1/conversations (no required field, no enum)
    ("/v1/conversations", "unknown field", {"bogus": 1}, "unknown_parameter", "bogus"),
    ("/v1/conversations", "wrong type", {"metadata": 5}, "invalid_type", "metadata"),
    ("/v1/conversations", "wrong nested type", {"metadata": {"k": 5}}, "invalid_type", "metadata.k"),
    ("/v1/conversations", "malformed JSON", MALFORMED, "invalid_json", None),
    ("/v1/conversations", "not an object", NOT_AN_OBJECT, "invalid_type", None),
    # POST /v1/conversations/{id}/messages
    ("{conversation}/messages", "unknown field", {"content": "hi", "bogus": 1}, "unknown_parameter", "bogus"),
    ("{conversation}/messages", "missing field", {"stream": False}, "missing_required_parameter", "content"),
    ("{conversation}/messages", "wrong type", {"content": 5}, "invalid_type", "content"),
    ("{conversation}/messages", "bad enum", {"content": "hi", "role": "assistant"}, "invalid_value", "role"),
    ("{conversation}/messages", "malformed JSON", MALFORMED, "invalid_json", None),
    ("{conversation}/messages", "not an object", NOT_AN_OBJECT, "invalid_type", None),
    # POST /v1/search: a pydantic body parameter
    ("/v1/search", "unknown field", {"query": "refund", "bogus": 1}, "unknown_parameter", "bogus"),
    ("/v1/search", "missing field", {"namespace": "general"}, "missing_required_parameter", "query"),
    ("/v1/search", "wrong type", {"query": 5}, "invalid_type", "query"),
    ("/v1/search", "wrong nested type", {"query": "q", "document_ids": ["a", 5]}, "invalid_type", "document_ids[1]"),
    ("/v1/search", "out of range", {"query": "q", "max_num_results": 0}, "integer_below_min_value", "max_num_results"),
    ("/v1/search", "too short", {"query": ""}, "string_below_min_length", "query"),
    ("/v1/search", "malformed JSON", MALFORMED, "invalid_json", None),
    ("/v1/search", "not an object", NOT_AN_OBJECT, "invalid_type", None),
    # POST /v1/documents/crawl: a pydantic body parameter (no enum)
    ("/v1/documents/crawl", "unknown field", {"url": "http://127.0.0.1:9/", "x": 1}, "unknown_parameter", "x"),
    ("/v1/documents/crawl", "missing field", {"namespace": "general"}, "missing_required_parameter", "url"),
    ("/v1/documents/crawl", "wrong type", {"url": 5}, "invalid_type", "url"),
    ("/v1/documents/crawl", "malformed JSON", MALFORMED, "invalid_json", None),
    ("/v1/documents/crawl", "not an object", NOT_AN_OBJECT, "invalid_type", None),
    # POST /v1/bots: bots.validate_bot
    ("/v1/bots", "unknown field", {"id": "x", "bogus": 1}, "unknown_parameter", "bogus"),
    ("/v1/bots", "missing field", {"namespace": "general"}, "missing_required_parameter", "id"),
    pytest.param(
        "/v1/bots",
        "wrong type",
        {"id": "x", "passage_count": "5"},
        "invalid_type",
        "passage_count",
    ),
    ("/v1/bots", "bad enum", {"id": "x", "marker_style": "footnote"}, "invalid_value", "marker_style"),
    ("/v1/bots", "malformed JSON", MALFORMED, "invalid_json", None),
    ("/v1/bots", "not an object", NOT_AN_OBJECT, "invalid_type", None),
    # POST /v1/admin/keys: a pydantic body parameter behind the admin check (open: auth off, no admin key)
    ("/v1/admin/keys", "unknown field", {"workspace": "w", "bogus": 1}, "unknown_parameter", "bogus"),
    ("/v1/admin/keys", "missing field", {"name": "ci"}, "missing_required_parameter", "workspace"),
    ("/v1/admin/keys", "wrong type", {"workspace": 5}, "invalid_type", "workspace"),
    ("/v1/admin/keys", "malformed JSON", MALFORMED, "invalid_json", None),
    ("/v1/admin/keys", "not an object", NOT_AN_OBJECT, "invalid_type", None),
]

# (endpoint, fault, form fields, files, code, param) for the multipart uploads.
MULTIPART_CASES = [
    ("/v1/documents", "missing file", {"namespace": "general"}, None, "missing_required_parameter", "file"),
    ("/v1/documents", "file is not a file", {"file": "just text"}, None, "invalid_type", "file"),
    ("/v1/documents", "metadata not JSON", {"metadata": "{nope"}, "a.txt", "invalid_json", "metadata"),
    ("/v1/documents", "metadata not an object", {"metadata": "[1]"}, "a.txt", "invalid_type", "metadata"),
    ("/v1/files", "missing file", {"purpose": "assistants"}, None, "missing_required_parameter", "file"),
    ("/v1/files", "missing field", {}, "a.txt", "missing_required_parameter", "purpose"),
    ("/v1/files", "bad enum", {"purpose": "fine-tune"}, "a.txt", "invalid_value", "purpose"),
]


# -- a generator that fails, and the server -------------------------------------------------------


class Boom(Generator):
    """Says a few words, then fails the way a bug would (``early``: before the first word)."""

    name = "test-boom"

    def __init__(self, early: bool = False) -> None:
        self.early = early

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        if self.early:
            raise RuntimeError("kaboom: internal detail before the first token")
        yield TextDelta("Partial answer ")
        raise RuntimeError("kaboom: internal detail mid-stream")
        yield Finish("stop")  # pragma: no cover


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    registry.register("test-boom", Boom)
    registry.register("test-boom-early", lambda: Boom(early=True))
    home: Path = tmp_path_factory.mktemp("errors") / "home"
    settings = Settings(home=home, crawl_allow_private=True)
    services = open_services(settings)
    for bot in (
        Bot(id="boom-bot", namespace=None, generator="test-boom"),
        Bot(id="boom-early-bot", namespace=None, generator="test-boom-early"),
    ):
        services.bots.create(DEFAULT_WORKSPACE, bot)
    # Stored while its plugin was installed; the plugin has since gone away.
    stale = Bot(id="stale-bot", namespace=None, generator="plugin-that-went-away")
    services.storage.bots.insert(DEFAULT_WORKSPACE, stale.id, stale.config())
    app = create_app(settings, services)
    try:
        with LiveServer(app, free_port()) as server:
            yield server
    finally:
        services.close()
        registry.unregister("test-boom")
        registry.unregister("test-boom-early")


@pytest.fixture(scope="module")
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def conversation(http: httpx.Client) -> str:
    response = http.post("/v1/conversations", json={})
    assert response.status_code == 201, response.text
    return f"/v1/conversations/{response.json()['id']}"


def _assert_shape(response: httpx.Response, status: int, code: str | None, param: str | None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"], body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"], error
    assert error["type"] == ("invalid_request_error" if status < 500 else "server_error"), error
    assert (error["code"], error["param"]) == (code, param), error
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:+=/-]*", response.headers["x-request-id"])
    return error


# -- the faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("endpoint", "fault", "body", "code", "param"), JSON_CASES)
def test_json_faults(http, conversation, endpoint: str, fault: str, body, code: str, param: str | None) -> None:
    path = endpoint.replace("{conversation}", conversation)
    if isinstance(body, bytes):
        response = http.post(path, content=body, headers={"content-type": "application/json"})
    else:
        response = http.post(path, json=body)
    _assert_shape(response, 400, code, param)


@pytest.mark.parametrize(("endpoint", "fault", "data", "filename", "code", "param"), MULTIPART_CASES)
def test_multipart_faults(http, endpoint: str, fault: str, data: dict, filename, code: str, param: str) -> None:
    files = {"file": (filename, b"Some text about refunds.")} if filename else {"unrelated": ("x.txt", b"x")}
    _assert_shape(http.post(endpoint, data=data, files=files), 400, code, param)


def test_put_with_a_bad_enum(http) -> None:
    response = http.put("/v1/admin/workspaces/general/policy", json={"sources_policy": "secret"})
    error = _assert_shape(response, 400, "invalid_value", "sources_policy")
    assert "'visible' or 'hidden'" in error["message"]


def test_query_parameters_use_the_same_translator(http) -> None:
    response = http.get("/v1/conversations", params={"limit": "many"})
    error = _assert_shape(response, 400, "invalid_type", "limit")
    assert error["message"] == "Invalid type for 'limit': expected an integer, but got a string instead."


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/chat/completions"])
@pytest.mark.parametrize(
    ("content", "headers"),
    [(b"", {"content-type": "application/json"}), (b'{"input": "hi"}', {"content-type": "text/plain"})],
    ids=["empty body", "not sent as JSON"],
)
def test_bodies_that_are_not_json(http, path: str, content: bytes, headers: dict) -> None:
    # A pydantic-parameter route and a parse_body route answer alike.
    error = _assert_shape(http.post(path, content=content, headers=headers), 400, "invalid_json", None)
    assert "application/json" in error["message"]


def test_messages_say_how_to_fix(http) -> None:
    unknown = http.post("/v1/chat/completions", json={**CHAT, "temprature": 1}).json()["error"]
    assert unknown["message"].startswith("Unknown parameter: 'temprature'.") and "temperature" in unknown["message"]
    nested = http.post("/v1/chat/completions", json={**CHAT, "stream": True, "stream_options": {"x": 1}})
    assert "include_usage" in nested.json()["error"]["message"]
    wrong = http.post("/v1/search", json={"query": 5}).json()["error"]
    assert wrong["message"] == "Invalid type for 'query': expected a string, but got an integer instead."
    union = http.post("/v1/responses", json={"input": 5}).json()["error"]
    assert "expected one of a string or an array" in union["message"]
    enum = http.post("/v1/responses", json={"input": "hi", "truncation": "x"}).json()["error"]
    assert "Supported values are: 'auto' or 'disabled'" in enum["message"]
    too_big = http.post("/v1/chat/completions", json={**CHAT, "temperature": 3}).json()["error"]
    assert "Expected a value <= 2" in too_big["message"]


# -- unexpected failures: one path, logged with the request id ---------------------------------------


def _data_lines(text: str) -> list[str]:
    return [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]


def test_unexpected_error_in_a_chat_stream_ends_with_the_request_id(http, caplog) -> None:
    body = {"model": "boom-bot", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with caplog.at_level(logging.ERROR, logger="calypso.api"):
        response = http.post("/v1/chat/completions", json=body, headers={"x-request-id": "client-42"})
    assert response.status_code == 200 and response.headers["x-request-id"] == "client-42"
    chunks = [json.loads(line) for line in _data_lines(response.text)]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
    assert content.startswith("Partial answer")  # the stream had started: a 200, then the error chunk
    error = chunks[-1]["error"]
    assert error == {
        "message": "Internal server error; see the server log (request id client-42).",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    assert "kaboom" not in response.text
    logged = [r for r in caplog.records if "client-42" in r.getMessage()]
    assert logged and logged[0].exc_info and "kaboom" in str(logged[0].exc_info[1])


def test_generated_request_id_matches_the_header(http) -> None:
    body = {"model": "boom-bot", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    response = http.post("/v1/chat/completions", json=body)
    rid = response.headers["x-request-id"]
    assert re.fullmatch(r"req_[0-9a-f]{24}", rid)
    assert f"(request id {rid})" in _data_lines(response.text)[-1]


def test_conversation_stream_failure_says_nothing_was_stored(http) -> None:
    created = http.post("/v1/conversations", json={"bot": "boom-bot"}).json()
    response = http.post(
        f"/v1/conversations/{created['id']}/messages",
        json={"content": "hi", "stream": True},
        headers={"x-request-id": "turn-7"},
    )
    error = json.loads(_data_lines(response.text)[-1])["error"]
    assert error["message"].startswith("Nothing was stored") and "(request id turn-7)" in error["message"]
    assert http.get(f"/v1/conversations/{created['id']}").json()["messages"] == []


def test_unexpected_error_before_the_stream_is_a_500_with_the_request_id(http, caplog) -> None:
    for stream in (False, True):
        body = {"model": "boom-early-bot", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
        with caplog.at_level(logging.ERROR, logger="calypso.api"):
            response = http.post("/v1/chat/completions", json=body, headers={"x-request-id": f"early-{stream}"})
        error = _assert_shape(response, 500, None, None)
        assert error["message"] == f"Internal server error; see the server log (request id early-{stream})."
        assert response.headers["x-request-id"] == f"early-{stream}"
        logged = [r for r in caplog.records if f"early-{stream}" in r.getMessage()]
        assert len(logged) == 1 and logged[0].exc_info  # once, with the traceback and the id


@pytest.mark.parametrize("incoming", ["has spaces in it", "x" * 300, "-leading-dash", "ünïcode"])
def test_an_insane_incoming_request_id_is_replaced(http, incoming: str) -> None:
    response = http.get("/health", headers={"x-request-id": incoming.encode("utf-8")})
    assert re.fullmatch(r"req_[0-9a-f]{24}", response.headers["x-request-id"])


def test_every_response_carries_a_request_id(http) -> None:
    for response in (http.get("/health"), http.get("/v1/nowhere"), http.get("/v1/models")):
        assert response.headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize("stream", [False, True])
def test_a_bots_generator_that_went_away_is_a_400_that_says_how_to_fix_it(http, stream: bool) -> None:
    body = {"model": "stale-bot", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    error = _assert_shape(http.post("/v1/chat/completions", json=body), 400, "unknown_generator", None)
    assert "'plugin-that-went-away'" in error["message"] and "PATCH /v1/bots/" in error["message"]
    assert "extractive" in error["message"]


def test_an_unknown_configured_generator_stops_the_start() -> None:
    from pydantic import ValidationError

    from calypso.config import settings_problems

    with pytest.raises(ValidationError) as info:
        Settings(generator="typo")
    (line,) = settings_problems(info.value)
    assert line.startswith("CALYPSO_GENERATOR='typo': unknown generator 'typo'; use one of: auto, extractive, ")
    assert "\n" not in line and "upstream" in line
