"""``POST /v1/responses`` into an ``AskRequest`` and render options (seed 000 + seed 003).

Everything here is validation and mapping; the route passes in what needs
storage (a file-id resolver, a stored-response loader), so this module never
touches the knowledge base itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from calypso.api.schemas.items import FileSearchTool
from calypso.api.schemas.responses import KNOWN_INCLUDES, ResponsesRequest
from calypso.api.translate.items import chat_messages, item_dicts, items_by_id, listed
from calypso.api.translate.tools import plan
from calypso.bots import Bot, bot_scope
from calypso.citations.links import LinkSigner
from calypso.dialects.responses import RenderOptions
from calypso.dialects.responses_wire import ResponseEcho
from calypso.errors import InvalidRequest
from calypso.models import StoredResponse
from calypso.retrieval.filters import Predicate
from calypso.scope import RetrievalScope, check_namespace
from calypso.services.answering import AskRequest, validate_messages
from calypso.services.bots import ask_request


class StoreResolver(Protocol):
    """What the file_search tool needs of vector stores (``VectorStoreService`` provides it)."""

    def check_usable(self, workspace: str, store_id: str, param: str) -> None:
        """NotFound (naming ``param``) for an unknown store, InvalidRequest for an expired one."""
        ...

    def matching_documents(self, workspace: str, namespaces: Sequence[str], predicate: Predicate) -> set[str]:
        """Ids of the documents of ``namespaces`` whose file attributes (and file_id, document_id) match."""
        ...

    def file_attributes(self, workspace: str, document_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each document's file attributes, by document id (documents without a store file: absent)."""
        ...


# previous_response_id -> the stored response; raises NotFound naming previous_response_id.
ResponseLoader = Callable[[str], StoredResponse]


@dataclass
class ResponsesTurn:
    """One request, translated: what to ask, how to render the answer, what the reply echoes."""

    ask: AskRequest
    messages: list[dict[str, Any]]  # the conversation (without this turn's instructions), stored for the next
    options: RenderOptions
    echo: ResponseEcho
    input_items: list[dict[str, Any]]  # ``input`` as items, for GET /v1/responses/{id}/input_items


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
    conversation: list[dict[str, Any]] | None = None,
) -> ResponsesTurn:
    """Validate ``body`` for ``bot`` and map it; raises ``InvalidRequest``/``NotFound`` naming the field.

    ``conversation``: the chat messages of the stored conversation named by ``body.conversation``."""
    if body.background:
        raise InvalidRequest(
            "Background responses are not supported: Calypso answers while the request is open "
            "(stream: true shows progress). Send background: false or leave it out.",
            param="background",
            code="unsupported_parameter",
        )
    options = render_options(body, bot, links, sources_hidden)
    options.file_attributes = lambda document_ids: stores.file_attributes(workspace, document_ids)
    scope = _scope(body, bot, workspace, stores)
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
    validate_messages(messages)
    tools = plan(body.tools or [], body.tool_choice, body.max_tool_calls, scope.knowledge_base)
    ask = ask_request(
        bot,
        messages,
        scope=scope,
        temperature=body.temperature,
        max_tokens=body.max_output_tokens,
        workspace=workspace,
        tools=tools.functions,
        tool_choice=tools.tool_choice,
    )
    ask.retrieve = tools.retrieve
    ask.search_after_tool = True
    ask.search_conversation = True
    ask.response_format = body.text.response_format() if body.text else None
    ask.upstream_options = upstream_options(body, tools.functions is not None)
    ask.params = ("tools", "text.format")
    stored = messages[1:] if body.instructions else messages  # fit_history keeps system messages in place
    return ResponsesTurn(ask, stored, options, echo(body), items)


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


def _scope(body: ResponsesRequest, bot: Bot, workspace: str, stores: StoreResolver) -> RetrievalScope:
    """Namespaces, documents and passage count from the bot, narrowed by a file_search tool.

    ``vector_store_ids`` replace the bot's namespaces (a store is a namespace; an unknown one is a 404);
    ``filters`` select the files of those stores whose attributes match (``retrieval/filters.py``).
    """
    scope = bot_scope(bot)
    for i, tool in enumerate(body.tools or []):  # each checked at the edge (``FileSearchTool``)
        if not isinstance(tool, FileSearchTool):
            continue  # a function: the upstream's (``translate/tools.py``)
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
        annotate=not (body.text and body.text.response_format()),
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
        tool_choice=_choice_echo(body.tool_choice),
        tools=[_tool_echo(tool.model_dump(exclude_unset=True)) for tool in body.tools or []],
        top_p=body.top_p,
        text=body.text.echo() if body.text else {"format": {"type": "text"}, "verbosity": "medium"},
        parallel_tool_calls=body.parallel_tool_calls is not False,
        max_tool_calls=body.max_tool_calls,
        reasoning=body.reasoning.model_dump(exclude_none=True) if body.reasoning else None,
        service_tier=body.service_tier or "default",
        top_logprobs=body.top_logprobs,
        prompt_cache_key=body.prompt_cache_key,
        safety_identifier=body.safety_identifier,
        conversation=conversation_id(body),
        truncation=body.truncation or "disabled",
        user=body.user,
        metadata={k: v for k, v in (body.metadata or {}).items() if k != "_aicore"},
    )


def conversation_id(body: ResponsesRequest) -> str | None:
    """The id ``conversation`` names (a string or ``{"id": …}``)."""
    ref = body.conversation
    return ref if isinstance(ref, str) or ref is None else ref.id


def _choice_echo(choice: Any) -> str | dict[str, Any]:
    if choice is None:
        return "auto"
    return choice if isinstance(choice, str) else dict(choice.model_dump(exclude_none=True))


def _tool_echo(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as OpenAI's response object shows it (a function's ``strict`` and ``parameters`` filled in)."""
    if tool.get("type") == "function":
        return {"parameters": None, "strict": True, "description": None, **tool}
    return tool


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
