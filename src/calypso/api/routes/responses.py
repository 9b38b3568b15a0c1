"""POST /v1/responses (seed 000 + seed 003), GET/DELETE /v1/responses/{id}."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from calypso.api.auth import current_workspace
from calypso.api.deps import Answering, Bots, Responses, link_signer, services
from calypso.api.sse import sse_event, sse_response
from calypso.bots import DEFAULT_BOT_ID, Bot, bot_scope
from calypso.citations.composer import MarkerEvent, TextEvent
from calypso.citations.grounded import GroundedAnswer
from calypso.citations.responses_render import (
    InlineLinker,
    RenderOptions,
    aicore_metadata,
    all_source_urls,
    file_citation,
    file_search_results,
    render_text_and_annotations,
    url_citation,
)
from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.models import StoredResponse
from calypso.scope import RetrievalScope, check_namespace
from calypso.services.answering import Answerer, AskRequest, Done, Retrieved, message_text, validate_messages
from calypso.services.bots import BotService, ask_request

router = APIRouter(prefix="/v1", tags=["responses"])

KNOWN_INCLUDES = {"file_search_call.results", "inline_citations", "no_inline_citations", "message.output_text.logprobs"}
_CONTROL_KEYS = ("citation_compat", "sources_appendix")


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str = DEFAULT_BOT_ID
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict | None = None
    include: list[str] | None = None
    metadata: dict[str, Any] | None = None
    citation_compat: Literal["legacy", "native"] | None = None
    sources_appendix: Literal["omit", "include"] | None = None
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1)
    parallel_tool_calls: bool | None = None
    user: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    text: dict[str, Any] | None = None


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


# -- request -> AskRequest ------------------------------------------------------------------


def _input_messages(raw: str | list[dict]) -> list[dict]:
    if isinstance(raw, str):
        if not raw.strip():
            raise InvalidRequest("input is empty; send the question as a string or a list of messages.", param="input")
        return [{"role": "user", "content": raw}]
    if not raw:
        raise InvalidRequest("input is an empty list; send at least one user message.", param="input")
    messages = []
    for i, item in enumerate(raw):
        kind = item.get("type", "message")
        if kind != "message":
            raise InvalidRequest(
                f"input[{i}] has unsupported type {kind!r}; only messages are accepted.", param=f"input[{i}].type"
            )
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise InvalidRequest(f"input[{i}] has unknown role {role!r}.", param=f"input[{i}].role")
        content = item.get("content")
        if not isinstance(content, (str, list)):
            raise InvalidRequest(
                f"input[{i}].content must be a string or a list of parts.", param=f"input[{i}].content"
            )
        text = content if isinstance(content, str) else message_text({"content": content})
        messages.append({"role": "system" if role == "developer" else role, "content": text})
    return messages


def _filter_document_ids(request: Request, filters: dict, param: str, workspace: str) -> set[str]:
    """OpenAI attribute filters on ``document_id`` / ``file_id``: eq, in, and or-combinations of them."""
    kind = filters.get("type")
    if kind == "or" and isinstance(filters.get("filters"), list):
        ids: set[str] = set()
        for i, inner in enumerate(filters["filters"]):
            ids |= _filter_document_ids(request, inner, f"{param}.filters[{i}]", workspace)
        return ids
    key, value = filters.get("key"), filters.get("value")
    if kind not in ("eq", "in") or key not in ("document_id", "file_id"):
        raise InvalidRequest(
            "Only filters on document_id or file_id with type eq or in (optionally combined with or) are supported.",
            param=param,
        )
    values = value if kind == "in" and isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in values):
        raise InvalidRequest("Filter values must be strings (ids).", param=f"{param}.value")
    if key == "file_id":
        documents = services(request).documents
        found = set()
        for file_id in values:
            try:
                found.add(documents.get_by_file_id(file_id, workspace).id)
            except NotFound:
                pass  # an unknown file simply matches nothing
        return found
    return set(values)


def _scope(request: Request, body: ResponsesRequest, bot: Bot, workspace: str) -> RetrievalScope:
    """Namespaces, documents and passage count from the bot, narrowed by a file_search tool."""
    scope = bot_scope(bot)
    for i, tool in enumerate(body.tools or []):
        if tool.get("type") != "file_search":
            raise InvalidRequest(
                f"tools[{i}] has type {tool.get('type')!r}; this server supports only file_search.",
                param=f"tools[{i}].type",
            )
        unknown = set(tool) - {"type", "vector_store_ids", "max_num_results", "filters", "ranking_options"}
        if unknown:
            raise InvalidRequest(
                f"Unknown field {sorted(unknown)[0]!r} in tools[{i}].", param=f"tools[{i}].{sorted(unknown)[0]}"
            )
        stores = tool.get("vector_store_ids")
        if stores is not None:
            if not isinstance(stores, list) or not stores:
                raise InvalidRequest(
                    "vector_store_ids must be a non-empty list of namespaces.", param=f"tools[{i}].vector_store_ids"
                )
            namespaces = tuple(check_namespace(s, f"tools[{i}].vector_store_ids") for s in stores)
            scope = replace(scope, namespaces=namespaces)
        count = tool.get("max_num_results")
        if count is not None:
            if not isinstance(count, int) or not 1 <= count <= 50:
                raise InvalidRequest(
                    "max_num_results must be an integer from 1 to 50.", param=f"tools[{i}].max_num_results"
                )
            scope = replace(scope, passage_count=count)
        if tool.get("filters") is not None:
            ids = _filter_document_ids(request, tool["filters"], f"tools[{i}].filters", workspace)
            allowed = scope.document_ids
            # A bot restricted to documents never widens beyond them.
            scope = replace(scope, document_ids=tuple(sorted(ids if allowed is None else ids & set(allowed))))
    return scope


def _control(body: ResponsesRequest, key: str) -> str | None:
    """citation_compat / sources_appendix: top level, then metadata, then metadata._aicore (seed 000)."""
    value = getattr(body, key)
    metadata = body.metadata or {}
    nested = metadata.get("_aicore") if isinstance(metadata.get("_aicore"), dict) else {}
    for candidate in (value, metadata.get(key), nested.get(key)):
        if candidate is not None:
            return candidate
    return None


def _render_options(request: Request, body: ResponsesRequest, bot: Bot, workspace: str) -> RenderOptions:
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
    inline = ("inline_citations" in include or bot.inline_citations) and "no_inline_citations" not in include
    hidden = services(request).policies.sources_hidden(workspace, bot.sources_policy)
    return RenderOptions(
        links=link_signer(request),
        inline=inline and not hidden,
        legacy=compat == "legacy",
        sources_appendix=appendix != "omit",
        hidden=hidden,
    )


def _echo_metadata(body: ResponsesRequest) -> dict:
    return {k: v for k, v in (body.metadata or {}).items() if k != "_aicore"}


# -- the response object --------------------------------------------------------------------


class ResponseBuilder:
    """Everything one reply needs to render itself, streamed or not."""

    def __init__(
        self, body: ResponsesRequest, bot: Bot, options: RenderOptions, history: list[dict], workspace: str
    ) -> None:
        self.workspace = workspace
        self.body = body
        self.bot = bot
        self.options = options
        self.history = history
        self.id = _new_id("resp")
        self.search_id = _new_id("fs")
        self.message_id = _new_id("msg")
        self.created_at = int(time.time())

    def skeleton(self, status: str, output: list[dict], **extra: Any) -> dict:
        body = self.body
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "model": self.bot.id,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": body.previous_response_id,
            "store": body.store,
            "temperature": body.temperature,
            "text": {"format": {"type": "text"}},
            "tool_choice": body.tool_choice or "auto",
            "tools": body.tools or [],
            "top_p": body.top_p,
            "truncation": body.truncation or "disabled",
            "usage": None,
            "user": body.user,
            "metadata": _echo_metadata(body),
            **extra,
        }

    def search_item(self, query: str | None, status: str, results: list | None) -> dict:
        return {
            "id": self.search_id,
            "type": "file_search_call",
            "status": status,
            "queries": [query] if query else [],
            "results": results,
        }

    def message_item(self, text: str, annotations: list[dict], status: str) -> dict:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}],
        }

    def complete(self, answer: GroundedAnswer, query: str | None) -> dict:
        text, annotations = render_text_and_annotations(answer, self.options)
        output = []
        if answer.retrieval_ran and answer.knowledge_base:
            output.append(self.search_item(query, "completed", file_search_results(answer, self.options)))
        output.append(self.message_item(text, annotations, "completed"))
        usage = {
            "input_tokens": answer.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": answer.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        }
        response = self.skeleton("completed", output, citations=all_source_urls(answer, self.options))
        response["usage"] = usage
        response["metadata"] = {**response["metadata"], "_aicore": aicore_metadata(answer, self.options)}
        return response

    def stored(self, response: dict, answer: GroundedAnswer) -> StoredResponse:
        # The continuation keeps the model's own markers, as seed 004 advises for replayed history.
        history = [*self.history, {"role": "assistant", "content": answer.raw_text}]
        return StoredResponse(self.id, self.bot.id, response, history)


# -- routes ---------------------------------------------------------------------------------


def _prepare(request: Request, body: ResponsesRequest, directory: BotService) -> tuple[AskRequest, ResponseBuilder]:
    workspace = current_workspace(request)
    bot = directory.get(body.model, workspace=workspace)
    options = _render_options(request, body, bot, workspace)
    scope = _scope(request, body, bot, workspace)
    history: list[dict] = []
    if body.previous_response_id:
        previous = services(request).responses.get(body.previous_response_id, workspace, "previous_response_id")
        history = list(previous.history)
    messages = history + _input_messages(body.input)
    if body.instructions:
        messages = [{"role": "system", "content": body.instructions}, *[m for m in messages if m["role"] != "system"]]
    validate_messages(messages)
    ask = ask_request(
        bot,
        messages,
        scope=scope,
        temperature=body.temperature,
        max_tokens=body.max_output_tokens,
        workspace=workspace,
    )
    return ask, ResponseBuilder(body, bot, options, messages, workspace)


async def _store(request: Request, builder: ResponseBuilder, response: dict, answer: GroundedAnswer) -> None:
    if builder.body.store:
        stored = builder.stored(response, answer)
        await asyncio.to_thread(
            services(request).responses.save, stored, builder.body.previous_response_id, builder.workspace
        )


@router.post("/responses")
async def create_response(
    request: Request,
    body: ResponsesRequest,
    directory: Bots,
    engine: Answering,
) -> Response:
    ask, builder = _prepare(request, body, directory)
    if body.stream:
        return sse_response(request, _stream(request, engine, ask, builder))
    query = None
    answer = None
    async for event in engine.stream(ask):
        if isinstance(event, Retrieved):
            query = event.query
        elif isinstance(event, Done):
            answer = event.answer
    assert answer is not None
    response = builder.complete(answer, query)
    await _store(request, builder, response, answer)
    return JSONResponse(response)


@router.get("/responses/{response_id}")
def get_response(response_id: str, responses: Responses, workspace: str = Depends(current_workspace)) -> dict:
    return responses.get(response_id, workspace).body


@router.delete("/responses/{response_id}")
def delete_response(response_id: str, responses: Responses, workspace: str = Depends(current_workspace)) -> dict:
    responses.delete(response_id, workspace)
    return {"id": response_id, "object": "response.deleted", "deleted": True}


# -- streaming ------------------------------------------------------------------------------


async def _stream(request: Request, engine: Answerer, ask: AskRequest, builder: ResponseBuilder) -> AsyncIterator[str]:
    sequence = 0

    def emit(kind: str, **payload: Any) -> str:
        nonlocal sequence
        event = {"type": kind, "sequence_number": sequence, **payload}
        sequence += 1
        return sse_event(kind, event)

    options = builder.options
    yield emit("response.created", response=builder.skeleton("in_progress", []))
    yield emit("response.in_progress", response=builder.skeleton("in_progress", []))
    output_index = 0
    query: str | None = None
    text_parts: list[str] = []
    annotations: list[dict] = []
    linker: InlineLinker | None = None
    sources: list = []

    def start_message() -> list[str]:
        return [
            emit(
                "response.output_item.added",
                output_index=output_index,
                item=builder.message_item("", [], "in_progress"),
            ),
            emit(
                "response.content_part.added",
                item_id=builder.message_id,
                output_index=output_index,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
            ),
        ]

    def delta(text: str) -> str:
        text_parts.append(text)
        return emit(
            "response.output_text.delta",
            item_id=builder.message_id,
            output_index=output_index,
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def annotation_added(annotation: dict) -> str:
        annotations.append(annotation)
        return emit(
            "response.output_text.annotation.added",
            item_id=builder.message_id,
            output_index=output_index,
            content_index=0,
            annotation_index=len(annotations) - 1,
            annotation=annotation,
        )

    try:
        async for event in engine.stream(ask):
            if isinstance(event, Retrieved):
                query = event.query
                if event.query is not None:
                    searching = builder.search_item(query, "in_progress", None)
                    yield emit("response.output_item.added", output_index=0, item=searching)
                    for phase in ("in_progress", "searching", "completed"):
                        yield emit(f"response.file_search_call.{phase}", output_index=0, item_id=builder.search_id)
                    preview = GroundedAnswer(text="", raw_text="", sources=event.sources)
                    done = builder.search_item(query, "completed", file_search_results(preview, options, final=False))
                    yield emit("response.output_item.done", output_index=0, item=done)
                    output_index = 1
                linker = InlineLinker(event.sources, options) if options.inline else None
                sources = event.sources
                for chunk in start_message():
                    yield chunk
            elif isinstance(event, TextEvent):
                yield delta(event.text)
            elif isinstance(event, MarkerEvent) and event.segment is not None and not options.hidden:
                segment = event.segment
                if linker is None:
                    text = "".join(text_parts)
                    for citation in event.added:
                        source = sources[citation.retrieval_number - 1]
                        yield annotation_added(file_citation(text, segment, citation, source))
                else:
                    written = sum(len(t) for t in text_parts)
                    piece, spans = linker.links(event.placement, segment, written)
                    if piece:
                        yield delta(piece)
                    full = "".join(text_parts)
                    seg_start = linker.shift(segment.start, inclusive=True)
                    seg_end = linker.shift(segment.end, inclusive=False)
                    for start, end, url, citation, source in spans:
                        yield annotation_added(
                            url_citation(start, end, url, segment, citation, source, seg_start, seg_end, full)
                        )
            elif isinstance(event, Done):
                answer = event.answer
                response = builder.complete(answer, query)
                text = response["output"][-1]["content"][0]["text"]
                final_annotations = response["output"][-1]["content"][0]["annotations"]
                part = {"type": "output_text", "text": text, "annotations": final_annotations, "logprobs": []}
                yield emit(
                    "response.output_text.done",
                    item_id=builder.message_id,
                    output_index=output_index,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
                yield emit(
                    "response.content_part.done",
                    item_id=builder.message_id,
                    output_index=output_index,
                    content_index=0,
                    part=part,
                )
                yield emit("response.output_item.done", output_index=output_index, item=response["output"][-1])
                await _store(request, builder, response, answer)
                yield emit("response.completed", response=response)
    except CalypsoError as exc:
        yield emit("error", code=exc.code or exc.type, message=exc.message, param=exc.param)
        failed = builder.skeleton("failed", [], error={"code": exc.code or exc.type, "message": exc.message})
        yield emit("response.failed", response=failed)
