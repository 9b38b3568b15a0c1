"""Schemathesis over the server's own /openapi.json: no request it can generate is a 5xx or an undeclared status.

Every operation is tested (admin ones too: auth is off on loopback and no admin
key is set, so admin is allowed locally) with the built-in extractive answerer
over the demo documents, against a real server on loopback: the pure-ASGI
middlewares and the SSE streams run as in production. Per operation:
schemathesis' examples and coverage phases (boundary and negative values),
then ``max_examples`` generated requests, positive and negative. Then
stateful workflows that follow the document's links (create, then use the
id), the same with API keys on, and arbitrary Authorization header bytes.

Bounded for CI: the ``calypso-ci`` profile below and a fixed seed, so a failure
reproduces. A deeper local run: ``CALYPSO_PROPERTY_EXAMPLES=300``,
``CALYPSO_PROPERTY_SCENARIOS=500``, another ``CALYPSO_PROPERTY_SEED``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.demo import ingest_demo
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port

EXAMPLES = int(os.environ.get("CALYPSO_PROPERTY_EXAMPLES", "40"))
ADMIN_KEY = "admin-secret"
SEED = int(os.environ.get("CALYPSO_PROPERTY_SEED", "20240611"))
STATEFUL_SCENARIOS = int(os.environ.get("CALYPSO_PROPERTY_SCENARIOS", "60"))

settings.register_profile(
    "calypso-ci",
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile("calypso-ci")


def server_settings(home: Path, *, keys: bool = False) -> Settings:
    """Loopback and no admin key: API keys off, admin allowed locally; no upstream: the extractive answerer.

    ``keys``: API keys on and an admin key set (the document then declares 401s and the bearer schemes).
    """
    auth, admin_key = ("on", ADMIN_KEY) if keys else ("auto", None)
    return Settings(home=home, host="127.0.0.1", auth=auth, admin_key=admin_key, generator="extractive")


# The document the server serves at /openapi.json, built from the app at collection (no server needed yet):
# schemathesis makes one test per operation from it. test_the_served_document_is_the_tested_one checks it is the same.
DOCUMENT = create_app(server_settings(Path("unused"))).openapi()
CONFIG = {"seed": SEED, "generation": {"deterministic": True}}
schema = schemathesis.openapi.from_dict(DOCUMENT, config=schemathesis.Config.from_dict(CONFIG))
# With API keys on: requests without a key, with a wrong or malformed one (schemathesis varies the Authorization
# header it generates from the security schemes) are 401 (403 for a workspace's signed links), never 5xx.
KEYED_DOCUMENT = create_app(server_settings(Path("unused"), keys=True)).openapi()
keyed_schema = schemathesis.openapi.from_dict(KEYED_DOCUMENT, config=schemathesis.Config.from_dict(CONFIG))


def no_server_error_in_stream(ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case):
    """A stream starts with 200: a failure after that is reported in it (Chat: an ``error`` chunk; Responses:
    ``error`` + ``response.failed``). An unexpected one there is a 500 all the same."""
    if not response.headers.get("content-type", [""])[0].startswith("text/event-stream"):
        return None
    for line in response.content.decode("utf-8", "replace").split("\n"):
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        event = json.loads(line.removeprefix("data:"))
        error = event.get("error") if isinstance(event.get("error"), dict) else {}
        if error.get("type") == "server_error" or (
            event.get("type") == "error" and event.get("code") == "server_error"
        ):
            raise AssertionError(f"the stream of {case.operation.label} failed with a server error: {line}")
    return None


def declared_status(ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case):
    """``status_code_conformance``, but not for uvicorn's own 400 to a request it cannot parse as HTTP (a
    generated ``Content-Length: 1K|``): the app never sees it, so no operation could declare it."""
    if response.status_code == 400 and response.content.startswith(b"Invalid HTTP request received."):
        return None
    return status_code_conformance(ctx, response, case)


CHECKS = [not_a_server_error, declared_status, no_server_error_in_stream]

# Bots that render answers differently (ids schemathesis will not guess); "" is the built-in default bot.
BOTS: dict[str, dict] = {
    "calypso-rag-agent": {},
    "pbt-source-markers": {"id": "pbt-source-markers", "marker_style": "source", "passage_count": 2},
    "pbt-inline": {"id": "pbt-inline", "inline_citations": True},
    "pbt-hidden": {"id": "pbt-hidden", "sources_policy": "hidden"},
    "pbt-no-kb": {"id": "pbt-no-kb", "namespace": None},
    "pbt-no-citations": {"id": "pbt-no-citations", "include_citations": False, "system_prompt": "Be brief."},
}


def _demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    config = server_settings(tmp_path_factory.mktemp("property") / "home")
    services = open_services(config)
    ingest_demo(services.ingestion)
    for bot in BOTS.values():
        if bot:
            services.bots.create("default", bot)
    try:
        with LiveServer(create_app(config, services), free_port()) as live:
            yield live
    finally:
        services.close()


@pytest.fixture(scope="module")
def live_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from _demo_server(tmp_path_factory)


@pytest.fixture
def workflow_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of its own: the stateless tests leave what they create on ``live_api``, and a workflow that
    met it (a leftover file in a list, then deleted) would not replay the same (FlakyStrategyDefinition)."""
    yield from _demo_server(tmp_path_factory)


