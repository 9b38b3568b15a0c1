"""What each MCP tool does, on the services: the same calls as the HTTP routes, rendered by ``render``.

Here ``search``, ``list_knowledge_bases`` and ``ask``; the tools reading passages by id are ``passages.py``.
A tool's work runs on a worker thread where it touches the store (as FastAPI runs a sync route);
``ask`` is async, as the answering service is, and prepares its turn as every surface does
(``TurnPreparer.prepare_async``). Each returns a ``CallToolResult`` (text and
``structuredContent``) or raises a ``CalypsoError``, which ``tools`` turns into a tool error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent

from calypso.api.mcp import render
from calypso.citations.links import LinkSigner
from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.services import Services
from calypso.services.turns import Narrowing, TurnInput

# Longest query or question: a search reads a question, not a document (a 1 MB paste is refused with a
# 400 naming the limit, before any analysis). The Responses endpoint bounds whole conversations likewise.
MAX_QUERY_CHARS = 20_000
MAX_LISTED = 1000  # knowledge bases listed at most


@dataclass(frozen=True)
class Caller:
    """Who calls, as a route knows it: the services, the key's workspace, and where source links point."""

    services: Services
    workspace: str
    links: LinkSigner | None


Resolve = Callable[[Context], Caller]


def check_text(value: str, param: str) -> str:
    if len(value) > MAX_QUERY_CHARS:
        raise InvalidRequest(
            f"{param} is {len(value):,} characters long; the limit is {MAX_QUERY_CHARS:,}. Send the question "
            "or keywords, not a document (upload documents to search them).",
            param=param,
            code="string_above_max_length",
        )
    return value


def _unknown_knowledge_base(name: str, exc: NotFound) -> NotFound:
    return NotFound(
        f"{exc.message} See `list_knowledge_bases` for the knowledge bases of this workspace.",
        param="knowledge_base",
        code=exc.code,
    )


def namespace_of(caller: Caller, name: str | None) -> str:
    """The namespace a ``knowledge_base`` argument names: None is the default one; NotFound when unknown."""
    if name is None:
        return caller.services.settings.namespace_or_default(None)
    try:
        return caller.services.vector_stores.active(caller.workspace, name, param="knowledge_base").namespace
    except NotFound as exc:
        raise _unknown_knowledge_base(name, exc) from exc


def tool_result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def tool_error(exc: CalypsoError) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=render.error_text(exc))],
        structured_content={"error": render.error_fields(exc)},
        is_error=True,
    )


def run_search(
    caller: Caller, query: str, knowledge_base: str | None, document_ids: list[str] | None, max_results: int
) -> CallToolResult:
    namespace = namespace_of(caller, knowledge_base)
    query = check_text(query, "query")
    search = caller.services.search
    scope = search.scope(namespace, document_ids=document_ids, max_results=max_results)
    passages = search.search(query, scope, caller.workspace)
    results = [render.passage_result(p, rank, caller.links) for rank, p in enumerate(passages, start=1)]
    structured = {"query": query, "knowledge_base": namespace, "results": results}
    return tool_result(render.search_text(query, namespace, results), structured)


def run_list(caller: Caller) -> CallToolResult:
    services, workspace = caller.services, caller.workspace
    default = services.settings.namespace_or_default(None)
    listed: list[dict[str, Any]] = []
    after = None
    while len(listed) < MAX_LISTED:
        page = services.vector_stores.list_stores(workspace, 100, after, None, "asc")
        for state in page.items:
            counts = state.file_counts
            listed.append(
                {
                    "id": state.store.id,
                    "name": state.store.name,
                    "description": state.store.description,
                    "documents": counts["total"],
                    "completed": counts["completed"],
                    "in_progress": counts["in_progress"],
                    "failed": counts["failed"] + counts["cancelled"],
                    "bytes": state.usage_bytes,
                    "status": state.status,
                    "default": state.store.namespace == default,
                }
            )
        if not page.has_more or not page.items:
            break
        after = page.items[-1].store.id
    bots = [{"id": b.id, "knowledge_base": b.namespace} for b in services.bots.all(workspace)]
    lines = [f"{len(listed)} knowledge base(s):"] + [
        f"- {kb['id']}{' (default)' if kb['default'] else ''}: {kb['completed']} document(s) searchable"
        + (f", {kb['in_progress']} in progress" if kb["in_progress"] else "")
        + (f" — {kb['name']}" if kb["name"] and kb["name"] != kb["id"] else "")
        for kb in listed
    ]
    lines.append(
        "Bots for `ask`: " + ", ".join(f"{b['id']} ({b['knowledge_base'] or 'no knowledge base'})" for b in bots)
    )
    return tool_result("\n".join(lines), {"knowledge_bases": listed, "bots": bots})


async def run_ask(caller: Caller, question: str, bot_id: str | None, knowledge_base: str | None) -> CallToolResult:
    """The bot's answer: over the knowledge base named (the store whole: the bot's documents are of its own)."""
    narrowing = Narrowing()
    if knowledge_base is not None:
        named = ((knowledge_base, "knowledge_base"),)
        narrowing = Narrowing((knowledge_base,), named, bot_documents=False, missing=_unknown_knowledge_base)
    messages = [{"role": "user", "content": check_text(question, "question")}]
    turn = await caller.services.turns.prepare_async(TurnInput(messages, caller.workspace, bot_id, narrowing))
    answer = await caller.services.answering.answer(turn.ask)
    structured = render.answer_result(question, turn.bot.id, answer, caller.links, turn.policy.sources_hidden)
    return tool_result(render.answer_text(structured), structured)
