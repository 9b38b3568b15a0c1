"""The upstream backend: any OpenAI-compatible ``/chat/completions`` server.

Talks HTTP with httpx directly (not the openai SDK) so that streaming,
cancellation and retries are under our control:

* it always streams (``stream: true`` with ``stream_options.include_usage``)
  and parses the SSE ``data:`` lines itself, tolerating comments, blank lines,
  chunks without choices and a final usage-only chunk;
* 429, 5xx and connection failures are retried with exponential backoff
  (honouring ``Retry-After``) — but only while nothing has been yielded, since
  a half-streamed answer cannot be taken back;
* closing the async generator (the client went away) leaves the
  ``async with client.stream(...)`` block, which closes the upstream socket;
* each request first takes one of our own upstream slots (``slots.py``), so
  httpx's pool, sized to the same limit, never queues (encode/httpcore#1035).
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import httpx

from calypso.errors import UpstreamBusy, UpstreamError, UpstreamTimeout
from calypso.generation.base import (
    Finish,
    GenerationEvent,
    GenerationRequest,
    Generator,
    TextDelta,
    ToolCalls,
    Usage,
)
from calypso.generation.slots import UpstreamSlots

RETRIABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass
class UpstreamConfig:
    base_url: str  # e.g. "http://127.0.0.1:8000/v1"
    api_key: str | None = None
    model: str = ""
    timeout_seconds: float = 60.0  # longest wait for any read: the first token or the next one
    connect_timeout_seconds: float = 10.0
    max_connections: int = 256  # concurrent requests to the model server
    pool_timeout_seconds: float = 30.0  # longest wait for a free connection when all are busy
    max_retries: int = 2
    backoff_base_seconds: float = 0.5  # waits 0.5 s, 1 s, 2 s … between attempts
    backoff_max_seconds: float = 8.0
    max_retry_after_seconds: float = 30.0  # a longer Retry-After is not worth holding the client for


class _Transient(Exception):
    """A failure that happened before anything was yielded, so the request may be retried."""

    def __init__(self, error: UpstreamError, delay: float | None = None) -> None:
        super().__init__(error.message)
        self.error, self.delay = error, delay


# Failures this process met, by error code: ``/metrics`` reports them (``api/metrics.py``).
FAILURES: collections.Counter[str] = collections.Counter()


class UpstreamGenerator(Generator):
    calls_tools = True
    writes_json = True

    def __init__(
        self, config: UpstreamConfig, client: httpx.AsyncClient | None = None, slots: UpstreamSlots | None = None
    ) -> None:
        self.config = config
        self.name = f"upstream:{config.model}"
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._headers = {"accept": "text/event-stream"}
        if config.api_key:
            self._headers["authorization"] = f"Bearer {config.api_key}"
        self._client = client
        self._owns_client = client is None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._slots = slots or UpstreamSlots(config.max_connections, config.pool_timeout_seconds)

    def _get_client(self) -> httpx.AsyncClient:
        # An AsyncClient's pooled connections belong to one event loop; make a fresh one for a new loop.
        loop = asyncio.get_running_loop()
        if self._client is None or (self._owns_client and self._client_loop is not loop):
            config = self.config
            timeout = httpx.Timeout(
                config.timeout_seconds, connect=config.connect_timeout_seconds, pool=config.pool_timeout_seconds
            )
            limits = httpx.Limits(
                max_connections=config.max_connections, max_keepalive_connections=min(32, config.max_connections)
            )
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    def _payload(self, request: GenerationRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": request.model or self.config.model,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        optional = {
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "tools": request.tools,
            "tool_choice": request.tool_choice,
            "response_format": request.response_format,
        }
        payload.update({key: value for key, value in optional.items() if value is not None})
        # The client's other options, never overriding what Calypso sets (the stream, the messages).
        payload.update({key: value for key, value in request.options.items() if key not in payload})
        return payload

    def _backoff(self, attempt: int) -> float:
        return min(self.config.backoff_base_seconds * 2.0**attempt, self.config.backoff_max_seconds)

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        try:
            async with aclosing(self._stream(request)) as events:
                async for event in events:
                    yield event
        except UpstreamError as exc:
            FAILURES[exc.code or "upstream_error"] += 1
            raise

    async def _stream(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        payload = self._payload(request)
        attempt = 0
        while True:
            try:
                # aclosing: if our consumer closes us, the attempt (and its HTTP stream) closes right away.
                async with aclosing(self._attempt(payload)) as events:
                    async for event in events:
                        yield event
                return
            except _Transient as transient:
                if attempt >= self.config.max_retries:
                    raise transient.error from None
                delay = transient.delay if transient.delay is not None else self._backoff(attempt)
                if delay > self.config.max_retry_after_seconds:
                    raise transient.error from None
                await asyncio.sleep(delay)
                attempt += 1

    async def _attempt(self, payload: dict[str, Any]) -> AsyncGenerator[GenerationEvent, None]:
        """One HTTP request in one upstream slot, held until the request ends (not across retry waits)."""
        async with self._slots.slot(), aclosing(self._request(payload)) as events:
            async for event in events:
                yield event

    async def _request(self, payload: dict[str, Any]) -> AsyncGenerator[GenerationEvent, None]:
        """One HTTP request. Raises _Transient for retriable failures before the first yield."""
        yielded = False
        finished = False  # a finish_reason arrived: the answer is complete even if the tail is lost
        state = _StreamState()
        try:
            async with self._get_client().stream("POST", self._url, json=payload, headers=self._headers) as response:
                if not response.is_success:
                    await response.aread()
                    error = _status_error(response)
                    if response.status_code in RETRIABLE_STATUSES:
                        raise _Transient(error, _retry_after(response))
                    raise error
                if "json" in response.headers.get("content-type", ""):
                    # The server ignored stream=true and sent one chat.completion object.
                    await response.aread()
                    for event in _events_from_completion(_json_or_error(response.text)):
                        yield event
                    return
                async for data in _sse_data(response):
                    if data.strip() == "[DONE]":
                        state.done = True
                        break
                    for event in state.feed(_json_or_error(data)):
                        yielded = True
                        yield event
                    finished = state.finish_reason is not None
        except (_Transient, UpstreamError):
            raise
        except httpx.PoolTimeout:
            # Only with a shared client (our slots keep our own pool from queueing): not the model being slow.
            raise UpstreamBusy(
                f"Too many concurrent requests to the model server: all {self.config.max_connections} connections "
                f"(CALYPSO_LLM_MAX_CONNECTIONS) stayed busy for {self.config.pool_timeout_seconds:g} s "
                "(CALYPSO_LLM_POOL_TIMEOUT_SECONDS). Retry shortly, or raise the limit if the model server can take it."
            ) from None
        except httpx.ConnectTimeout:
            raise _Transient(
                UpstreamTimeout(
                    f"Could not connect to the upstream model server at {self.config.base_url} within "
                    f"{self.config.connect_timeout_seconds:g} s."
                )
            ) from None
        except httpx.TimeoutException:
            where = "between two tokens" if yielded else "for the first token"
            raise UpstreamTimeout(
                f"The upstream model server sent nothing for {self.config.timeout_seconds:g} s {where} "
                "(raise CALYPSO_LLM_TIMEOUT_SECONDS for slow models)."
            ) from None
        except httpx.ConnectError as exc:
            raise _Transient(
                UpstreamError(
                    f"Could not connect to the upstream model server at {self.config.base_url}: {exc}. "
                    "Check CALYPSO_LLM_BASE_URL and that the server is running.",
                    code="upstream_unreachable",
                )
            ) from None
        except httpx.TransportError as exc:
            if not finished:
                error = _interrupted(f"the connection failed ({exc or type(exc).__name__})")
                if yielded:
                    raise error from None
                raise _Transient(error) from None
            state.done = True  # the answer was complete; only the usage/[DONE] tail was lost
        if not state.done and state.finish_reason is None:
            if yielded:
                raise _interrupted("the upstream closed the stream mid-answer")
            raise _Transient(_interrupted("the upstream closed the stream before answering"))
        for event in state.final_events():
            yield event


class _StreamState:
    """Folds ``chat.completion.chunk`` objects into events; tool calls are assembled by index."""

    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.model: str | None = None
        self.done = False
        self.tool_calls: dict[int, dict[str, Any]] = {}

    def feed(self, chunk: Any) -> list[GenerationEvent]:
        if not isinstance(chunk, dict):
            raise UpstreamError("The upstream model server sent a malformed chunk.", code="upstream_bad_response")
        if chunk.get("error"):  # some servers report failures inside the stream
            raise UpstreamError(
                f"The upstream model server failed mid-stream: {_error_message(chunk)}", code="upstream_stream_error"
            )
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        events: list[GenerationEvent] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # we ask for one choice; ignore any others
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events.append(TextDelta(delta["content"]))
            for fragment in delta.get("tool_calls") or []:
                self._add_tool_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events

    def _add_tool_fragment(self, fragment: dict[str, Any]) -> None:
        call = self.tool_calls.setdefault(
            fragment.get("index", len(self.tool_calls)),
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if fragment.get("id") and not call["id"]:
            call["id"] = fragment["id"]
        function = fragment.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""

    def final_events(self) -> list[GenerationEvent]:
        events: list[GenerationEvent] = []
        if self.tool_calls:
            calls = [self.tool_calls[index] for index in sorted(self.tool_calls)]
            for index, call in enumerate(calls):
                call["id"] = call["id"] or f"call_{index}"
            events.append(ToolCalls(calls))
        reason = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        events.append(
            Finish(reason="tool_calls" if reason == "function_call" else reason, usage=self.usage, model=self.model)
        )
        return events


async def _sse_data(response: httpx.Response) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event; comments and other fields are skipped."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
        elif line.startswith("data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(" ") else value)
            # Tolerate servers that omit the blank line between events: a complete JSON line stands alone.
            if len(lines) == 1 and _is_json_or_done(lines[0]):
                yield lines.pop()
    if lines:
        yield "\n".join(lines)


def _is_json_or_done(text: str) -> bool:
    if text.strip() == "[DONE]":
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _json_or_error(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise UpstreamError(
            f"The upstream model server sent invalid JSON: {text[:200]!r}", code="upstream_bad_response"
        ) from None


def _events_from_completion(body: Any) -> list[GenerationEvent]:
    """A non-streamed ``chat.completion`` as the same events a stream would give."""
    state = _StreamState()
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices:
        raise UpstreamError(
            "The upstream model server sent a completion without choices.", code="upstream_bad_response"
        )
    message = choices[0].get("message") or {}
    fragments = [dict(call, index=i) for i, call in enumerate(message.get("tool_calls") or [])]
    chunk = {
        "model": body.get("model"),
        "usage": body.get("usage"),
        "choices": [
            {
                "index": 0,
                "finish_reason": choices[0].get("finish_reason") or "stop",
                "delta": {"content": message.get("content"), "tool_calls": fragments},
            }
        ],
    }
    return state.feed(chunk) + state.final_events()


def _usage(raw: dict[str, Any]) -> Usage:
    return Usage(
        prompt_tokens=int(raw.get("prompt_tokens") or 0), completion_tokens=int(raw.get("completion_tokens") or 0)
    )


def _interrupted(why: str) -> UpstreamError:
    return UpstreamError(f"The answer was cut off: {why}.", code="upstream_stream_interrupted")


def _error_message(body: Any) -> str:
    """The message of OpenAI's ``{"error": {"message": …}}`` (or of common variants)."""
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            return str(error.get("message") or json.dumps(error))
        if error is not None:
            return str(error)
    return json.dumps(body)[:500]


def _status_error(response: httpx.Response) -> UpstreamError:
    try:
        detail = _error_message(response.json())
    except ValueError:
        detail = response.text.strip()[:500] or response.reason_phrase
    status = response.status_code
    hint = " (check CALYPSO_LLM_API_KEY)" if status in (401, 403) else ""
    return UpstreamError(f"The upstream model server answered {status}: {detail}{hint}", code=f"upstream_{status}")


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if (millis := response.headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
