"""Streaming answers as Chat Completions chunks (chat and conversations), and how any stream fails.

``failure`` is the one stream-failure path: every dialect ends a failed stream
with the error body it returns (Chat Completions: a ``data: {"error": ...}``
chunk; Responses: ``error`` + ``response.failed``). SSE framing is in ``api/sse.py``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, StrictBool
from starlette.types import Receive, Scope, Send

from calypso.api.errors import internal_error, log_server_error, log_unexpected
from calypso.api.sse import sse_data
from calypso.citations.events import AnswerEvent, Done, MarkerEvent, Retrieved, SentenceEvent, TextEvent, ToolCallsEvent
from calypso.citations.grounded import GroundedAnswer
from calypso.citations.links import LinkSigner
from calypso.dialects.chat import ChatStreamRenderer, RenderedChat
from calypso.dialects.styles import RenderStyle
from calypso.errors import CalypsoError

# stream_options only with stream: true (the routes check it), in the OpenAPI schema too.
STREAM_OPTIONS_ALONE = "The 'stream_options' parameter is only allowed when 'stream' is enabled."  # OpenAI's words
STREAM_OPTIONS_NEED_STREAM: dict[str, Any] = {
    "if": {"required": ["stream_options"], "properties": {"stream_options": {"type": "object"}}},
    "then": {"required": ["stream"], "properties": {"stream": {"const": True}}},
}


def failure(exc: BaseException, request_id: str) -> dict[str, Any]:
    """The OpenAI error body ``{"error": {message, type, param, code}}`` a failed stream ends with.

    A ``CalypsoError`` says what went wrong; anything else is logged with its
    traceback and the request id, and the client gets only the id.
    """
    if isinstance(exc, CalypsoError):
        log_server_error(exc, request_id, "stream")
        return exc.to_dict()
    log_unexpected(exc, request_id, "stream")
    return internal_error(request_id)


def error_event(exc: BaseException, request_id: str, prefix: str = "") -> str:
    """The ``data: {"error": ...}`` chunk a Chat Completions stream ends with when it fails after starting."""
    payload = failure(exc, request_id)
    payload["error"]["message"] = prefix + payload["error"]["message"]
    return sse_data(payload)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: StrictBool = False
    include_obfuscation: StrictBool | None = None  # accepted for SDK compatibility; we never pad chunks


def usage_object(answer: GroundedAnswer) -> dict[str, int]:
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }


class ChunkWriter:
    """``chat.completion.chunk`` payloads as OpenAI sends them (``usage: null`` on each when usage is asked)."""

    def __init__(self, chunk_id: str, model: str, include_usage: bool, extra: dict[str, Any] | None = None) -> None:
        self.id, self.model, self.include_usage = chunk_id, model, include_usage
        self.created = int(time.time())
        self.extra = extra or {}

    def _payload(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": choices,
            **self.extra,
        }

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> str:
        payload = self._payload([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}])
        if self.include_usage:
            payload["usage"] = None
        return sse_data(payload)

    def usage(self, answer: GroundedAnswer) -> str:
        return sse_data({**self._payload([]), "usage": usage_object(answer)})


async def prime(events: AsyncGenerator[AnswerEvent, None]) -> list[AnswerEvent]:
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
    events: AsyncGenerator[AnswerEvent, None],
    buffered: list[AnswerEvent],
    writer: ChunkWriter,
    style: RenderStyle,
    links: LinkSigner,
    *,
    request_id: str,
    on_done: OnDone | None = None,
    error_prefix: str = "",
) -> AsyncGenerator[str, None]:
    """The SSE body: role chunk, content deltas, [appendix], annotations chunk, finish chunk
    (with ``citations``), usage chunk, ``[DONE]``. ``on_done`` runs before the finish chunk
    (the conversations API stores the turn there); if it fails, the client gets the error instead.
    Any failure ends the stream with ``error_event`` (logged with ``request_id`` when unexpected)."""
    yield writer.chunk({"role": "assistant", "content": "", "refusal": None})
    renderer: ChatStreamRenderer | None = None

    async def handle(event: AnswerEvent) -> list[str]:
        nonlocal renderer
        if isinstance(event, Retrieved):
            renderer = ChatStreamRenderer.start(event, style, links)
            return []
        assert renderer is not None  # Retrieved always comes first
        if isinstance(event, (TextEvent, MarkerEvent)):
            delta = renderer.delta(event)
            return [writer.chunk({"content": delta})] if delta else []
        if isinstance(event, ToolCallsEvent):
            return [writer.chunk({"tool_calls": [{"index": i, **call} for i, call in enumerate(event.calls)]})]
        if isinstance(event, SentenceEvent):
            # Beside the content, as the finish chunk's ``_aicore`` is: clients read unknown delta fields or skip them.
            return [writer.chunk({"_aicore": {"sentence": renderer.sentence(event)}})]
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
        yield error_event(exc, request_id, error_prefix)
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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._on_close()
