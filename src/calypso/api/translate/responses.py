"""``POST /v1/responses`` into an ``AskRequest`` and render options (seed 000 + seed 003).

Everything here is validation and mapping; the route passes in what needs
storage (a file-id resolver, a stored-response loader), so this module never
touches the knowledge base itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from calypso.api.schemas.responses import KNOWN_INCLUDES, InputMessage, ResponsesRequest
from calypso.bots import Bot, bot_scope
from calypso.citations.links import LinkSigner
from calypso.dialects.responses import RenderOptions
from calypso.dialects.responses_wire import ResponseEcho
from calypso.errors import InvalidRequest
from calypso.models import StoredResponse
from calypso.retrieval.filters import Predicate
from calypso.scope import RetrievalScope, check_namespace
from calypso.services.answering import AskRequest, message_text, validate_messages
from calypso.services.bots import ask_request


class StoreResolver(Protocol):
    """What the file_search tool needs of vector stores (``VectorStoreService`` provides it)."""

    def check_usable(self, workspace: str, store_id: str, param: str) -> None:
        """NotFound (naming ``param``) for an unknown store, InvalidRequest for an expired one."""
        ...

    def matching_documents(self, workspace: str, namespaces: Sequence[str], predicate: Predicate) -> set[str]:
        """Ids of the documents of ``namespaces`` whose file attributes (and file_id, document_id) match."""
        ...


# previous_response_id -> the stored response; raises NotFound naming previous_response_id.
ResponseLoader = Callable[[str], StoredResponse]


@dataclass
class ResponsesTurn:
    """One request, translated: what to ask, how to render the answer, what the reply echoes."""

    ask: AskRequest
    messages: list[dict[str, Any]]  # the conversation as sent, stored so a later turn can continue it
    options: RenderOptions
    echo: ResponseEcho


def translate(
    body: ResponsesRequest,
    bot: Bot,
    workspace: str,
    *,
    links: LinkSigner,
    sources_hidden: bool,
    stores: StoreResolver,
    load_response: ResponseLoader,
    max_history_chars: int,
) -> ResponsesTurn:
    """Validate ``body`` for ``bot`` and map it; raises ``InvalidRequest``/``NotFound`` naming the field."""
    options = render_options(body, bot, links, sources_hidden)
    scope = _scope(body, bot, workspace, stores)
    history: list[dict[str, Any]] = []
    if body.previous_response_id:
        history = list(load_response(body.previous_response_id).history)
    messages = history + input_messages(body.input)
    if body.instructions:
        messages = [{"role": "system", "content": body.instructions}, *[m for m in messages if m["role"] != "system"]]
    messages = fit_history(messages, max_history_chars, truncate=body.truncation == "auto")
    validate_messages(messages)
    ask = ask_request(
        bot,
        messages,
        scope=scope,
        temperature=body.temperature,
        max_tokens=body.max_output_tokens,
        workspace=workspace,
    )
    return ResponsesTurn(ask, messages, options, echo(body))


def _chars(message: dict[str, Any]) -> int:
    content = message.get("content")
    return len(content) if isinstance(content, str) else len(str(content))


def fit_history(
    messages: list[dict[str, Any]], limit: int, *, truncate: bool, param: str = "input"
) -> list[dict[str, Any]]:
    """The conversation within ``limit`` characters: with ``truncation: "auto"`` the oldest turns are
    dropped (system messages and the newest message stay), as OpenAI does; otherwise a 400."""
    total = sum(_chars(m) for m in messages)
    if total <= limit:
        return messages
    if not truncate:
        raise InvalidRequest(
            f"The conversation is {total:,} characters long; the limit is {limit:,} (setting "
            'CALYPSO_MAX_HISTORY_CHARS). Send truncation: "auto" to drop the oldest turns, or start a new one.',
            param=param,
            code="context_length_exceeded",
        )
    kept = list(messages)
    droppable = [i for i, m in enumerate(kept[:-1]) if m["role"] != "system"]
    for index in droppable:  # oldest first
        if total <= limit:
            break
        total -= _chars(kept[index])
        kept[index] = {}
    kept = [m for m in kept if m]
    if total > limit:
        raise InvalidRequest(
            f"The newest message alone is over the {limit:,}-character limit (setting CALYPSO_MAX_HISTORY_CHARS).",
            param=param,
            code="context_length_exceeded",
        )
    return kept


def input_messages(raw: str | list[InputMessage]) -> list[dict[str, Any]]:
    """``input`` as chat messages: a string is one user message; ``developer`` becomes ``system``."""
    if isinstance(raw, str):
        if not raw.strip():
            raise InvalidRequest("input is empty; send the question as a string or a list of messages.", param="input")
        return [{"role": "user", "content": raw}]
    if not raw:
        raise InvalidRequest("input is an empty list; send at least one user message.", param="input")
    messages = []
    for item in raw:  # each checked at the edge (``InputMessage``)
        content = item.content
        if isinstance(content, list):
            content = message_text({"content": [part.model_dump(exclude_unset=True) for part in content]})
        messages.append({"role": "system" if item.role == "developer" else item.role, "content": content})
    return messages


def _scope(body: ResponsesRequest, bot: Bot, workspace: str, stores: StoreResolver) -> RetrievalScope:
    """Namespaces, documents and passage count from the bot, narrowed by a file_search tool.

    ``vector_store_ids`` replace the bot's namespaces (a store is a namespace; an unknown one is a 404);
    ``filters`` select the files of those stores whose attributes match (``retrieval/filters.py``).
    """
    scope = bot_scope(bot)
    for i, tool in enumerate(body.tools or []):  # each checked at the edge (``FileSearchTool``)
        store_ids = tool.vector_store_ids
        if store_ids is not None:
            namespaces = tuple(dict.fromkeys(check_namespace(s, f"tools[{i}].vector_store_ids") for s in store_ids))
            scope = replace(scope, namespaces=namespaces)
        if tool.max_num_results is not None:
            scope = replace(scope, passage_count=tool.max_num_results)
        if tool.ranking_options is not None:
            scope = replace(scope, ranking=tool.ranking_options.to_options())
        # Validation first (a 400 names what is wrong), then the lookups: an unknown store is a 404.
        for store_id in store_ids or ():
            stores.check_usable(workspace, store_id, f"tools[{i}].vector_store_ids")
        if tool.filters is not None:
            ids = stores.matching_documents(workspace, scope.namespaces, tool.filters.to_filter())
            allowed = scope.document_ids
            # A bot restricted to documents never widens beyond them.
            scope = replace(scope, document_ids=tuple(sorted(ids if allowed is None else ids & set(allowed))))
    return scope


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


def render_options(body: ResponsesRequest, bot: Bot, links: LinkSigner, sources_hidden: bool) -> RenderOptions:
    """Inline links, compat mode and appendix from ``include``, the controls and the bot's defaults."""
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
    # Seed 003: no_inline_citations always wins.
    inline = ("inline_citations" in include or bot.inline_citations) and "no_inline_citations" not in include
    return RenderOptions(
        links=links,
        inline=inline and not sources_hidden,
        legacy=compat == "legacy",
        sources_appendix=appendix != "omit",
        hidden=sources_hidden,
    )


def echo(body: ResponsesRequest) -> ResponseEcho:
    """What the response object repeats of the request; metadata without the ``_aicore`` controls."""
    return ResponseEcho(
        instructions=body.instructions,
        max_output_tokens=body.max_output_tokens,
        previous_response_id=body.previous_response_id,
        store=body.store,
        temperature=body.temperature,
        tool_choice=body.tool_choice or "auto",
        tools=[tool.model_dump(exclude_unset=True) for tool in body.tools or []],
        top_p=body.top_p,
        truncation=body.truncation or "disabled",
        user=body.user,
        metadata={k: v for k, v in (body.metadata or {}).items() if k != "_aicore"},
    )


def stored_response(turn: ResponsesTurn, response: dict[str, Any], raw_answer: str) -> StoredResponse:
    """The record a later ``previous_response_id`` continues from."""
    # The continuation keeps the model's own markers, as seed 004 advises for replayed history.
    history = [*turn.messages, {"role": "assistant", "content": raw_answer}]
    return StoredResponse(response["id"], response["model"], response, history)
