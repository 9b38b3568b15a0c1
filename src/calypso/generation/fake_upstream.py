"""A fake OpenAI-compatible chat server on loopback, for tests and benchmarks.

It is a real HTTP server (Starlette served by uvicorn in a background thread)
that replays scripted answers token by token, so the whole streaming path —
sockets, chunked encoding, SSE parsing, retries, timeouts, disconnects — is
exercised without a model::

    from calypso.generation.fake_upstream import FakeUpstream, Script

    with FakeUpstream() as fake:
        fake.script(Script(tokens=["Refunds are", " available [Sou", "rce 1", "]."]))
        fake.script(Script(status=503, fail_times=2, tokens=["ok"]))  # 503, 503, then "ok"
        client = openai.OpenAI(base_url=fake.base_url, api_key="x")
        ...
        fake.requests      # every request body received, in order
        fake.disconnects   # streams the client abandoned before the end

Scripts are consumed in order; when the queue is empty ``fake.default`` answers.
``Script.markerless(quote=(1, 2), unsupported="...")`` answers like a small model that
writes no citation marker: it copies one sentence from each named ``[Source N]`` passage of
the prompt it receives, then adds the unsupported sentence.
``Script.model_like(tool="lookup")`` answers as a real model would in an agent loop: when functions
are offered (and ``tool_choice`` allows) and no tool result follows the last user message, it calls
one (the one ``tool_choice`` forces, else ``tool``, else the first) with arguments that fit its
``parameters`` schema; otherwise it answers, with JSON that validates against ``response_format``'s
schema when one is asked for, else a sentence of ``[Source 1]`` cited with its marker.
``Script.from_text(text, token_size=3)`` splits a text into small tokens so that
citation markers such as ``[Source 1]`` arrive split across chunks.

Endpoints: ``POST /v1/chat/completions`` (``stream`` true or false, SSE exactly
as OpenAI sends it, including the usage chunk when
``stream_options.include_usage``) and ``GET /v1/models``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from calypso.loopback import LoopbackServer
from calypso.text.sentences import sentence_spans

FAKE_MODEL = "fake-model"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "requests",
}


@dataclass
class Script:
    """One scripted reply. ``tokens`` are the exact content deltas, in order."""

    tokens: list[str] = field(default_factory=lambda: ["Hello", " from", " the", " fake", " upstream", "."])
    token_delay: float = 0.0  # seconds between tokens
    first_token_delay: float = 0.0  # seconds before the first token (after the headers)
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI shape, or shorthand {"name": ..., "arguments": dict | str}
    status: int = 200  # a 4xx/5xx answers OpenAI's error JSON instead of a completion
    fail_times: int | None = None  # with status >= 400: fail this many times, then succeed
    error_message: str | None = None
    retry_after: float | None = None  # sent as a Retry-After header on error replies
    disconnect_after: int | None = None  # drop the connection after N tokens (no finish, no [DONE])
    abrupt: bool = True  # False: after disconnect_after tokens end the body politely instead of dropping
    finish_reason: str | None = None  # default: "tool_calls" when tool_calls, else "stop"
    usage: dict[str, Any] | None = None  # default: rough word counts
    model: str | None = None  # default: the requested model
    keepalive: bool = False  # send ": keepalive" SSE comments between chunks
    quote: tuple[int, ...] | None = None  # markerless mode: copy a sentence of each of these [Source N]
    unsupported: str = ""  # markerless mode: a sentence no passage supports, after the quotes
    token_size: int = 4  # markerless mode: characters per token
    model_like: bool = False  # call offered functions, then answer (JSON for a response_format): see above
    tool: str | None = None  # model-like mode: the function it prefers

    @classmethod
    def agent(cls, tool: str | None = None, **options: Any) -> Script:
        """A model in an agent loop: a function call when one is due, else an answer (see the module doc)."""
        return cls(tokens=[], model_like=True, tool=tool, **options)

    @classmethod
    def markerless(cls, quote: tuple[int, ...] = (1,), unsupported: str = "", **options: Any) -> Script:
        """An answer without markers, built from the prompt: a sentence of each quoted source, then ``unsupported``."""
        return cls(tokens=[], quote=tuple(quote), unsupported=unsupported, **options)

    def for_request(self, body: dict[str, Any]) -> Script:
        """The script as sent for this request: markerless and model-like scripts take it from the request."""
        if self.model_like:
            return self._as_model(body)
        if self.quote is None:
            return self
        text = quoting_answer(body.get("messages") or [], self.quote, self.unsupported)
        size = max(1, self.token_size)
        tokens = [text[i : i + size] for i in range(0, len(text), size)]
        return replace(self, tokens=tokens, quote=None)

    def _as_model(self, body: dict[str, Any]) -> Script:
        messages = body.get("messages") or []
        call = due_tool_call(body, self.tool)
        if call is not None:
            return replace(self, tokens=[], tool_calls=[call], model_like=False)
        passages = prompt_passages(messages)
        sentence = quotable_sentence(passages[1]) if 1 in passages else "The sources do not say."
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema") or {}
            text = json.dumps(example_for(schema, schema.get("$defs") or {}, sentence))
        elif fmt.get("type") == "json_object":
            text = json.dumps({"answer": sentence})
        else:
            text = f"{sentence} [Source 1]" if 1 in passages else sentence
        size = max(1, self.token_size)
        return replace(self, tokens=[text[i : i + size] for i in range(0, len(text), size)], model_like=False)

    @classmethod
    def from_text(cls, text: str, token_size: int = 4, **options: Any) -> Script:
        """Split ``text`` into tokens of ``token_size`` characters (so markers split across tokens)."""
        tokens = [text[i : i + token_size] for i in range(0, len(text), max(1, token_size))]
        return cls(tokens=tokens, **options)

    @property
    def text(self) -> str:
        return "".join(self.tokens)


_SOURCE_BLOCK = re.compile(r"^\[Source (\d+)\][^\n]*\n<<<\n(.*?)\n>>>$", re.S | re.M)
_QUOTABLE_WORDS = 8  # a quoted sentence has at least this many words (not a heading or a fragment)


def prompt_passages(messages: list[Any]) -> dict[int, str]:
    """The ``[Source N]`` passages of the prompt's system message, by number."""
    system = next((m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "system"), "")
    return {int(n): text for n, text in _SOURCE_BLOCK.findall(system if isinstance(system, str) else "")}


