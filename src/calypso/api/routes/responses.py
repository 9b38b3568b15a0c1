"""POST /v1/responses (seed 000 + seed 003), GET/DELETE /v1/responses/{id}.

The route only wires things together: ``api.translate.responses`` turns the
request into what the turn preparer takes (``services/turns.py``: the ``AskRequest``
and the policy) and render options, ``ResponsesStreamRenderer``
turns answer events into Responses events (``render_response`` replays a
finished answer through it), and this module numbers, frames and sends them,
and stores the reply.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from calypso.api.auth import Workspace
from calypso.api.deps import Conversations, Responses, link_signer, services
from calypso.api.request_ids import request_id
from calypso.api.schemas.responses import InputTokensRequest, ResponsesRequest
from calypso.api.sse import sse_event, sse_response
from calypso.api.streaming import GuardedStream, failure
from calypso.api.translate.conversation_items import history as conversation_history
from calypso.api.translate.conversation_items import stored_message
from calypso.api.translate.echo import conversation_id
from calypso.api.translate.input_items import input_token_count, item_page
from calypso.api.translate.items import items_by_id
from calypso.api.translate.responses import (
    ResponsesTurn,
    input_messages,
    render_options,
    stored_response,
    translate,
)
from calypso.citations.events import AnswerEvent, Done, Retrieved
from calypso.citations.grounded import GroundedAnswer
from calypso.dialects.responses_stream import ResponsesStreamRenderer, render_response
from calypso.dialects.responses_wire import ResponseWire
from calypso.errors import InvalidRequest
from calypso.services.conversations import ConversationService, HeldLock
from calypso.services.responses import ResponseService
from calypso.services.vector_stores import VectorStoreService

router = APIRouter(prefix="/v1", tags=["responses"])
log = logging.getLogger("calypso.api")

SaveReply = Callable[[dict[str, Any], GroundedAnswer], Awaitable[None]]


# -- what the translation needs from the services ----------------------------------------------


def _saver(
    responses: ResponseService,
    conversations: ConversationService,
    turn: ResponsesTurn,
    workspace: str,
    body: ResponsesRequest,
) -> SaveReply | None:
    """Store the reply (``store``) and append the turn's items to its conversation (``conversation``)."""
    conversation = conversation_id(body)
    if not body.store and conversation is None:
        return None

    async def save(response: dict[str, Any], answer: GroundedAnswer) -> None:
        if body.store:
            stored = stored_response(turn, response, answer.raw_text, answer.tool_calls)
            await asyncio.to_thread(responses.save, stored, body.previous_response_id, workspace)
        if conversation is not None:
            items = [stored_message(i) for i in turn.input_items]
            items += [stored_message(i, keep_id=True) for i in response["output"]]
            await asyncio.to_thread(lambda: conversations.add_turn(conversation, *items, workspace=workspace))

    return save


class FileAttributes:
    """The retrieved documents' file attributes for ``file_search_call`` results: read in a worker thread
    once retrieval ends, so the renderer's lookup (``RenderOptions.file_attributes``) reads no store."""

    def __init__(self, stores: VectorStoreService, workspace: str) -> None:
        self.stores, self.workspace = stores, workspace
        self.found: dict[str, dict[str, Any]] = {}

    async def read_after_retrieval(
        self, events: AsyncGenerator[AnswerEvent, None]
    ) -> AsyncGenerator[AnswerEvent, None]:
        """``events``, having read the attributes of the retrieved documents before passing ``Retrieved`` on."""
        try:
            async for event in events:
                if isinstance(event, Retrieved) and event.sources:
                    ids = [s.passage.document.id for s in event.sources]
                    self.found = await asyncio.to_thread(self.stores.file_attributes, self.workspace, ids)
                yield event
        finally:
            await events.aclose()

    def __call__(self, document_ids: list[str]) -> dict[str, dict[str, Any]]:
        return {i: self.found[i] for i in document_ids if i in self.found}


# -- routes -----------------------------------------------------------------------------------


@router.post("/responses")
async def create_response(
    request: Request, body: ResponsesRequest, workspace: Workspace, conversations: Conversations
) -> Response:
    named = conversation_id(body)
    if named is None:
        return await _respond(request, body, workspace, None)
    # An unknown conversation is a 404 naming conversation_id.
    await asyncio.to_thread(conversations.get, named, workspace)
    # One turn at a time per conversation, as seed 004's turns: this turn reads the history the previous one
    # stored, and appends its input then its output after it. Held until the reply is stored (a stream: until
    # it ends, however it ends).
    held = await conversations.hold_turn(named, workspace)
    try:
        history = conversation_history(await asyncio.to_thread(conversations.messages, named, workspace))
        reply = await _respond(request, body, workspace, history)
    except BaseException:
        held.release()
        raise
    if isinstance(reply, StreamingResponse):
        return _released_after(reply, held)
    held.release()
    return reply


