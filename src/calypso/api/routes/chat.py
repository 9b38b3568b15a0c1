"""POST /v1/chat/completions: OpenAI's Chat Completions with grounded citations.

The message carries ``annotations`` (nested ``url_citation``, seed 000) and
``citations`` (seed 004) in the bot's marker style; see docs/citations-chat.md.
The SSE helpers here are shared with the conversations API.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from calypso.api.auth import current_workspace
from calypso.api.deps import json_object, link_signer, services
from calypso.api.sse import sse_data, sse_response
from calypso.citations.chat_render import ChatStreamRenderer, RenderedChat, render_chat, style_for
from calypso.citations.composer import MarkerEvent, TextEvent
from calypso.citations.events import AnswerEvent, Done, Retrieved, ToolCallsEvent
from calypso.citations.grounded import GroundedAnswer
from calypso.citations.links import LinkSigner
from calypso.errors import CalypsoError, InvalidRequest
from calypso.services.answering import Answerer
from calypso.services.bots import ask_request

log = logging.getLogger("calypso.api.chat")
router = APIRouter(prefix="/v1", tags=["chat"])


# -- request ---------------------------------------------------------------------------------


class ChatMessage(BaseModel):
    # Extra keys are allowed because clients send earlier replies back as returned
    # (refusal, annotations, citations…); seed 004: they are ignored on input.
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def forwarded(self) -> dict:
        """The fields the model needs; markers in earlier assistant content stay in place."""
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        for key in ("name", "tool_calls", "tool_call_id"):
            if getattr(self, key) is not None:
                message[key] = getattr(self, key)
        return message


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: bool = False
    include_obfuscation: bool | None = None  # accepted for SDK compatibility; we never pad chunks


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    messages: list[ChatMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    # Accepted and ignored: they change nothing about a grounded answer.
    user: str | None = None
    store: bool | None = None
    service_tier: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None

    def check(self) -> None:
        if self.n not in (None, 1):
            raise InvalidRequest(
                f"n must be 1 (got {self.n}): Calypso returns one grounded answer per request.", param="n"
            )
        if not self.messages:
            raise InvalidRequest("messages is empty: send at least one user message.", param="messages")
        if self.stream_options is not None and not self.stream:
            raise InvalidRequest("stream_options is only allowed when stream is true.", param="stream_options")
        if self.tool_choice is not None and not self.tools:
            raise InvalidRequest("tool_choice is only allowed when tools are given.", param="tool_choice")
        if self.max_tokens and self.max_completion_tokens and self.max_tokens != self.max_completion_tokens:
            raise InvalidRequest(
                "max_tokens and max_completion_tokens disagree; send only max_completion_tokens.", param="max_tokens"
            )
        if self.metadata is not None and (
            len(self.metadata) > 16 or any(len(k) > 64 or len(v) > 512 for k, v in self.metadata.items())
        ):
            raise InvalidRequest(
                "metadata takes at most 16 pairs, keys up to 64 and values up to 512 characters.", param="metadata"
            )


def _param(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


async def parse_body(request: Request, model: type[BaseModel]) -> Any:
    """Validate a JSON body; every problem becomes a 400 in OpenAI's shape naming the parameter."""
    body = await json_object(request)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        param = _param(tuple(error["loc"]))
        if error["type"] == "extra_forbidden":
            accepted = ", ".join(model.model_fields) if len(error["loc"]) == 1 else "see the API reference"
            message = f"Unrecognized request argument supplied: {param}. Remove it (accepted: {accepted})."
            code = "unknown_parameter"
        elif error["type"] == "missing":
            message, code = f"Missing required parameter: {param}.", "missing_required_parameter"
        else:
            message, code = f"Invalid value for {param}: {error['msg']}.", "invalid_value"
        raise InvalidRequest(message, param=param, code=code) from exc


# -- responses -------------------------------------------------------------------------------


def usage_object(answer: GroundedAnswer) -> dict:
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }


def message_object(answer: GroundedAnswer, rendered: RenderedChat) -> dict:
    """The assistant message: ``citations`` is always present (seed 004), ``tool_calls`` null when none."""
    return {
        "role": "assistant",
        "content": rendered.content if rendered.content or not answer.tool_calls else None,
        "refusal": None,
        "annotations": rendered.annotations,
        "tool_calls": answer.tool_calls or None,
        "citations": rendered.citations,
        "_aicore": rendered.grounding,
    }


def completion_object(completion_id: str, model: str, answer: GroundedAnswer, rendered: RenderedChat) -> dict:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message_object(answer, rendered),
                "logprobs": None,
                "finish_reason": answer.finish_reason,
            }
        ],
        "usage": usage_object(answer),
        "system_fingerprint": None,
    }


class ChunkWriter:
    """``chat.completion.chunk`` payloads as OpenAI sends them (``usage: null`` on each when usage is asked)."""

    def __init__(self, chunk_id: str, model: str, include_usage: bool, extra: dict | None = None) -> None:
        self.id, self.model, self.include_usage = chunk_id, model, include_usage
        self.created = int(time.time())
        self.extra = extra or {}

    def chunk(self, delta: dict, finish_reason: str | None = None) -> str:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            **self.extra,
        }
        if self.include_usage:
            payload["usage"] = None
        return sse_data(payload)

    def usage(self, answer: GroundedAnswer) -> str:
        payload = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [],
            "usage": usage_object(answer),
            **self.extra,
        }
        return sse_data(payload)


