"""POST /v1/chat/completions: OpenAI's Chat Completions with grounded citations.

The message carries ``annotations`` (nested ``url_citation``, seed 000) and
``citations`` (seed 004) in the bot's marker style; see docs/citations-chat.md.
The streaming helpers, shared with the conversations API, are in ``api/streaming.py``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from calypso.api.auth import current_workspace
from calypso.api.deps import link_signer, services
from calypso.api.request_ids import request_id
from calypso.api.schemas.content import MAX_OUTPUT_TOKENS, ContentPart
from calypso.api.sse import sse_response
from calypso.api.streaming import ChunkWriter, GuardedStream, StreamOptions, chat_chunks, prime, usage_object
from calypso.api.translate.responses import fit_history
from calypso.api.validation import parse_body
from calypso.bots import DEFAULT_BOT_ID
from calypso.citations.grounded import GroundedAnswer
from calypso.dialects.chat import RenderedChat, render_chat, style_for
from calypso.errors import InvalidRequest
from calypso.services.answering import Answerer
from calypso.services.bots import ask_request

router = APIRouter(prefix="/v1", tags=["chat"])


# -- request ---------------------------------------------------------------------------------


class ChatMessage(BaseModel):
    # Extra keys are allowed because clients send earlier replies back as returned
    # (refusal, annotations, citations…); seed 004: they are ignored on input.
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def forwarded(self) -> dict[str, Any]:
        """The fields the model needs; markers in earlier assistant content stay in place."""
        content = [part.wire() for part in self.content] if isinstance(self.content, list) else self.content
        message: dict[str, Any] = {"role": self.role, "content": content}
        for key in ("name", "tool_calls", "tool_call_id"):
            if getattr(self, key) is not None:
                message[key] = getattr(self, key)
        return message


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # OpenAI requires it; here a request without one uses the default bot, as /v1/responses does.
    model: str = DEFAULT_BOT_ID
    messages: list[ChatMessage]
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=MAX_OUTPUT_TOKENS)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_OUTPUT_TOKENS)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    # Accepted and ignored: they change nothing about a grounded answer.
    user: str | None = None
    store: StrictBool | None = None
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


# -- responses -------------------------------------------------------------------------------


def message_object(answer: GroundedAnswer, rendered: RenderedChat) -> dict[str, Any]:
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


def completion_object(completion_id: str, model: str, answer: GroundedAnswer, rendered: RenderedChat) -> dict[str, Any]:
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
    # The client sends the whole conversation: past the limit it is refused, as OpenAI refuses a too-long context.
    messages = fit_history(
        [m.forwarded() for m in body.messages], found.settings.max_history_chars, truncate=False, param="messages"
    )
    ask = ask_request(
        bot,
        messages,
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
    chunks = chat_chunks(events, buffered, writer, style, links, request_id=request_id(request))
    return GuardedStream(sse_response(request, chunks), events.aclose)