@pytest.fixture(scope="module")
def keyed_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    config = server_settings(tmp_path_factory.mktemp("property-keys") / "home", keys=True)
    services = open_services(config)
    try:
        with LiveServer(create_app(config, services), free_port()) as live:
            yield live
    finally:
        services.close()


def test_the_served_document_is_the_tested_one(live_api: LiveServer) -> None:
    assert httpx.get(f"{live_api.url}/openapi.json").json() == DOCUMENT


def test_the_keyed_document_declares_the_keys(keyed_api: LiveServer) -> None:
    assert httpx.get(f"{keyed_api.url}/openapi.json").json() == KEYED_DOCUMENT
    assert set(KEYED_DOCUMENT["components"]["securitySchemes"]) == {"APIKey", "AdminKey"}


@schema.parametrize()
@settings(PROFILE)
def test_no_server_errors_and_only_declared_statuses(case: schemathesis.Case, live_api: LiveServer) -> None:
    case.call_and_validate(base_url=live_api.url, checks=CHECKS, timeout=60)


# What a workflow creates, by the operation that created it: DELETEd after each scenario, so every
# scenario starts from the same server state (Hypothesis replays scenarios and needs them to behave the same).
CREATED = {
    "POST /v1/bots": "/v1/bots/{id}",
    "POST /v1/conversations": "/v1/conversations/{id}",
    "POST /v1/documents": "/v1/documents/{id}",
    "POST /v1/files": "/v1/documents/{document_id}",
    "POST /v1/responses": "/v1/responses/{id}",
    "POST /v1/vector_stores": "/v1/vector_stores/{id}",
}


def test_workflows_following_links_make_no_server_errors(workflow_api: LiveServer) -> None:
    """Stateful: create a bot, conversation, document, file, response or key, then use the id through its links."""

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            self.created: list[str] = []

        def get_call_kwargs(self, case: schemathesis.Case) -> dict:
            return {"base_url": workflow_api.url, "timeout": 60}

        def validate_response(self, response, case, additional_checks=None, **kwargs) -> None:  # type: ignore[no-untyped-def]
            case.validate_response(response, checks=CHECKS)
            template = CREATED.get(case.operation.label)
            if template is not None and response.status_code in (200, 201):
                self.created.append(template.format(**response.json()))

        def teardown(self) -> None:
            for path in reversed(self.created):
                httpx.delete(f"{workflow_api.url}{path}", timeout=60)
            # What a scenario may change in place: the fixture's bots (PATCH) and the workspace policy (PUT).
            for bot in BOTS.values():
                if bot:
                    httpx.delete(f"{workflow_api.url}/v1/bots/{bot['id']}", timeout=60)
                    httpx.post(f"{workflow_api.url}/v1/bots", json=bot, timeout=60)
            policy = {"sources_policy": "visible"}
            httpx.put(f"{workflow_api.url}/v1/admin/workspaces/default/policy", json=policy, timeout=60)

    Workflow.run(settings=settings(PROFILE, max_examples=STATEFUL_SCENARIOS, stateful_step_count=8))


