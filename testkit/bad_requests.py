"""The bad requests of docs/api.md's table: what OpenAI answers each, what Calypso answers, and the table itself.

One case list serves ``tests/api/test_bad_requests_table.py`` (which sends every case to a real app and
checks the answer, and that the table in docs/api.md is the one ``table`` renders from those answers) and
``bench/bad_requests_table.py`` (which rewrites that table). Calypso's column is always what the app
answered, never typed by hand.

``openai`` is OpenAI's answer, from one of: ``recorded`` (a reply of api.openai.com kept verbatim in a
public test fixture or bug report), ``pattern`` (OpenAI's validation wording and codes, the same for every
field, as docs/api.md "Request validation" quotes them, applied to this field), ``reference`` (OpenAI's
API reference: the endpoint or value exists and is answered), ``unconfirmed`` (OpenAI's answer as best
known, not found verbatim in a public record). Where Calypso answers otherwise, ``calypso``
says what it answers and ``note`` why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
START, END = "<!-- bad-requests:start -->", "<!-- bad-requests:end -->"
NO_KEY, BAD_KEY = "no-key", "bad-key"  # the two ways a case's Authorization can differ from a valid key

# What every 404 row shares: Calypso names the missing id and says not_found; OpenAI sends null for both.
NOT_FOUND_NOTE = "404s: Calypso sends `code: not_found` and names the id's parameter (decision, below)"


@dataclass(frozen=True)
class Answer:
    status: int
    type: str | None = "invalid_request_error"
    code: str | None = None
    param: str | None = None

    def cell(self) -> str:
        if self.status < 400:
            return f"{self.status} (answered)"
        return f"{self.status} · `{self.type}` · {_code(self.code)} · {_code(self.param)}"


def _code(value: str | None) -> str:
    return "`null`" if value is None else f"`{value}`"


@dataclass(frozen=True)
class Case:
    endpoint: str  # "POST /v1/responses"; the path may name {conversation}, {vector_store}, {file}
    fault: str
    openai: Answer
    source: str  # recorded | pattern | reference
    json: Any = None  # the JSON body; bytes: sent raw as application/json
    form: dict[str, str] | None = None  # a multipart upload's fields…
    upload: tuple[str, bytes] | None = None  # …and its file
    auth: str = "key"  # key | no-key | bad-key
    calypso: Answer | None = None  # None: the same as OpenAI
    note: str = ""

    @property
    def id(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", f"{self.endpoint} {self.fault}".lower()).strip("-")

    @property
    def expected(self) -> Answer:
        return self.calypso or self.openai


def _bad(code: str | None, param: str | None, status: int = 400) -> Answer:
    return Answer(status, "invalid_request_error", code, param)


def _nf(param: str | None = None, code: str | None = None) -> Answer:
    return Answer(404, "invalid_request_error", code, param)


USER = {"role": "user", "content": "When did Hannibal cross the Alps?"}
CHAT = {"model": "calypso-rag-agent", "messages": [USER]}
ASK = {"model": "calypso-rag-agent", "input": "When did Hannibal cross the Alps?"}
TEXT_FILE = ("notes.txt", b"Hannibal crossed the Alps in 218 BC.")

CASES: list[Case] = [
    # -- auth --------------------------------------------------------------------------------------
    Case("GET /v1/models", "no Authorization header", _bad(None, None, 401), "recorded", auth=NO_KEY),
    Case("GET /v1/models", "unknown key", _bad("invalid_api_key", None, 401), "recorded", auth=BAD_KEY),
    # -- /v1/responses ---------------------------------------------------------------------------
    Case(
        "POST /v1/responses",
        "no `model`",
        _bad("missing_required_parameter", "model"),
        "pattern",
        json={"input": "hi"},
        calypso=Answer(200),
        note="seed 000: a request without `model` is answered by the default bot",
    ),
    Case(
        "POST /v1/responses",
        "unknown field `bogus`",
        _bad("unknown_parameter", "bogus"),
        "pattern",
        {**ASK, "bogus": 1},
    ),
    Case("POST /v1/responses", "`input: 5`", _bad("invalid_type", "input"), "pattern", {**ASK, "input": 5}),
    Case(
        "POST /v1/responses",
        "`temperature: 3`",
        _bad("decimal_above_max_value", "temperature"),
        "pattern",
        {**ASK, "temperature": 3},
    ),
    Case(
        "POST /v1/responses",
        "`max_output_tokens: 0`",
        _bad("integer_below_min_value", "max_output_tokens"),
        "pattern",
        {**ASK, "max_output_tokens": 0},
        note="same answer; OpenAI's minimum is 16, Calypso's 1",
    ),
    Case(
        "POST /v1/responses",
        "`top_logprobs: 21`",
        _bad("integer_above_max_value", "top_logprobs"),
        "pattern",
        {**ASK, "top_logprobs": 21},
    ),
    Case(
        "POST /v1/responses",
        '`truncation: "sometimes"`',
        _bad("invalid_value", "truncation"),
        "pattern",
        {**ASK, "truncation": "sometimes"},
    ),
    Case(
        "POST /v1/responses",
        '`tool_choice: "sometimes"`',
        _bad("invalid_value", "tool_choice"),
        "pattern",
        {**ASK, "tool_choice": "sometimes"},
    ),
    Case(
        "POST /v1/responses",
        "unknown tool type",
        _bad("invalid_value", "tools[0].type"),
        "pattern",
        {**ASK, "tools": [{"type": "bogus"}]},
    ),
    Case(
        "POST /v1/responses",
        "`file_search` without `vector_store_ids`",
        _bad("missing_required_parameter", "tools[0].vector_store_ids"),
        "pattern",
        {**ASK, "tools": [{"type": "file_search"}]},
    ),
    Case(
        "POST /v1/responses",
        "`text.format` json_schema without `name`",
        _bad("missing_required_parameter", "text.format.name"),
        "pattern",
        {**ASK, "text": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
    ),
    Case(
        "POST /v1/responses",
        "unknown `previous_response_id`",
        _bad("previous_response_not_found", "previous_response_id"),
        "recorded",
        {**ASK, "previous_response_id": "resp_0123456789abcdef"},
    ),
    Case(
        "POST /v1/responses",
        "unknown `conversation`",
        _nf(),
        "unconfirmed",
        {**ASK, "conversation": "conv_0123456789abcdef"},
        calypso=_nf("conversation_id", "not_found"),
        note=NOT_FOUND_NOTE,
    ),
    Case(
        "POST /v1/responses",
        "malformed JSON",
        _bad(None, None),
        "recorded",
        b'{"input": ',
        calypso=_bad("invalid_json", None),
        note="`invalid_json` says what happened (decision in Request validation)",
    ),
    Case(
        "GET /v1/responses/{id}",
        "unknown id",
        _nf(),
        "unconfirmed",
        calypso=_nf("response_id", "not_found"),
        note=NOT_FOUND_NOTE,
    ),
    # -- /v1/chat/completions --------------------------------------------------------------------
    Case(
        "POST /v1/chat/completions",
        "no `messages`",
        _bad("missing_required_parameter", "messages"),
        "pattern",
        {"model": "calypso-rag-agent"},
    ),
    Case(
        "POST /v1/chat/completions",
        "`messages: []`",
        _bad("empty_array", "messages"),
        "recorded",
        {**CHAT, "messages": []},
    ),
    Case(
        "POST /v1/chat/completions",
        "message without `role`",
        _bad("missing_required_parameter", "messages[0].role"),
        "pattern",
        {**CHAT, "messages": [{"content": "hi"}]},
    ),
    Case(
        "POST /v1/chat/completions",
        '`role: "robot"`',
        _bad("invalid_value", "messages[0].role"),
        "pattern",
        {**CHAT, "messages": [{"role": "robot", "content": "hi"}]},
    ),
    Case(
        "POST /v1/chat/completions",
        "tool message without `tool_call_id`",
        _bad("missing_required_parameter", "messages[1].tool_call_id"),
        "pattern",
        {**CHAT, "messages": [USER, {"role": "tool", "content": "42"}]},
    ),
    Case(
        "POST /v1/chat/completions",
        "unknown field",
        _bad("unknown_parameter", "bogus"),
        "pattern",
        {**CHAT, "bogus": 1},
    ),
    Case(
        "POST /v1/chat/completions",
        "`max_tokens: 0`",
        _bad("integer_below_min_value", "max_tokens"),
        "recorded",
        {**CHAT, "max_tokens": 0},
    ),
    Case(
        "POST /v1/chat/completions",
        '`max_tokens: "ten"`',
        _bad("invalid_type", "max_tokens"),
        "pattern",
        {**CHAT, "max_tokens": "ten"},
    ),
    Case(
        "POST /v1/chat/completions",
        "`temperature: 3`",
        _bad("decimal_above_max_value", "temperature"),
        "pattern",
        {**CHAT, "temperature": 3},
    ),
    Case(
        "POST /v1/chat/completions",
        "`n: 129`",
        _bad("integer_above_max_value", "n"),
        "recorded",
        {**CHAT, "n": 129},
    ),
    Case(
        "POST /v1/chat/completions",
        "`n: 2`",
        Answer(200),
        "reference",
        {**CHAT, "n": 2},
        calypso=_bad("unsupported_value", "n"),
        note="one grounded answer per request; OpenAI's error for a value a model does not support",
    ),
    Case(
        "POST /v1/chat/completions",
        "`top_logprobs: 21`",
        _bad("integer_above_max_value", "top_logprobs"),
        "pattern",
        {**CHAT, "logprobs": True, "top_logprobs": 21},
    ),
    Case(
        "POST /v1/chat/completions",
        "`stream_options` without `stream`",
        _bad(None, "stream_options"),
        "unconfirmed",
        {**CHAT, "stream_options": {"include_usage": True}},
    ),
    Case(
        "POST /v1/chat/completions",
        "unknown `response_format.type`",
        _bad("invalid_value", "response_format.type"),
        "pattern",
        {**CHAT, "response_format": {"type": "xml"}},
    ),
    Case(
        "POST /v1/chat/completions",
        "unknown model",
        Answer(404, "invalid_request_error", "model_not_found", None),
        "recorded",
        {**CHAT, "model": "gpt-nope"},
        calypso=Answer(404, "invalid_request_error", "model_not_found", "model"),
        note="`param` names the field at fault; the message lists the bots",
    ),
    Case(
        "POST /v1/chat/completions",
        "malformed JSON",
        _bad(None, None),
        "recorded",
        b'{"model": "calypso-rag-agent", "messages": [',
        calypso=_bad("invalid_json", None),
        note="`invalid_json` says what happened (decision in Request validation)",
    ),
    # -- /v1/files -------------------------------------------------------------------------------
    Case(
        "POST /v1/files",
        "no `file`",
        _bad("missing_required_parameter", "file"),
        "pattern",
        form={"purpose": "assistants"},
    ),
    Case("POST /v1/files", "no `purpose`", _bad("missing_required_parameter", "purpose"), "pattern", upload=TEXT_FILE),
    Case(
        "POST /v1/files",
        '`purpose: "bogus"`',
        _bad("invalid_value", "purpose"),
        "pattern",
        form={"purpose": "bogus"},
        upload=TEXT_FILE,
    ),
    Case(
        "POST /v1/files",
        "`expires_after.seconds: 60`",
        _bad("integer_below_min_value", "expires_after.seconds"),
        "pattern",
        form={"purpose": "assistants", "expires_after[anchor]": "created_at", "expires_after[seconds]": "60"},
        upload=TEXT_FILE,
        note="OpenAI allows 3,600 to 2,592,000 seconds",
    ),
    Case(
        "POST /v1/files",
        '`expires_after.anchor: "last_active_at"`',
        _bad("invalid_value", "expires_after.anchor"),
        "pattern",
        form={"purpose": "assistants", "expires_after[anchor]": "last_active_at", "expires_after[seconds]": "3600"},
        upload=TEXT_FILE,
    ),
    Case(
        "GET /v1/files/{id}",
        "unknown id",
        _nf("id"),
        "recorded",
        calypso=_nf("file_id", "not_found"),
        note=NOT_FOUND_NOTE,
    ),
    Case(
        "DELETE /v1/files/{id}",
        "unknown id",
        _nf("id"),
        "recorded",
        calypso=_nf("file_id", "not_found"),
        note=NOT_FOUND_NOTE,
    ),
    Case("GET /v1/files?limit=10001", "`limit` over 10,000", _bad("integer_above_max_value", "limit"), "pattern"),
    Case("GET /v1/files?order=up", '`order: "up"`', _bad("invalid_value", "order"), "pattern"),
    # -- /v1/vector_stores -----------------------------------------------------------------------
    Case(
        "GET /v1/vector_stores/{id}",
        "unknown id",
        _nf(),
        "unconfirmed",
        calypso=_nf("vector_store_id", "not_found"),
        note=NOT_FOUND_NOTE,
    ),
    Case("GET /v1/vector_stores?limit=101", "`limit` over 100", _bad("integer_above_max_value", "limit"), "pattern"),
    Case(
        "POST /v1/vector_stores",
        "`expires_after.days: 0`",
        _bad("integer_below_min_value", "expires_after.days"),
        "pattern",
        {"expires_after": {"anchor": "last_active_at", "days": 0}},
    ),
    Case(
        "POST /v1/vector_stores",
        '`expires_after.anchor: "created_at"`',
        _bad("invalid_value", "expires_after.anchor"),
        "pattern",
        {"expires_after": {"anchor": "created_at", "days": 1}},
    ),
    Case(
        "POST /v1/vector_stores/{vector_store}/files",
        "`max_chunk_size_tokens: 50`",
        _bad("integer_below_min_value", "chunking_strategy.static.max_chunk_size_tokens"),
        "pattern",
        {
            "file_id": "{file}",
            "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 50, "chunk_overlap_tokens": 0}},
        },
    ),
    Case(
        "POST /v1/vector_stores/{vector_store}/search",
        "no `query`",
        _bad("missing_required_parameter", "query"),
        "pattern",
        {},
    ),
    Case(
        "POST /v1/vector_stores/{vector_store}/search",
        "`max_num_results: 51`",
        _bad("integer_above_max_value", "max_num_results"),
        "pattern",
        {"query": "Alps", "max_num_results": 51},
    ),
    Case(
        "GET /v1/vector_stores/{vector_store}/files?filter=done",
        '`filter: "done"`',
        _bad("invalid_value", "filter"),
        "pattern",
    ),
    # -- /v1/conversations -----------------------------------------------------------------------
    Case(
        "GET /v1/conversations/{id}",
        "unknown id",
        _nf(),
        "unconfirmed",
        calypso=_nf("conversation_id", "not_found"),
        note=NOT_FOUND_NOTE,
    ),
    Case(
        "POST /v1/conversations",
        "21 `items`",
        _bad("array_above_max_length", "items"),
        "pattern",
        {"items": [{"type": "message", "role": "user", "content": "hi"}] * 21},
    ),
    Case(
        "POST /v1/conversations/{conversation}",
        "17 `metadata` keys",
        _bad("object_above_max_properties", "metadata"),
        "pattern",
        {"metadata": {f"k{i}": "v" for i in range(17)}},
    ),
    Case(
        "POST /v1/conversations/{conversation}/items",
        '`role: "robot"`',
        _bad("invalid_value", "items[0].role"),
        "pattern",
        {"items": [{"type": "message", "role": "robot", "content": "hi"}]},
    ),
    Case(
        "GET /v1/conversations/{conversation}/items?limit=101",
        "`limit` over 100",
        _bad("integer_above_max_value", "limit"),
        "pattern",
    ),
    Case(
        "GET /v1/conversations/{conversation}/items/{id}",
        "unknown item",
        _nf(),
        "unconfirmed",
        calypso=_nf("item_id", "not_found"),
        note=NOT_FOUND_NOTE,
    ),
    # -- the rest --------------------------------------------------------------------------------
    Case(
        "GET /v1/models/{id}",
        "unknown model",
        Answer(404, "invalid_request_error", "model_not_found", "model"),
        "unconfirmed",
    ),
    Case(
        "POST /v1/embeddings",
        "an embeddings request",
        Answer(200),
        "reference",
        {"model": "text-embedding-3-small", "input": "Alps"},
        calypso=_nf(None, "not_found"),
        note="Calypso embeds for its own search and has no embeddings endpoint",
    ),
    Case(
        "GET /v1/nope",
        "unknown path",
        _nf(),
        "unconfirmed",
        calypso=_nf(None, "not_found"),
        note="OpenAI: `Invalid URL (GET /v1/nope)`; Calypso's code says not found",
    ),
    Case(
        "PUT /v1/files",
        "wrong method",
        _nf(),
        "unconfirmed",
        calypso=Answer(405, "invalid_request_error", "method_not_allowed", None),
        note="405 with an `Allow` header, as HTTP says",
    ),
]


@dataclass
class Fixtures:
    """The ids a case's path or body may name: objects that exist, in the caller's workspace."""

    conversation: str
    vector_store: str
    file: str
    unknown: dict[str, str] = field(
        default_factory=lambda: {
            "responses": "resp_0123456789abcdef",
            "files": "file-0123456789abcdef",
            "vector_stores": "vs_0123456789abcdef",
            "conversations": "conv_0123456789abcdef",
            "items": "msg_0123456789abcdef",
            "models": "gpt-nope",
        }
    )

    def fill(self, text: str) -> str:
        text = text.replace("{conversation}", self.conversation).replace("{vector_store}", self.vector_store)
        text = text.replace("{file}", self.file)
        if "{id}" in text:  # an unknown id of the kind the segment before it names
            kind = text.split("/{id}")[0].rsplit("/", 1)[-1]
            text = text.replace("{id}", self.unknown[kind])
        return text


def _filled(value: Any, fixtures: Fixtures) -> Any:
    if isinstance(value, str):
        return fixtures.fill(value)
    if isinstance(value, dict):
        return {k: _filled(v, fixtures) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, fixtures) for v in value]
    return value


def prepare(client: httpx.Client, key: str) -> Fixtures:
    """A conversation, a vector store and a file, in ``key``'s workspace, for the cases that name one."""
    headers = {"Authorization": f"Bearer {key}"}
    conversation = client.post("/v1/conversations", json={}, headers=headers).json()["id"]
    store = client.post("/v1/vector_stores", json={"name": "bad requests"}, headers=headers).json()["id"]
    data = {"purpose": "assistants"}
    uploaded = client.post("/v1/files", files={"file": TEXT_FILE}, data=data, headers=headers).json()["id"]
    return Fixtures(conversation, store, uploaded)


