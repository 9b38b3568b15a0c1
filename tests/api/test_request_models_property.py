"""Hypothesis over the request models and the JSON boundary, without a server.

Whatever JSON a client sends, the boundary either accepts it or answers a 400
that names the parameter: ``calypso.json_limits.load`` raises only
``json.JSONDecodeError``/``UnacceptableJSON``/``UnicodeDecodeError``; a model
either validates or raises a pydantic ``ValidationError`` that
``invalid_request_from`` turns into an ``InvalidRequest`` with a ``param``; the
checks that run after validation (``check()``, the Responses translation, a
bot's fields) raise ``CalypsoError`` 4xx only. Any other exception would be a
500 in production.

Values are JSON-like and biased towards the vocabulary of the API (field names,
roles, part and filter types), so they reach past the first type check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from calypso import json_limits
from calypso.api.routes.admin import CreateKey, WorkspacePolicy
from calypso.api.routes.conversations import CreateConversation, PostMessage
from calypso.api.routes.documents import CrawlRequest
from calypso.api.routes.search import SearchRequest
from calypso.api.schemas.chat import ChatCompletionRequest
from calypso.api.schemas.responses import ResponsesRequest
from calypso.api.translate.responses import render_options, translate
from calypso.api.validation import unacceptable_json
from calypso.bots import Bot, default_bot, validate_bot
from calypso.citations.links import LinkSigner
from calypso.config import Settings
from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.models import StoredResponse
from calypso.services.answering import message_text, validate_messages
from calypso.services.turns import TurnPreparer
from calypso.validation import invalid_request_from

settings.register_profile(
    "calypso-models",
    max_examples=int(os.environ.get("CALYPSO_PROPERTY_MODEL_EXAMPLES", "150")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile("calypso-models")

# -- JSON-like values in the API's vocabulary ---------------------------------------------------

KEYS = sorted(
    {
        *ResponsesRequest.model_fields,
        *ChatCompletionRequest.model_fields,
        *PostMessage.model_fields,
        *CreateConversation.model_fields,
        *SearchRequest.model_fields,
        *Bot.model_fields,
        *("role", "content", "type", "text", "name", "tool_calls", "tool_call_id", "file_id", "_aicore"),
        *("vector_store_ids", "max_num_results", "filters", "key", "value", "include_usage", "function"),
    }
)
WORDS = [
    *("user", "assistant", "system", "developer", "tool", "message", "function_call"),
    *("text", "input_text", "output_text", "input_file", "image_url", "file_search", "function"),
    *("eq", "in", "or", "and", "document_id", "file_id", "auto", "none", "required", "disabled"),
    *("legacy", "native", "omit", "include", "inline_citations", "no_inline_citations", "file_search_call.results"),
    *("calypso-rag-agent", "general", "numeric", "source", "visible", "hidden", "extractive", "upstream"),
    *("What is the refund policy?", "", " ", "refund"),
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(WORDS)
)
keys = st.sampled_from(KEYS) | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=25,
)


def bodies(fields: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects over a model's fields (each present or not) plus, sometimes, unknown keys."""
    known = st.fixed_dictionaries({}, optional={name: json_values for name in fields})
    extra = st.dictionaries(keys, json_values, max_size=2)
    return st.tuples(known, extra, st.booleans()).map(lambda t: {**t[0], **t[1]} if t[2] else t[0])


def through_the_boundary(value: Any) -> Any:
    """What a route sees: the value as JSON, decoded by json_limits (None when refused there, with a 400)."""
    try:
        return json_limits.load(json.dumps(value))
    except json_limits.UnacceptableJSON as exc:
        error = unacceptable_json(exc)
        assert isinstance(error, InvalidRequest) and error.status == 400
        return None