@keyed_schema.parametrize()
@settings(PROFILE, max_examples=max(5, EXAMPLES // 3))
def test_with_keys_on_no_server_errors_and_only_declared_statuses(
    case: schemathesis.Case, keyed_api: LiveServer
) -> None:
    case.call_and_validate(base_url=keyed_api.url, checks=CHECKS, timeout=60)


# Header values as bytes, as a client can send them (schemathesis sends ASCII only): any byte HTTP allows in a
# header (no control characters but tab, no leading or trailing whitespace), Latin-1 and UTF-8 included.
_CONTROL = bytes([*range(0, 9), *range(10, 32), 127])
HEADER_VALUES = st.binary(max_size=40).map(lambda b: b.translate(None, _CONTROL).strip(b" \t"))
KEYED_PATHS = ["/v1/admin/keys", "/v1/models", "/v1/files/file-x/content?expires=99999999999&signature=ab"]


@settings(PROFILE, max_examples=EXAMPLES * 2)
@given(
    prefix=st.sampled_from([b"", b"Bearer ", b"bearer ", b"Basic "]),
    value=HEADER_VALUES,
    request_id=HEADER_VALUES,
    path=st.sampled_from(KEYED_PATHS),
)
def test_any_authorization_header_is_refused_in_openai_shape(
    keyed_api: LiveServer, prefix: bytes, value: bytes, request_id: bytes, path: str
) -> None:
    headers = {"Authorization": (prefix + value).strip(b" \t"), "x-request-id": request_id}
    response = httpx.get(f"{keyed_api.url}{path}", headers=headers, timeout=30)
    assert response.status_code in (401, 403), response.text
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


# Questions: real ones, arbitrary Unicode, and pieces that stress tokenising, sentence splitting and markers.
FRAGMENTS = [
    *("refund", "policy", "How long do refunds take?", "shipping", "warranty", " ", "\n\n", "\t", "?", ".", "..."),
    *("[Source 1]", "[1]", "[[2]](http://x.test/a)", "【1†source】", "[Sources 1, 2]", "[", "]", "(", "`", "```", "*"),
    *("e.g.", "Mr.", "3.5", "U.S.A.", "http://example.com/a.b?c=d", "#", "\\", '"', "\u0301", "\u202e", "\u200b"),
    *("🙂", "👩🏽‍💻", "ﬁ", "İ", "ß", "。", "」", "\x00", "\x7f", "\ufeff", "\U0001d400", "ǅ", "ΐ", "ｆｕｌｌ"),
]
QUESTIONS = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=12), max_size=14).map("".join),
    st.text(max_size=200),
)


def _ask(url: str, dialect: str, bot: str, question: str, stream: bool, include: list[str]) -> httpx.Response:
    if dialect == "responses":
        body: dict = {"model": bot, "input": question, "stream": stream}
        if include:
            body["include"] = include
        return httpx.post(f"{url}/v1/responses", json=body, timeout=60)
    messages = [{"role": "user", "content": question}]
    if dialect == "chat with history":
        earlier = [{"role": "user", "content": "refunds?"}, {"role": "assistant", "content": f"[Source 1] {question}"}]
        messages = [*earlier, {"role": "user", "content": [{"type": "text", "text": question}]}]
    if dialect == "conversation":
        conversation = httpx.post(f"{url}/v1/conversations", json={"model": bot}, timeout=60).json()["id"]
        body = {"content": question, "stream": stream}
        return httpx.post(f"{url}/v1/conversations/{conversation}/messages", json=body, timeout=60)
    return httpx.post(
        f"{url}/v1/chat/completions", json={"model": bot, "messages": messages, "stream": stream}, timeout=60
    )


@settings(PROFILE, max_examples=EXAMPLES * 2)
@given(
    dialect=st.sampled_from(["chat", "chat with history", "responses", "conversation"]),
    bot=st.sampled_from(sorted(BOTS)),
    question=QUESTIONS,
    stream=st.booleans(),
    include=st.lists(st.sampled_from(["inline_citations", "no_inline_citations", "file_search_call.results"])),
)
def test_any_question_is_answered_or_refused_never_a_server_error(
    live_api: LiveServer, dialect: str, bot: str, question: str, stream: bool, include: list[str]
) -> None:
    """The answering paths (retrieval, extractive answer, citations, every render style, SSE) on any question."""
    response = _ask(live_api.url, dialect, bot, question, stream, include)
    if response.status_code != 200:
        assert response.status_code == 400, response.text  # an empty question
        assert response.json()["error"]["type"] == "invalid_request_error"
        return
    if not stream:
        response.json()
        return
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in response.text.split("\n") if line.startswith("data: ")]
    assert events, response.text
    payloads = [json.loads(e) for e in events if e != "[DONE]"]
    assert not [p for p in payloads if "error" in p or p.get("type") in ("error", "response.failed")], response.text
    if dialect == "responses":
        assert payloads[-1]["type"] == "response.completed"
    else:
        assert events[-1] == "[DONE]"
