"""xAI's Chat service: ``GetCompletion`` (``chat.sample()``) and ``GetCompletionChunk`` (``chat.stream()``).

A request is prepared by the turn preparer exactly as a Responses request is
(``services/turns.py``): the ``model`` names a bot, a ``collections_search``
tool replaces the bot's namespaces with its ``collection_ids`` (a collection
is a namespace) and its ``limit`` sets the passage count.
``INCLUDE_OPTION_INLINE_CITATIONS`` turns on ``[[n]](url)`` links (opt-in for
this SDK, seed 003: the bot's default does not apply). The answer is rendered
by ``dialects/xai.py``; this module only builds protobufs.

Streaming: one chunk per content delta (with the inline citations of the
links it carries), then a last chunk with ``citations``, the finish reason
and usage. The SDK extends ``citations`` and the inline citations chunk by
chunk and concatenates content, so the accumulated response equals
``GetCompletion``'s, which joins the same deltas.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc

from calypso.citations.events import Done
from calypso.citations.links import LinkSigner
from calypso.dialects.responses import RenderOptions
from calypso.dialects.xai import XaiDelta, XaiInlineCitation, XaiRenderer, render_reply
from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.grpc_api.base import Servicer, complete
from calypso.grpc_api.convert import ranking, timestamp
from calypso.grpc_api.errors import rpc, rpc_stream
from calypso.grpc_api.protos import chat_pb2, chat_pb2_grpc, sample_pb2, usage_pb2
from calypso.scope import MAX_PASSAGES, check_namespace
from calypso.services.answering import AskRequest
from calypso.services.turns import Narrowing, TurnInput

_ROLES = {
    chat_pb2.ROLE_USER: "user",
    chat_pb2.ROLE_ASSISTANT: "assistant",
    chat_pb2.ROLE_SYSTEM: "system",
    chat_pb2.ROLE_DEVELOPER: "system",
}
_FINISH = {
    "stop": sample_pb2.REASON_STOP,
    "length": sample_pb2.REASON_MAX_LEN,
    "tool_calls": sample_pb2.REASON_TOOL_CALLS,
}
MAX_COLLECTIONS = 10  # as xAI's collections_search documents


def _messages(request: chat_pb2.GetCompletionsRequest) -> list[dict[str, Any]]:
    messages = []
    for i, message in enumerate(request.messages):
        role = _ROLES.get(message.role)
        if role is None:
            raise InvalidRequest(
                f"messages[{i}] has role {chat_pb2.MessageRole.Name(message.role)}; Calypso answers from user, "
                "assistant, system and developer messages (it runs no client tools).",
                param=f"messages[{i}].role",
            )
        parts = []
        for j, content in enumerate(message.content):
            if content.WhichOneof("content") != "text":
                raise InvalidRequest(
                    f"messages[{i}].content[{j}] is not text; Calypso answers from text only.",
                    param=f"messages[{i}].content[{j}]",
                )
            parts.append(content.text)
        messages.append({"role": role, "content": "".join(parts)})
    return messages


def _missing(namespace: str, exc: NotFound) -> CalypsoError:
    return NotFound(
        f"No collection with id {namespace!r}; create it with client.collections.create(...) "
        "or list them with client.collections.list().",
        param="tools.collections_search.collection_ids",
    )


def _narrowing(request: chat_pb2.GetCompletionsRequest) -> Narrowing:
    """A collections_search tool's collections in place of the bot's namespaces (the preparer looks them up)."""
    narrowing = Narrowing(missing=_missing)
    for i, tool in enumerate(request.tools):
        kind = tool.WhichOneof("tool")
        if kind != "collections_search":
            raise InvalidRequest(
                f"tools[{i}] is {kind or 'empty'}; Calypso serves only the collections_search tool "
                "(xai_sdk.tools.collections_search).",
                param=f"tools[{i}]",
            )
        search = tool.collections_search
        ids = list(dict.fromkeys(search.collection_ids))
        if not ids or len(ids) > MAX_COLLECTIONS:
            raise InvalidRequest(
                f"collections_search needs 1 to {MAX_COLLECTIONS} collection_ids.",
                param=f"tools[{i}].collections_search.collection_ids",
            )
        param = f"tools[{i}].collections_search.collection_ids"
        namespaces = tuple(check_namespace(c, param) for c in ids)
        looked_up = tuple((namespace, param) for namespace in namespaces)
        narrowing = replace(narrowing, namespaces=namespaces, look_up=looked_up, ranking=ranking(search))
        if search.HasField("limit"):
            if not 1 <= search.limit <= MAX_PASSAGES:
                raise InvalidRequest(
                    f"collections_search limit must be from 1 to {MAX_PASSAGES}.",
                    param=f"tools[{i}].collections_search.limit",
                )
            narrowing = replace(narrowing, passage_count=search.limit)
    return narrowing


def _inline(citation: XaiInlineCitation) -> chat_pb2.InlineCitation:
    return chat_pb2.InlineCitation(
        id=citation.id,
        start_index=citation.start_index,
        end_index=citation.end_index,
        collections_citation=chat_pb2.CollectionsCitation(
            file_id=citation.file_id,
            chunk_id=citation.chunk_id,
            chunk_content=citation.chunk_content,
            score=citation.score,
            collection_ids=list(citation.collection_ids),
        ),
    )


def _usage(delta: XaiDelta, searched: bool) -> usage_pb2.SamplingUsage:
    answer = delta.answer
    if answer is None:
        return usage_pb2.SamplingUsage()
    used = [usage_pb2.SERVER_SIDE_TOOL_COLLECTIONS_SEARCH] if searched and answer.retrieval_ran else []
    return usage_pb2.SamplingUsage(
        prompt_tokens=answer.prompt_tokens,
        prompt_text_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        total_tokens=answer.prompt_tokens + answer.completion_tokens,
        num_sources_used=len(answer.cited_sources),
        server_side_tools_used=used,
    )


def _finish(delta: XaiDelta) -> int:
    if delta.answer is None:
        return sample_pb2.REASON_INVALID
    return _FINISH.get(delta.answer.finish_reason, sample_pb2.REASON_STOP)


class _Turn:
    """One translated request: what to ask, how to render, what every message of the reply repeats."""

    def __init__(self, ask: AskRequest, options: RenderOptions, model: str, searched: bool) -> None:
        self.ask, self.options, self.model, self.searched = ask, options, model, searched
        self.id = str(uuid.uuid4())
        self.created = timestamp(time.time())


@complete(chat_pb2_grpc.ChatServicer, "xai_api.Chat")
class ChatService(Servicer, chat_pb2_grpc.ChatServicer):
    def __init__(self, services: Any, auth_enabled: bool, links: LinkSigner) -> None:
        super().__init__(services, auth_enabled)
        self.links = links

    async def _turn(self, request: chat_pb2.GetCompletionsRequest, context: grpc.aio.ServicerContext) -> _Turn:
        workspace = await self.workspace(context)
        if request.HasField("n") and request.n > 1:
            raise InvalidRequest("n must be 1: Calypso gives one grounded answer per request.", param="n")
        parsed = TurnInput(
            _messages(request),
            workspace,
            request.model or None,
            _narrowing(request),
            inline_citations=chat_pb2.INCLUDE_OPTION_INLINE_CITATIONS in request.include,
            temperature=request.temperature if request.HasField("temperature") else None,
            max_tokens=request.max_tokens if request.HasField("max_tokens") and request.max_tokens else None,
        )
        turn = await self.services.turns.prepare_async(parsed)
        hidden = turn.policy.sources_hidden
        options = RenderOptions(links=self.links, inline=turn.policy.inline_links, legacy=False, hidden=hidden)
        return _Turn(turn.ask, options, turn.bot.id, searched=bool(request.tools))

    @rpc
    async def GetCompletion(  # noqa: N802 - the generated servicer's method name
        self, request: chat_pb2.GetCompletionsRequest, context: grpc.aio.ServicerContext
    ) -> chat_pb2.GetChatCompletionResponse:
        turn = await self._turn(request, context)
        answer = await self.services.answering.answer(turn.ask)
        reply = render_reply(answer, turn.options)
        return chat_pb2.GetChatCompletionResponse(
            id=turn.id,
            created=turn.created,
            model=turn.model,
            citations=reply.citations,
            usage=_usage(reply, turn.searched),
            outputs=[
                chat_pb2.CompletionOutput(
                    index=0,
                    finish_reason=_finish(reply),
                    message=chat_pb2.CompletionMessage(
                        role=chat_pb2.ROLE_ASSISTANT,
                        content=reply.content,
                        citations=[_inline(c) for c in reply.inline_citations],
                    ),
                )
            ],
        )

    @rpc_stream
    async def GetCompletionChunk(  # noqa: N802 - the generated servicer's method name
        self, request: chat_pb2.GetCompletionsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[chat_pb2.GetChatCompletionChunk]:
        turn = await self._turn(request, context)
        renderer = XaiRenderer(turn.options)
        events = self.services.answering.stream(turn.ask)
        try:
            async for event in events:
                for delta in renderer.feed(event):
                    yield self._chunk(turn, delta)
                if isinstance(event, Done):
                    break
        finally:
            await events.aclose()  # stops the upstream when the client went away

    @staticmethod
    def _chunk(turn: _Turn, delta: XaiDelta) -> chat_pb2.GetChatCompletionChunk:
        return chat_pb2.GetChatCompletionChunk(
            id=turn.id,
            created=turn.created,
            model=turn.model,
            citations=delta.citations,
            usage=_usage(delta, turn.searched),
            outputs=[
                chat_pb2.CompletionOutputChunk(
                    index=0,
                    finish_reason=_finish(delta),
                    delta=chat_pb2.Delta(
                        role=chat_pb2.ROLE_ASSISTANT,
                        content=delta.content,
                        citations=[_inline(c) for c in delta.inline_citations],
                    ),
                )
            ],
        )
