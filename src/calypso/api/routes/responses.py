"""POST /v1/responses (seed 000 + seed 003), GET/DELETE /v1/responses/{id}.

The route only wires things together: ``api.translate.responses`` turns the
request into an ``AskRequest`` and render options, ``ResponsesStreamRenderer``
turns answer events into Responses events (``render_response`` replays a
finished answer through it), and this module numbers, frames and sends them,
and stores the reply.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from calypso.answering import Answerer, AnswerEvent, Done, Retrieved
from calypso.api.auth import current_workspace
from calypso.api.deps import answerer, bots, link_signer, sources_hidden
from calypso.api.schemas.responses import ResponsesRequest
from calypso.api.sse import sse_event, sse_response
from calypso.api.translate.responses import FileResolver, ResponsesTurn, stored_response, translate
from calypso.bots import BotDirectory
from calypso.citations.grounded import GroundedAnswer
from calypso.citations.responses_stream import ResponsesStreamRenderer, render_response
from calypso.citations.responses_wire import ResponseWire
from calypso.errors import CalypsoError, NotFound
from calypso.store.responses import ResponseStore

router = APIRouter(prefix="/v1", tags=["responses"])
log = logging.getLogger("calypso.api")

SaveReply = Callable[[dict, GroundedAnswer], Awaitable[None]]


# -- where the route reaches storage: the knowledge base and the response store ---------------


def _responses(request: Request) -> ResponseStore:
    return ResponseStore(request.app.state.kb.store)


def _file_resolver(request: Request) -> FileResolver:
    kb = request.app.state.kb

    def document_id(file_id: str, workspace: str) -> str | None:
        try:
            return kb.get_by_file_id(file_id, workspace).id
        except NotFound:
            return None

    return document_id


def _saver(request: Request, turn: ResponsesTurn, workspace: str, previous_id: str | None) -> SaveReply:
    store = _responses(request)

    async def save(response: dict, answer: GroundedAnswer) -> None:
        await asyncio.to_thread(store.save, workspace, stored_response(turn, response, answer.raw_text), previous_id)

    return save


# -- routes -----------------------------------------------------------------------------------


@router.post("/responses")
async def create_response(
    request: Request,
    body: ResponsesRequest,
    directory: BotDirectory = Depends(bots),
    engine: Answerer = Depends(answerer),
) -> Response:
    workspace = current_workspace(request)
    bot = directory.get(body.model, workspace=workspace)
    turn = translate(
        body,
        bot,
        workspace,
        links=link_signer(request),
        sources_hidden=sources_hidden(request, workspace, bot.sources_policy),
        resolve_file=_file_resolver(request),
        load_response=partial(_responses(request).get, workspace),
    )
    wire = ResponseWire(bot.id, turn.echo)
    save = _saver(request, turn, workspace, body.previous_response_id) if body.store else None
    if body.stream:
        renderer = ResponsesStreamRenderer(wire, turn.options)
        return sse_response(request, _stream(request, engine.stream(turn.ask), renderer, save))
    answer, query = await _answer(engine.stream(turn.ask))
    response = render_response(answer, query, wire, turn.options)
    if save is not None:
        await save(response, answer)
    return JSONResponse(response)


@router.get("/responses/{response_id}")
def get_response(response_id: str, request: Request, workspace: str = Depends(current_workspace)) -> dict:
    stored = _responses(request).get(workspace, response_id)
    if stored is None:
        raise NotFound(f"No stored response {response_id!r}.", param="response_id")
    return stored.body


@router.delete("/responses/{response_id}")
def delete_response(response_id: str, request: Request, workspace: str = Depends(current_workspace)) -> dict:
    if not _responses(request).delete(workspace, response_id):
        raise NotFound(f"No stored response {response_id!r}.", param="response_id")
    return {"id": response_id, "object": "response.deleted", "deleted": True}


# -- answering, streaming -----------------------------------------------------------------------


async def _answer(events: AsyncIterator[AnswerEvent]) -> tuple[GroundedAnswer, str | None]:
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
    events: AsyncIterator[AnswerEvent],
    renderer: ResponsesStreamRenderer,
    save: SaveReply | None,
) -> AsyncIterator[str]:
    """The SSE body: the renderer's events numbered from 0; any failure ends it with error + response.failed."""
    sequence = itertools.count()

    def frame(event: dict) -> str:
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
        await events.aclose()  # type: ignore[attr-defined]  # stops the upstream if the client went away


def _stream_error(request: Request, exc: Exception) -> tuple[str | None, str, str | None]:
    """(code, message, param) for a stream that failed after its 200; unexpected errors are logged, not shown."""
    request_id = getattr(request.state, "request_id", None) or uuid.uuid4().hex
    if isinstance(exc, CalypsoError):
        log.warning("response stream failed (request id %s): %s", request_id, exc.message)
        return exc.code or exc.type, exc.message, exc.param
    log.exception("response stream failed (request id %s)", request_id, exc_info=exc)
    return "server_error", f"Internal server error; see the server log (request id {request_id}).", None