def run_all(client: httpx.Client, admin_key: str) -> dict[str, Answer]:
    """Every case's answer from the app behind ``client`` (auth on, ``admin_key`` its admin key)."""
    made = client.post(
        "/v1/admin/keys",
        json={"workspace": "acme", "name": "bad requests"},
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    key = made.json()["key"]
    fixtures = prepare(client, key)
    return {case.id: send(client, case, fixtures, key) for case in CASES}


def send(client: httpx.Client, case: Case, fixtures: Fixtures, key: str) -> Answer:
    """Send one case; the answer's status and error fields (an answered request has no error)."""
    method, path = case.endpoint.split(" ", 1)
    headers = {"Authorization": f"Bearer {key}"}
    if case.auth == NO_KEY:
        headers = {}
    elif case.auth == BAD_KEY:
        headers = {"Authorization": "Bearer sk-not-a-key-of-this-server"}
    url = fixtures.fill(path)
    request: Callable[..., httpx.Response] = client.request
    if case.form is not None or case.upload is not None:
        files = {"file": case.upload} if case.upload else None
        response = request(method, url, data=case.form or {}, files=files, headers=headers)
    elif isinstance(case.json, bytes):
        response = request(method, url, content=case.json, headers={**headers, "Content-Type": "application/json"})
    elif case.json is not None:
        response = request(method, url, json=_filled(case.json, fixtures), headers=headers)
    else:
        response = request(method, url, headers=headers)
    if response.status_code < 400:
        return Answer(response.status_code)
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    return Answer(response.status_code, error["type"], error["code"], error["param"])


def table(answers: dict[str, Answer]) -> str:
    """docs/api.md's table: one row per case, Calypso's column from ``answers`` (case id -> what it answered)."""
    lines = [
        "| endpoint | bad request | OpenAI: status · type · code · param | source | Calypso | note |",
        "|---|---|---|---|---|---|",
    ]
    for case in CASES:
        got = answers[case.id]
        same = "same" if got == case.openai else got.cell()
        lines.append(
            f"| `{case.endpoint}` | {case.fault} | {case.openai.cell()} | {case.source} | {same} | {case.note} |"
        )
    matching = sum(answers[c.id] == c.openai for c in CASES)
    lines.append("")
    lines.append(f"{len(CASES)} bad requests; Calypso answers {matching} as OpenAI does.")
    return "\n".join(lines)


def documented_table(text: str | None = None) -> str:
    """The table between the markers of docs/api.md."""
    text = DOC.read_text() if text is None else text
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def with_table(rendered: str, text: str) -> str:
    before, rest = text.split(START, 1)
    after = rest.split(END, 1)[1]
    return f"{before}{START}\n{rendered}\n{END}{after}"