def validated(model: type[BaseModel], body: Any) -> Any:
    """The model, or None after checking the 400 a ValidationError becomes."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        error = invalid_request_from(exc, body, model=model)
        assert_named_400(error, body)
        return None


def assert_named_400(error: CalypsoError, body: Any) -> None:
    assert isinstance(error, InvalidRequest) and error.status == 400
    assert error.message and isinstance(error.code, str)
    if isinstance(body, dict):
        assert error.param is not None, error.message  # a field of an object body is named ("" too)
    json.dumps(error.to_dict())


def expect_4xx(call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except CalypsoError as exc:
        assert 400 <= exc.status < 500, exc
        json.dumps(exc.to_dict())
        return None


# -- json_limits -------------------------------------------------------------------------------


@settings(PROFILE)
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200), json_values.map(json.dumps)))
def test_json_limits_refuse_only_with_json_errors(raw: bytes | str) -> None:
    try:
        value = json_limits.load(raw)
    except json_limits.UnacceptableJSON as exc:
        assert exc.reason and (exc.path is None or isinstance(exc.path, str))
        return
    except (json.JSONDecodeError, UnicodeDecodeError):
        return
    json_limits.check(value)
    json.dumps(value)  # what the server accepted it can store and send back


@settings(PROFILE)
@given(st.integers(min_value=0, max_value=200), st.sampled_from(["[", '{"a":', '{"input": [']))
def test_json_limits_bound_nesting(depth: int, opener: str) -> None:
    closer = {"[": "]", '{"a":': "}", '{"input": [': "]}"}[opener]
    levels = depth * (2 if opener == '{"input": [' else 1)
    raw = opener * depth + "1" + closer * depth
    try:
        json_limits.load(raw)
    except json_limits.UnacceptableJSON:
        assert levels > json_limits.MAX_DEPTH
    else:
        assert levels <= json_limits.MAX_DEPTH


# -- the request models ------------------------------------------------------------------------

SIMPLE_MODELS = [SearchRequest, CrawlRequest, CreateKey, WorkspacePolicy, CreateConversation, PostMessage]


@pytest.mark.parametrize("model", SIMPLE_MODELS, ids=lambda m: m.__name__)
def test_simple_models_validate_or_name_the_parameter(model: type[BaseModel]) -> None:
    @settings(PROFILE)
    @given(st.one_of(bodies(list(model.model_fields)), json_values))
    def check(raw: Any) -> None:
        body = through_the_boundary(raw)
        parsed = validated(model, body)
        if isinstance(parsed, PostMessage) and isinstance(parsed.content, list):
            message_text({"content": [part.wire() for part in parsed.content]})

    check()


@settings(PROFILE)
@given(st.one_of(bodies(list(ChatCompletionRequest.model_fields)), json_values))
def test_chat_completion_requests(raw: Any) -> None:
    body = through_the_boundary(raw)
    parsed = validated(ChatCompletionRequest, body)
    if parsed is None:
        return
    try:
        parsed.check()
    except InvalidRequest as exc:
        assert_named_400(exc, body)
        return
    messages = [m.forwarded() for m in parsed.messages]
    json.dumps(messages)  # forwarded upstream as JSON
    expect_4xx(validate_messages, messages)


BOT = default_bot(Settings(home=Path("unused")))
LINKS = LinkSigner(b"secret", "http://127.0.0.1:8080", 3600)
PREVIOUS = StoredResponse(
    "resp_1", BOT.id, {}, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]
)


def _load_response(response_id: str) -> StoredResponse:
    if response_id == "resp_1":
        return PREVIOUS
    raise NotFound(f"No stored response {response_id!r}.", param="previous_response_id")


class _Stores:
    """Vector stores as the turn preparer sees them: "general" exists, its one file matches every filter."""

    def check_usable(self, workspace: str, store_id: str, param: str) -> None:
        if store_id != "general":
            raise NotFound(f"No vector store with id {store_id!r}.", param=param)

    def matching_documents(self, workspace: str, namespaces: Any, predicate: Any) -> set[str]:
        return {"doc_1"} if predicate({"file_id": "file_id", "document_id": "doc_1"}) else set()


class _Bots:
    def get(self, model_id: str | None, workspace: str = "default") -> Bot:
        if model_id not in (None, BOT.id):
            raise NotFound(f"The model {model_id!r} does not exist.", param="model", code="model_not_found")
        return BOT


class _Policies:
    def __init__(self, hidden: bool) -> None:
        self.hidden = hidden

    def sources_hidden(self, workspace: str, bot_policy: str) -> bool:
        return self.hidden


class _Answering:
    def check_supported(self, request: Any) -> None:
        """Every generator here does everything: what a request may ask is the translation's to check."""


@settings(PROFILE)
@given(st.one_of(bodies(list(ResponsesRequest.model_fields)), json_values), st.booleans())
def test_responses_requests_and_their_translation(raw: Any, hidden: bool) -> None:
    body = through_the_boundary(raw)
    parsed = validated(ResponsesRequest, body)
    if parsed is None:
        return
    turn = expect_4xx(translate, parsed, "default", load_response=_load_response, max_history_chars=1000)
    if turn is None:
        return
    json.dumps(turn.messages)  # stored for previous_response_id
    preparer = TurnPreparer(Settings(home=Path("unused")), _Bots(), _Policies(hidden), _Stores(), _Answering())  # type: ignore[arg-type]
    prepared = expect_4xx(preparer.prepare, turn.parsed)
    if prepared is not None:
        render_options(turn, prepared.policy, LINKS)


@settings(PROFILE)
@given(st.one_of(bodies(["id", *Bot.model_fields]), json_values))
def test_bot_fields(raw: Any) -> None:
    body = through_the_boundary(raw)
    if not isinstance(body, dict):
        return  # the route answers "expected a JSON object" before validate_bot
    try:
        bot = validate_bot(body, default_namespace="general")
    except InvalidRequest as exc:
        assert_named_400(exc, body)
        return
    json.dumps(bot.config())
