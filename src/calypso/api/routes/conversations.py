"""/v1/conversations (seed 004): stored conversations with a bot, one turn at a time.

A turn is stored atomically (user + assistant message in one transaction)
after the answer completes; a failed or cancelled answer stores nothing and
the error says so. Turns on one conversation are taken one at a time
(``ConversationService.hold_turn``: an asyncio lock in the process, a turn
lease in the database across processes).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from calypso.api.auth import Workspace
from calypso.api.deps import Conversations, Limit, OrderParam, link_signer, services
from calypso.api.request_ids import request_id
from calypso.api.schemas.bounds import Metadata
from calypso.api.schemas.content import ContentPart
from calypso.api.schemas.items import InputItem
from calypso.api.serialize import list_object
from calypso.api.sse import sse_response
from calypso.api.streaming import (
    STREAM_OPTIONS_ALONE,
    STREAM_OPTIONS_NEED_STREAM,
    ChunkWriter,
    GuardedStream,
    StreamOptions,
    chat_chunks,
    prime,
    usage_object,
)
from calypso.api.translate.conversation_items import history as conversation_history
from calypso.api.translate.conversation_items import stored_message
from calypso.api.translate.history import fit_history
from calypso.api.translate.items import item_dicts
from calypso.api.validation import parse_body
from calypso.citations.grounded import GroundedAnswer
from calypso.dialects.chat import RenderedChat, render_chat
from calypso.errors import CalypsoError, InvalidRequest
from calypso.models import Conversation, StoredMessage
from calypso.services.answering import message_text
from calypso.services.conversations import new_message
from calypso.services.turns import TurnInput

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

MAX_ITEMS = 20  # OpenAI's limit on the items of one create call
NOTHING_STORED = "Nothing was stored for this turn; send the message again. "


class CreateConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = None  # the bot, as in Chat Completions
    bot: str | None = None  # the same, by its seed-004 name
    metadata: Metadata | None = None
    # OpenAI's Conversations API: the first items (api/translate/conversation_items.py), at most 20.
    items: Annotated[list[InputItem], Field(max_length=MAX_ITEMS)] | None = None


class UpdateConversation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metadata: Metadata


class PostMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=STREAM_OPTIONS_NEED_STREAM)
    role: Literal["user"] = "user"
    content: str | list[ContentPart]
    stream: StrictBool = False
    stream_options: StreamOptions | None = None


def conversation_object(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": conversation.id,
        "object": "conversation",
        "created_at": conversation.created_at,
        "bot": conversation.bot_id,
        "model": conversation.bot_id,
        "metadata": conversation.metadata,
    }


def message_object(conversation_id: str, message: StoredMessage) -> dict[str, Any]:
    """A stored message; ``citations`` is always present and always null on user messages."""
    out: dict[str, Any] = {
        "id": message.id,
        "object": "conversation.message",
        "conversation_id": conversation_id,
        "role": message.role,
        "content": message.content,
        "citations": message.citations if message.role == "assistant" else None,
        "created_at": message.created_at,
    }
    if message.role == "assistant":
        out["annotations"] = message.extra.get("annotations", [])
        out["finish_reason"] = message.extra.get("finish_reason", "stop")
        out["usage"] = message.extra.get("usage")
        out["_aicore"] = message.extra.get("_aicore")
    return out


def _nothing_stored(exc: CalypsoError) -> CalypsoError:
    failed = type(exc)(NOTHING_STORED + exc.message, param=exc.param, code=exc.code)
    failed.__cause__ = exc
    return failed


def _turn_messages(
    question: str, answer: GroundedAnswer, rendered: RenderedChat, message_id: str
) -> tuple[StoredMessage, StoredMessage]:
    user = new_message("user", question)
    assistant = new_message(
        "assistant",
        rendered.content,
        rendered.citations,
        annotations=rendered.annotations,
        finish_reason=answer.finish_reason,
        usage=usage_object(answer),
        text=answer.text,
        _aicore=rendered.grounding,
    )
    assistant.id = message_id
    return user, assistant


# -- routes ----------------------------------------------------------------------------------


@router.post("")
async def create_conversation(request: Request, store: Conversations, workspace: Workspace) -> JSONResponse:
    """Start a conversation with a bot (`model` or `bot`, default the built-in bot)."""
    body: CreateConversation = await parse_body(request, CreateConversation)
    if body.model and body.bot and body.model != body.bot:
        raise InvalidRequest("model and bot name different bots; send one of them.", param="bot")
    bots = services(request).bots
    bot = await asyncio.to_thread(bots.get, body.bot or body.model, workspace)
    conversation = await asyncio.to_thread(store.create, bot.id, body.metadata, workspace)
    if body.items:
        first = [stored_message(item) for item in item_dicts(body.items)]
        await asyncio.to_thread(lambda: store.add_turn(conversation.id, *first, workspace=workspace))
    return JSONResponse(conversation_object(conversation), status_code=201)


@router.get("")
def list_conversations(
    store: Conversations,
    workspace: Workspace,
    limit: Limit = 20,
    after: str | None = None,
    order: OrderParam = "desc",
) -> dict[str, Any]:
    page = store.list_conversations(limit, after, order, workspace)
    return list_object([conversation_object(c) for c in page.items], page.has_more)


@router.get("/{conversation_id}")
def get_conversation(conversation_id: str, store: Conversations, workspace: Workspace) -> dict[str, Any]:
    """The conversation with all its messages in order."""
    conversation = store.get(conversation_id, workspace)
    messages = store.messages(conversation_id, workspace)
    return {**conversation_object(conversation), "messages": [message_object(conversation_id, m) for m in messages]}


@router.post("/{conversation_id}")
async def update_conversation(
    conversation_id: str, request: Request, store: Conversations, workspace: Workspace
) -> dict[str, Any]:
    """OpenAI's ``conversations.update``: replace the metadata."""
    body: UpdateConversation = await parse_body(request, UpdateConversation)
    conversation = await asyncio.to_thread(store.update_metadata, conversation_id, body.metadata, workspace)
    return conversation_object(conversation)


