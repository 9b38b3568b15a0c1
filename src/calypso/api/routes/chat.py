"""POST /v1/chat/completions: OpenAI's Chat Completions with grounded citations.

The message carries ``annotations`` (nested ``url_citation``, seed 000) and
``citations`` (seed 004) in the bot's marker style; see docs/citations-chat.md.
The streaming helpers, shared with the conversations API, are in ``api/streaming.py``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from calypso.api.auth import current_workspace
from calypso.api.deps import link_signer, services
from calypso.api.request_ids import request_id
from calypso.api.schemas.chat import ChatCompletionRequest
from calypso.api.sse import sse_response
from calypso.api.streaming import ChunkWriter, GuardedStream, chat_chunks, prime, usage_object
from calypso.api.translate.history import fit_history
from calypso.api.validation import parse_body
from calypso.citations.grounded import GroundedAnswer
from calypso.dialects.chat import RenderedChat, render_chat
from calypso.services.turns import TurnInput

router = APIRouter(prefix="/v1", tags=["chat"])

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
    found = services(request)
    # The client sends the whole conversation: past the limit it is refused, as OpenAI refuses a too-long context.
    messages = fit_history(
        [m.forwarded() for m in body.messages], found.settings.max_history_chars, truncate=False, param="messages"
    )
    parsed = TurnInput(
        messages,
        current_workspace(request),
        body.model,
        temperature=body.temperature,
        max_tokens=body.max_completion_tokens or body.max_tokens,
        tools=body.tools,
        tool_choice=body.tool_choice,
        response_format=body.response_format.upstream() if body.response_format else None,
        upstream_options=body.upstream_options(),
    )
    turn = await found.turns.prepare_async(parsed)
    answerer, links, style, bot_id = found.answering, link_signer(request), turn.policy.chat_style, turn.bot.id
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    if not body.stream:
        answer = await answerer.answer(turn.ask)
        rendered = render_chat(answer, style, links)
        return JSONResponse(completion_object(completion_id, bot_id, answer, rendered))

    events = answerer.stream(turn.ask)
    buffered = await prime(events)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    writer = ChunkWriter(completion_id, bot_id, include_usage)
    chunks = chat_chunks(events, buffered, writer, style, links, request_id=request_id(request))
    return GuardedStream(sse_response(request, chunks), events.aclose)