def quotable_sentence(passage: str) -> str:
    """The passage's first whole sentence of at least eight words (its longest when none has eight)."""
    sentences = [passage[s:e] for s, e in sentence_spans(passage)]
    # A chunk may start inside a sentence (overlap): skip a first piece that does not start a sentence.
    if len(sentences) > 1 and not sentences[0][:1].isupper():
        sentences = sentences[1:]
    long = [s for s in sentences if len(s.split()) >= _QUOTABLE_WORDS and s.rstrip()[-1:] in ".!?"]
    if long:
        return " ".join(long[0].split())
    return " ".join(max(sentences, key=len, default="").split())


def quoting_answer(messages: list[Any], quote: tuple[int, ...], unsupported: str = "") -> str:
    """What a markerless small model writes: source sentences copied without markers, then ``unsupported``."""
    passages = prompt_passages(messages)
    parts = [quotable_sentence(passages[n]) for n in quote if n in passages]
    if unsupported:
        parts.append(unsupported)
    return " ".join(p for p in parts if p) or "I could not find that in the sources."


def due_tool_call(body: dict[str, Any], preferred: str | None) -> dict[str, Any] | None:
    """The function call a model makes now, or None: no functions offered, ``tool_choice`` "none", or a
    tool result already answers the last user message."""
    tools = [t.get("function") or {} for t in body.get("tools") or [] if isinstance(t, dict)]
    choice = body.get("tool_choice")
    if not tools or choice == "none":
        return None
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    if any(m.get("role") == "tool" for m in messages[last_user + 1 :]):
        return None
    forced = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
    by_name = {t.get("name"): t for t in tools}
    tool = by_name.get(forced) or by_name.get(preferred) or tools[0]
    parameters = tool.get("parameters") or {}
    arguments = example_for(parameters, parameters.get("$defs") or {}, "example")
    return {"name": tool.get("name"), "arguments": arguments if isinstance(arguments, dict) else {}}