@router.delete("/{conversation_id}")
def delete_conversation(conversation_id: str, store: Conversations, workspace: Workspace) -> dict[str, Any]:
    store.delete(conversation_id, workspace)
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


@router.post("/{conversation_id}/messages")
async def post_message(
    conversation_id: str,
    request: Request,
    store: Conversations,
    workspace: Workspace,
) -> Any:
    """One user message in, the assistant's message out (``stream: true``: Chat Completions chunks)."""
    body: PostMessage = await parse_body(request, PostMessage)
    if body.stream_options is not None and not body.stream:
        raise InvalidRequest(STREAM_OPTIONS_ALONE, param="stream_options")
    content = body.content
    question = content if isinstance(content, str) else message_text({"content": [p.wire() for p in content]})
    if not question.strip():
        raise InvalidRequest("content is empty; send the user's message.", param="content")
    conversation = await asyncio.to_thread(store.get, conversation_id, workspace)
    found = services(request)
    answerer, links = found.answering, link_signer(request)
    message_id = f"msg_{uuid.uuid4().hex}"

    async def store_turn(answer: GroundedAnswer, rendered: RenderedChat) -> dict[str, Any]:
        turn = _turn_messages(question, answer, rendered, message_id)
        await asyncio.to_thread(lambda: store.add_turn(conversation_id, *turn, workspace=workspace))
        return {
            "object": "conversation.turn",
            "conversation_id": conversation_id,
            "user_message": message_object(conversation_id, turn[0]),
            "message": message_object(conversation_id, turn[1]),
        }

    held = await store.hold_turn(conversation_id, workspace)
    try:
        history = await asyncio.to_thread(store.messages, conversation_id, workspace)
        # The stored conversation stays whole; only what the model is shown drops its oldest turns.
        limit = found.settings.max_history_chars
        shown = fit_history(
            [*conversation_history(history), {"role": "user", "content": question}],
            limit,
            truncate=True,
            param="content",
        )
        turn = await found.turns.prepare_async(TurnInput(shown, workspace, conversation.bot_id))
        style = turn.policy.chat_style
        if not body.stream:
            try:
                answer = await answerer.answer(turn.ask)
            except CalypsoError as exc:
                raise _nothing_stored(exc) from exc
            return JSONResponse(await store_turn(answer, render_chat(answer, style, links)))
        events = answerer.stream(turn.ask)
        try:
            buffered = await prime(events)
        except CalypsoError as exc:
            raise _nothing_stored(exc) from exc
    except BaseException:
        held.release()
        raise
    finally:
        if not body.stream:
            held.release()

    async def on_done(answer: GroundedAnswer, rendered: RenderedChat) -> None:
        await store_turn(answer, rendered)
        held.release()  # the finish chunk means "stored"; the next turn may start

    async def on_close() -> None:
        held.release()
        await events.aclose()

    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    writer = ChunkWriter(message_id, turn.bot.id, include_usage, extra={"conversation_id": conversation_id})
    rid = request_id(request)
    chunks = chat_chunks(
        events, buffered, writer, style, links, request_id=rid, on_done=on_done, error_prefix=NOTHING_STORED
    )
    return GuardedStream(sse_response(request, chunks), on_close)