async def _respond(
    request: Request, body: ResponsesRequest, workspace: str, conversation: list[dict[str, Any]] | None
) -> Response:
    """Translate, prepare, answer and store one request; ``conversation`` is its stored conversation's history."""
    found = services(request)
    responses = found.responses
    # In a worker thread: a previous_response_id is read from the store.
    turn = await asyncio.to_thread(
        translate,
        body,
        workspace,
        load_response=lambda response_id: responses.get(response_id, workspace, "previous_response_id"),
        max_history_chars=found.settings.max_history_chars,
        conversation=conversation,
    )
    prepared = await found.turns.prepare_async(turn.parsed)
    attributes = FileAttributes(found.vector_stores, workspace)
    options = render_options(turn, prepared.policy, link_signer(request), attributes)
    engine = found.answering
    wire = ResponseWire(prepared.bot.id, turn.echo)
    save = _saver(responses, found.conversations, turn, workspace, body)
    events = attributes.read_after_retrieval(engine.stream(prepared.ask))
    if body.stream:
        renderer = ResponsesStreamRenderer(wire, options)
        return sse_response(request, _stream(request, events, renderer, save))
    answer, query = await _answer(events)
    response = render_response(answer, query, wire, options)
    if save is not None:
        await save(response, answer)
    return JSONResponse(response)


def _released_after(reply: StreamingResponse, held: HeldLock) -> StreamingResponse:
    """The stream, releasing the conversation's lock when it ends (also for a client gone before its first byte)."""

    async def release() -> None:
        held.release()

    return GuardedStream(reply, release)


@router.get("/responses/{response_id}")
def get_response(response_id: str, responses: Responses, workspace: Workspace) -> dict[str, Any]:
    return responses.get(response_id, workspace).body


@router.delete("/responses/{response_id}")
def delete_response(response_id: str, responses: Responses, workspace: Workspace) -> dict[str, Any]:
    responses.delete(response_id, workspace)
    return {"id": response_id, "object": "response.deleted", "deleted": True}


@router.get("/responses/{response_id}/input_items")
def list_input_items(
    response_id: str,
    responses: Responses,
    workspace: Workspace,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Literal["asc", "desc"] = "desc",
    after: str | None = None,
    before: str | None = None,
    include: Annotated[list[str] | None, Query()] = None,  # accepted: items are stored whole
) -> dict[str, Any]:
    """OpenAI's list of the items a response was asked with (newest first by default), by cursor."""
    items = responses.get(response_id, workspace).input_items
    return item_page(items, limit=limit, order=order, after=after, before=before)


@router.post("/responses/{response_id}/cancel")
def cancel_response(response_id: str, responses: Responses, workspace: Workspace) -> dict[str, Any]:
    """OpenAI cancels only background responses; Calypso has none, so a stored one is OpenAI's 400."""
    responses.get(response_id, workspace)  # an unknown id is a 404
    raise InvalidRequest(
        "Only responses created with background=true can be cancelled; this one has already completed.",
        param=None,
        code="invalid_value",
    )


@router.post("/responses/input_tokens")
def count_input_tokens(body: InputTokensRequest, workspace: Workspace, responses: Responses) -> dict[str, Any]:
    """OpenAI's input token count, by Calypso's estimate (``ingest/tokens.py``) of what the client sends."""
    messages: list[dict[str, Any]] = []
    known: dict[str, dict[str, Any]] = {}
    if body.previous_response_id:
        previous = responses.get(body.previous_response_id, workspace, "previous_response_id")
        messages, known = list(previous.history), items_by_id(previous.body, previous.input_items)
    if body.instructions:
        messages.insert(0, {"role": "system", "content": body.instructions})
    if body.input is not None:
        messages += input_messages(body.input, known)
    tools = [tool.model_dump(exclude_none=True) for tool in body.tools or []]
    return {"object": "response.input_tokens", "input_tokens": input_token_count(messages, tools)}


# -- answering, streaming -----------------------------------------------------------------------


async def _answer(events: AsyncGenerator[AnswerEvent, None]) -> tuple[GroundedAnswer, str | None]:
    """The finished answer and the search query it ran (None: no retrieval)."""
    query: str | None = None
    answer: GroundedAnswer | None = None
    async for event in events:  # to the end, so the stream closes itself
        if isinstance(event, Retrieved):
            query = event.query
        elif isinstance(event, Done):
            answer = event.answer
    if answer is None:
        raise RuntimeError("the answer stream ended without a result")
    return answer, query


async def _stream(
    request: Request,
    events: AsyncGenerator[AnswerEvent, None],
    renderer: ResponsesStreamRenderer,
    save: SaveReply | None,
) -> AsyncGenerator[str, None]:
    """The SSE body: the renderer's events numbered from 0; any failure ends it with error + response.failed."""
    sequence = itertools.count()

    def frame(event: dict[str, Any]) -> str:
        kind = event["type"]
        return sse_event(kind, {"type": kind, "sequence_number": next(sequence), **event})

    try:
        for out in renderer.opening():
            yield frame(out)
        async for event in events:
            produced = renderer.feed(event)
            if isinstance(event, Done) and save is not None and renderer.response is not None:
                await save(renderer.response, event.answer)  # stored before the client hears "completed"
            for out in produced:
                yield frame(out)
    except Exception as exc:  # noqa: BLE001 - reported in the stream, which then ends
        for out in renderer.failed(*_stream_error(request, exc)):
            yield frame(out)
    finally:
        await events.aclose()  # stops the upstream if the client went away


def _stream_error(request: Request, exc: Exception) -> tuple[str | None, str, str | None]:
    """(code, message, param) for a stream that failed after its 200; unexpected errors are logged, not shown."""
    error = failure(exc, request_id(request))["error"]
    return error["code"] or error["type"], error["message"], error["param"]
