"""``POST /v1/responses`` into what the turn preparer takes, and render options (seed 000 + seed 003).

Everything here is validation and mapping: ``translate`` gives the ``TurnInput`` (``services/turns.py`` decides
the bot, the scope and the policy from it), ``render_options`` the reply's form from the request's controls and
the turn's policy. A stored response to continue from is read through the loader the route passes in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from calypso.api.schemas.responses import KNOWN_INCLUDES, ResponsesRequest
from calypso.api.translate.echo import echo
from calypso.api.translate.history import fit_history
from calypso.api.translate.items import chat_messages, item_dicts, items_by_id, listed
from calypso.api.translate.tools import narrowing, plan
from calypso.citations.links import LinkSigner
from calypso.dialects.responses import RenderOptions
from calypso.dialects.responses_wire import ResponseEcho
from calypso.errors import InvalidRequest
from calypso.models import StoredResponse
from calypso.services.turns import TurnInput, TurnPolicy

# previous_response_id -> the stored response; raises NotFound naming previous_response_id.
ResponseLoader = Callable[[str], StoredResponse]
# document ids -> each one's file attributes (``RenderOptions.file_attributes``)
FileAttributes = Callable[[list[str]], dict[str, dict[str, Any]]]


@dataclass(frozen=True)
class Controls:
    """How the reply is written, as the request asks (seed 000's controls, seed 003's include)."""

    inline: bool | None  # inline_citations asked (True), no_inline_citations (False), else the bot's default
    legacy: bool  # citation_compat "legacy"
    sources_appendix: bool
    annotate: bool  # False for a JSON reply


@dataclass(frozen=True)
class ResponsesTurn:
    """One request, translated: what to ask, how to render the answer, what the reply echoes."""

    parsed: TurnInput
    messages: list[dict[str, Any]]  # the conversation (without this turn's instructions), stored for the next
    controls: Controls
    echo: ResponseEcho
    input_items: list[dict[str, Any]]  # ``input`` as items, for GET /v1/responses/{id}/input_items


def translate(
    body: ResponsesRequest,
    workspace: str,
    *,
    load_response: ResponseLoader,
    max_history_chars: int,
    conversation: list[dict[str, Any]] | None = None,
) -> ResponsesTurn:
    """Validate ``body`` and map it; raises ``InvalidRequest``/``NotFound`` naming the field.

    ``conversation``: the chat messages of the stored conversation named by ``body.conversation``."""
    if body.background:
        raise InvalidRequest(
            "Background responses are not supported: Calypso answers while the request is open "
            "(stream: true shows progress). Send background: false or leave it out.",
            param="background",
            code="unsupported_parameter",
        )
    controls = _controls(body)
    history: list[dict[str, Any]] = []
    known: dict[str, dict[str, Any]] = {}
    if body.previous_response_id and body.conversation is not None:
        raise InvalidRequest(
            "previous_response_id and conversation cannot be used together; continue with one of them.",
            param="conversation",
            code="invalid_value",
        )
    if conversation is not None:
        history = list(conversation)
    if body.previous_response_id:
        previous = load_response(body.previous_response_id)
        # OpenAI: the earlier turn's instructions do not carry over (they are not stored in the history).
        history = list(previous.history)
        known = items_by_id(previous.body, previous.input_items)
    items = input_items(body.input)
    messages = history + chat_messages(items, known.get)
    if not messages:
        raise InvalidRequest(
            "The last item of input must be a user message (or a function_call_output); this input holds only "
            "items the model does not read (file_search_call, reasoning).",
            param="input",
            code="invalid_value",
        )
    if body.instructions:
        messages = [{"role": "system", "content": body.instructions}, *messages]
    messages = fit_history(messages, max_history_chars, truncate=body.truncation == "auto")
    tools = plan(body.tools or [], body.tool_choice, body.max_tool_calls)
    parsed = TurnInput(
        messages,
        workspace,
        body.model,
        narrowing(body.tools or []),
        inline_citations=controls.inline,
        temperature=body.temperature,
        max_tokens=body.max_output_tokens,
        tools=tools.functions,
        tool_choice=tools.tool_choice,
        response_format=body.text.response_format() if body.text else None,
        upstream_options=upstream_options(body, tools.functions is not None),
        retrieve=tools.retrieve,
        search_after_tool=True,
        search_conversation=True,
        params=("tools", "text.format"),
    )
    stored = messages[1:] if body.instructions else messages  # fit_history keeps system messages in place
    return ResponsesTurn(parsed, stored, controls, echo(body), items)


def upstream_options(body: ResponsesRequest, functions: bool) -> dict[str, Any]:
    """The request's sampling options in Chat Completions' names, for the upstream."""
    options: dict[str, Any] = {}
    if body.top_p is not None:
        options["top_p"] = body.top_p
    if functions and body.parallel_tool_calls is not None:
        options["parallel_tool_calls"] = body.parallel_tool_calls
    if body.reasoning is not None and body.reasoning.effort is not None:
        options["reasoning_effort"] = body.reasoning.effort
    if body.text is not None and body.text.verbosity is not None:
        options["verbosity"] = body.text.verbosity
    return options


def input_items(raw: str | list[Any]) -> list[dict[str, Any]]:
    """``input`` as items: a string is one user message (``api/translate/items.py`` maps them to messages)."""
    if isinstance(raw, str):
        if not raw.strip():
            raise InvalidRequest("input is empty; send the question as a string or a list of items.", param="input")
        return [listed({"type": "message", "role": "user", "content": raw})]
    if not raw:
        raise InvalidRequest("input is an empty list; send at least one user message.", param="input")
    return item_dicts(raw)


def input_messages(raw: str | list[Any], known: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """``input`` as chat messages, references resolved from ``known`` (the others dropped)."""
    return chat_messages(input_items(raw), (known or {}).get, strict=False)


def _control(body: ResponsesRequest, key: str) -> object:
    """citation_compat / sources_appendix: top level, then metadata, then metadata._aicore (seed 000).

    A value from metadata is whatever the client sent; ``render_options`` checks it.
    """
    value = getattr(body, key)
    metadata = body.metadata or {}
    nested = metadata.get("_aicore")
    if not isinstance(nested, dict):
        nested = {}
    for candidate in (value, metadata.get(key), nested.get(key)):
        if candidate is not None:
            return candidate
    return None


def _controls(body: ResponsesRequest) -> Controls:
    """Inline links, compat mode and appendix as ``include`` and the controls ask (400s naming them)."""
    include = set(body.include or [])
    unknown = include - KNOWN_INCLUDES
    if unknown:
        raise InvalidRequest(
            f"Unknown include value {sorted(unknown)[0]!r}; supported: {', '.join(sorted(KNOWN_INCLUDES))}.",
            param="include",
        )
    compat = _control(body, "citation_compat") or "legacy"
    appendix = _control(body, "sources_appendix") or "include"
    if compat not in ("legacy", "native"):
        raise InvalidRequest("citation_compat must be 'legacy' or 'native'.", param="metadata.citation_compat")
    if appendix not in ("omit", "include"):
        raise InvalidRequest("sources_appendix must be 'omit' or 'include'.", param="metadata.sources_appendix")
    # Seed 003: no_inline_citations always wins; neither: the bot's default (the turn preparer's).
    inline = False if "no_inline_citations" in include else True if "inline_citations" in include else None
    annotate = not (body.text and body.text.response_format())
    return Controls(inline, compat == "legacy", appendix != "omit", annotate)


def render_options(
    turn: ResponsesTurn, policy: TurnPolicy, links: LinkSigner, file_attributes: FileAttributes | None = None
) -> RenderOptions:
    """The reply's form: the request's controls under the turn's policy (hidden sources show no links)."""
    controls = turn.controls
    return RenderOptions(
        links=links,
        annotate=controls.annotate,
        inline=policy.inline_links,
        legacy=controls.legacy,
        sources_appendix=controls.sources_appendix,
        hidden=policy.sources_hidden,
        file_attributes=file_attributes,
    )


def stored_response(
    turn: ResponsesTurn, response: dict[str, Any], raw_answer: str, tool_calls: list[dict[str, Any]] | None = None
) -> StoredResponse:
    """The record a later ``previous_response_id`` continues from."""
    # The continuation keeps the model's own markers, as seed 004 advises for replayed history.
    reply: dict[str, Any] = {"role": "assistant", "content": raw_answer}
    if tool_calls:
        reply = {"role": "assistant", "content": raw_answer or None, "tool_calls": tool_calls}
    history = [*turn.messages, reply]
    return StoredResponse(response["id"], response["model"], response, history, turn.input_items)