def error_event(exc: BaseException, prefix: str = "") -> str:
    """The ``data: {"error": ...}`` event a stream ends with when it fails after starting."""
    if isinstance(exc, CalypsoError):
        payload = exc.to_dict()
    else:
        log.exception("chat stream failed", exc_info=exc)
        payload = {
            "error": {
                "message": "Internal server error; see the server log.",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        }
    payload["error"]["message"] = prefix + payload["error"]["message"]
    return sse_data(payload)


async def prime(events: AsyncIterator[AnswerEvent]) -> list[AnswerEvent]:
    """Run the answer up to its first output, so bad requests and an upstream that fails
    before its first token are ordinary HTTP errors instead of errors inside a 200 stream."""
    buffered: list[AnswerEvent] = []
    try:
        async for event in events:
            buffered.append(event)
            if not isinstance(event, Retrieved):
                break
    except BaseException:
        await events.aclose()
        raise
    return buffered


OnDone = Callable[[GroundedAnswer, RenderedChat], Awaitable[None]]


async def chat_chunks(
    events: AsyncIterator[AnswerEvent],
    buffered: list[AnswerEvent],
    writer: ChunkWriter,
    style: str,
    citing: bool,
    links: LinkSigner,
    on_done: OnDone | None = None,
    error_prefix: str = "",
) -> AsyncIterator[str]:
    """The SSE body: role chunk, content deltas, [appendix], annotations chunk, finish chunk
    (with ``citations``), usage chunk, ``[DONE]``. ``on_done`` runs before the finish chunk
    (the conversations API stores the turn there); if it fails, the client gets the error instead."""
    yield writer.chunk({"role": "assistant", "content": "", "refusal": None})
    renderer: ChatStreamRenderer | None = None

    async def handle(event: AnswerEvent) -> list[str]:
        nonlocal renderer
        if isinstance(event, Retrieved):
            renderer = ChatStreamRenderer(event.sources, style, citing, links)
            return []
        assert renderer is not None  # Retrieved always comes first
        if isinstance(event, (TextEvent, MarkerEvent)):
            delta = renderer.delta(event)
            return [writer.chunk({"content": delta})] if delta else []
        if isinstance(event, ToolCallsEvent):
            return [writer.chunk({"tool_calls": [{"index": i, **call} for i, call in enumerate(event.calls)]})]
        if not isinstance(event, Done):
            return []
        answer = event.answer
        tail, rendered = renderer.finish(answer)
        if on_done is not None:
            await on_done(answer, rendered)
        out = [writer.chunk({"content": tail})] if tail else []
        if rendered.annotations:
            out.append(writer.chunk({"annotations": rendered.annotations}))
        # Seed 004: the finish chunk carries citations when they are an array, omits them when null.
        finish: dict[str, Any] = {} if rendered.citations is None else {"citations": rendered.citations}
        finish["_aicore"] = rendered.grounding
        out.append(writer.chunk(finish, answer.finish_reason))
        if writer.include_usage:
            out.append(writer.usage(answer))
        out.append(sse_data("[DONE]"))
        return out

    try:
        for event in buffered:
            for chunk in await handle(event):
                yield chunk
        async for event in events:
            for chunk in await handle(event):
                yield chunk
    except Exception as exc:  # noqa: BLE001 - reported to the client, then the stream closes
        yield error_event(exc, error_prefix)
    finally:
        await events.aclose()


class GuardedStream(StreamingResponse):
    """An SSE response that runs ``on_close`` however it ends.

    Starlette never closes a body it did not start (a client that left before
    the first byte); this closes the answer stream, and releases any lock, then too.
    """

    def __init__(self, base: StreamingResponse, on_close: Callable[[], Awaitable[None]]) -> None:
        self.__dict__.update(base.__dict__)
        self._on_close = on_close

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._on_close()


# -- the route -------------------------------------------------------------------------------


@router.post("/chat/completions")
async def create_chat_completion(request: Request) -> Any:
    """OpenAI's Chat Completions; `model` names a bot (GET /v1/models)."""
    body: ChatCompletionRequest = await parse_body(request, ChatCompletionRequest)
    body.check()
    workspace = current_workspace(request)
    found = services(request)
    bot = found.bots.get(body.model, workspace=workspace)
    answerer: Answerer = found.answering
    ask = ask_request(
        bot,
        [m.forwarded() for m in body.messages],
        workspace=workspace,
        temperature=body.temperature,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        tools=body.tools,
        tool_choice=body.tool_choice,
    )
    links = link_signer(request)
    style = style_for(bot.marker_style, found.policies.sources_hidden(workspace, bot.sources_policy))
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    if not body.stream:
        answer = await answerer.answer(ask)
        rendered = render_chat(answer, style, links)
        return JSONResponse(completion_object(completion_id, bot.id, answer, rendered))

    events = answerer.stream(ask)
    buffered = await prime(events)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    writer = ChunkWriter(completion_id, bot.id, include_usage)
    citing = ask.knowledge_base and ask.include_citations
    chunks = chat_chunks(events, buffered, writer, style, citing, links)
    return GuardedStream(sse_response(request, chunks), events.aclose)