def example_for(schema: Any, defs: dict[str, Any], text: str) -> Any:
    """A value valid against ``schema`` (the JSON Schema subset structured outputs use), strings ``text``."""
    if not isinstance(schema, dict):
        return text
    if "$ref" in schema:
        return example_for(defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {}), defs, text)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            options = [o for o in schema[key] if not (isinstance(o, dict) and o.get("type") == "null")]
            return example_for((options or schema[key])[0], defs, text)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: example_for(sub, defs, text) for name, sub in properties.items()}
    if kind == "array":
        return [example_for(schema.get("items") or {}, defs, text)] * max(1, int(schema.get("minItems", 1)))
    if kind in ("integer", "number"):
        # As a model would: the number the quoted sentence gives, when it fits the schema's bounds.
        low, high = schema.get("minimum", float("-inf")), schema.get("maximum", float("inf"))
        given = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)]
        value = next((n for n in given if low <= n <= high), schema.get("minimum", 1))
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return text


def _normalize_tool_calls(calls: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    normalized = []
    for i, call in enumerate(calls or []):
        function = call.get("function") or {"name": call["name"], "arguments": call.get("arguments", {})}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        normalized.append(
            {
                "id": call.get("id") or f"call_fake_{i}",
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
    return normalized


class _AbruptClose(Exception):
    """Raised after the response started so uvicorn drops the connection mid-body."""


class _QuietAbruptClose(logging.Filter):
    # uvicorn logs the exception we raise on purpose; keep test output clean.
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while exc is not None:
            if isinstance(exc, _AbruptClose):
                return False
            exc = exc.__cause__ or exc.__context__
        return True


class _SSEStream:
    """ASGI response streaming one script; notices a client that goes away before the end."""

    def __init__(self, fake: FakeUpstream, script: Script, body: dict[str, Any]) -> None:
        self.fake, self.script, self.body = fake, script, body
        self.model = script.model or body.get("model") or FAKE_MODEL
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if (self.body.get("stream_options") or {}).get("include_usage"):
            chunk["usage"] = None  # OpenAI sends null usage on every chunk but the last
        return _sse(chunk)

    async def _send(self, send: Any, data: bytes) -> None:
        if self.script.keepalive:
            data = b": keepalive\n\n" + data
        await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _produce(self, send: Any) -> str:
        script = self.script
        await self._send(send, self._chunk({"role": "assistant", "content": ""}))
        await asyncio.sleep(script.first_token_delay)
        for n, token in enumerate(script.tokens):
            if script.disconnect_after is not None and n >= script.disconnect_after:
                return "abort"
            if n:
                await asyncio.sleep(script.token_delay)
            await self._send(send, self._chunk({"content": token}))
        calls = _normalize_tool_calls(script.tool_calls)
        for index, call in enumerate(calls):
            # Like OpenAI: id + name first, then the arguments in small fragments.
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            await self._send(send, self._chunk({"tool_calls": [head]}))
            arguments = call["function"]["arguments"]
            for i in range(0, len(arguments), 8):
                await asyncio.sleep(script.token_delay)
                fragment = {"index": index, "function": {"arguments": arguments[i : i + 8]}}
                await self._send(send, self._chunk({"tool_calls": [fragment]}))
        if script.disconnect_after is not None and script.disconnect_after <= len(script.tokens):
            return "abort"
        finish = script.finish_reason or ("tool_calls" if calls else "stop")
        await self._send(send, self._chunk({}, finish))
        if (self.body.get("stream_options") or {}).get("include_usage"):
            usage: dict[str, Any] = {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": None,
                "choices": [],
                "usage": self.fake._usage(script, self.body),
            }
            await self._send(send, _sse(usage))
        # [DONE] and the end of the body in one message: no window where a polite client looks "gone".
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})
        return "complete"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        outcome = "disconnected"
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(watch)
            try:
                outcome = await self._produce(send)
            except OSError:
                outcome = "disconnected"
            group.cancel_scope.cancel()
        if outcome == "disconnected":
            self.fake._count_disconnect()
        elif outcome == "abort":
            if not self.script.abrupt:  # a well-formed end of body, just without finish or [DONE]
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            raise _AbruptClose("scripted disconnect")


def _sse(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


@dataclass
class _Queued:
    """A queued script and how many more times it fails (with ``fail_times``)."""

    script: Script
    failures_left: int


class FakeUpstream:
    """The fake server. Use as a context manager; ``base_url`` ends in ``/v1``."""

    def __init__(self, default: Script | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.default = default or Script()
        self.requests: list[Any] = []  # request bodies (parsed JSON, normally objects), in arrival order
        self.headers: list[dict[str, str]] = []  # the matching request headers (lower-case names)
        self.disconnects = 0
        self._queue: collections.deque[_Queued] = collections.deque()
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        self._loopback = LoopbackServer(self.app, "calypso-fake-upstream", host, port, timeout_graceful_shutdown=1)

    # -- scripting ---------------------------------------------------------------------------

    def script(self, *scripts: Script) -> FakeUpstream:
        """Queue replies, consumed one request at a time (a failing script stays until it succeeds)."""
        with self._lock:
            for script in scripts:
                self._queue.append(_Queued(script, script.fail_times or 0))
        return self

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.headers.clear()
            self.disconnects = 0

    def wait_for_disconnects(self, count: int = 1, timeout: float = 3.0) -> bool:
        """Poll until ``disconnects >= count``; the server notices a closed socket asynchronously."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.disconnects >= count:
                return True
            time.sleep(0.01)
        return self.disconnects >= count

    def _next(self) -> tuple[Script, bool]:
        """The script for this request and whether it answers with its error status."""
        with self._lock:
            if not self._queue:
                return self.default, False
            entry = self._queue[0]
            script = entry.script
            if script.status >= 400 and script.fail_times is None:
                self._queue.popleft()
                return script, True
            if script.status >= 400 and entry.failures_left > 0:
                entry.failures_left -= 1
                return script, True
            self._queue.popleft()
            return script, False

    def _count_disconnect(self) -> None:
        with self._lock:
            self.disconnects += 1

    def _usage(self, script: Script, body: dict[str, Any]) -> dict[str, Any]:
        if script.usage is not None:
            usage = dict(script.usage)
        else:
            words = sum(len(str(m.get("content") or "").split()) for m in body.get("messages", []))
            usage = {"prompt_tokens": words, "completion_tokens": len(script.tokens) + len(script.tool_calls or [])}
        usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
        return usage

    # -- endpoints ---------------------------------------------------------------------------

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": FAKE_MODEL, "object": "model", "created": 0, "owned_by": "calypso-fake"}],
            }
        )

    async def _chat(self, request: Request) -> Any:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "The request body is not valid JSON.")
        with self._lock:
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in request.headers.items()})
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "'messages' is a required property.", param="messages")
        script, failing = self._next()
        script = script.for_request(body)
        if failing:
            error = script.error_message or f"Scripted failure with status {script.status}."
            headers = {"retry-after": f"{script.retry_after:g}"} if script.retry_after is not None else None
            return _error(script.status, error, headers=headers)
        if body.get("stream"):
            return _SSEStream(self, script, body)
        await asyncio.sleep(script.first_token_delay)
        calls = _normalize_tool_calls(script.tool_calls)
        message: dict[str, Any] = {"role": "assistant", "content": script.text if script.tokens or not calls else None}
        if calls:
            message["tool_calls"] = calls
        return JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": script.model or body.get("model") or FAKE_MODEL,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": script.finish_reason or ("tool_calls" if calls else "stop"),
                    }
                ],
                "usage": self._usage(script, body),
            }
        )

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self._loopback.host}:{self._loopback.port}/v1"

    def start(self) -> FakeUpstream:
        error_logger = logging.getLogger("uvicorn.error")
        if not any(isinstance(f, _QuietAbruptClose) for f in error_logger.filters):
            error_logger.addFilter(_QuietAbruptClose())
        self._loopback.start()
        return self

    def stop(self) -> None:
        self._loopback.stop()

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _error(
    status: int, message: str, *, param: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    code = "rate_limit_exceeded" if status == 429 else None
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)
