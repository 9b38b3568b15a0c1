"""What each MCP tool does, on the services: the same calls as the HTTP routes, rendered by ``render``.

A tool's work runs on a worker thread where it touches the store (as FastAPI runs a sync route);
``ask`` is async, as the answering service is. Each returns a ``CallToolResult`` (text and
``structuredContent``) or raises a ``CalypsoError``, which ``tools`` turns into a tool error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent

from calypso.api.mcp import render
from calypso.bots import bot_scope
from calypso.citations.grounded import Source, quote_locator
from calypso.citations.links import LinkSigner, quote_url
from calypso.citations.support import SUPPORT_THRESHOLD
from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.models import Document, Passage
from calypso.scope import RetrievalScope
from calypso.services import Services
from calypso.services.bots import ask_request

# Longest query or question: a search reads a question, not a document (a 1 MB paste is refused with a
# 400 naming the limit, before any analysis). The Responses endpoint bounds whole conversations likewise.
MAX_QUERY_CHARS = 20_000
MAX_NEIGHBOURS = 5
MAX_FETCH_PASSAGES = 12  # of a whole document: about 10,000 characters at the default chunk size
MAX_LISTED = 1000  # knowledge bases listed at most
MAX_VERIFY_PASSAGES = 20
MAX_RESOURCE_PASSAGES = 400  # of a document resource: about 300,000 characters


@dataclass(frozen=True)
class Caller:
    """Who calls, as a route knows it: the services, the key's workspace, and where source links point."""

    services: Services
    workspace: str
    links: LinkSigner | None


Resolve = Callable[[Context], Caller]


def _check_text(value: str, param: str) -> str:
    if len(value) > MAX_QUERY_CHARS:
        raise InvalidRequest(
            f"{param} is {len(value):,} characters long; the limit is {MAX_QUERY_CHARS:,}. Send the question "
            "or keywords, not a document (upload documents to search them).",
            param=param,
            code="string_above_max_length",
        )
    return value


def _knowledge_base(caller: Caller, name: str | None) -> str:
    """The namespace a ``knowledge_base`` argument names: None is the default one; NotFound when unknown."""
    if name is None:
        return caller.services.settings.default_namespace
    try:
        return caller.services.vector_stores.active(caller.workspace, name, param="knowledge_base").namespace
    except NotFound as exc:
        raise NotFound(
            f"{exc.message} See `list_knowledge_bases` for the knowledge bases of this workspace.",
            param="knowledge_base",
            code=exc.code,
        ) from exc


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
    namespace = _knowledge_base(caller, knowledge_base)
    passages = caller.services.search.search(
        _check_text(query, "query"),
        namespace,
        document_ids=document_ids,
        max_results=max_results,
        workspace=caller.workspace,
    )
    results = [render.passage_result(p, rank, caller.links) for rank, p in enumerate(passages, start=1)]
    structured = {"query": query, "knowledge_base": namespace, "results": results}
    return tool_result(render.search_text(query, namespace, results), structured)


def _parse_id(raw: str) -> tuple[str, int | None]:
    document_id, sep, index = raw.strip().rpartition(":")
    if not sep:
        return raw.strip(), None
    if not index.isdigit() or not document_id:
        raise InvalidRequest(
            f"Invalid id {raw!r}: give a passage id '<document_id>:<chunk_index>' from `search`, or a document id.",
            param="id",
        )
    return document_id, int(index)


def _document(caller: Caller, document_id: str, param: str) -> Document:
    documents, workspace = caller.services.documents, caller.workspace
    if not document_id:
        raise InvalidRequest(f"{param} is empty: give a passage id from `search`, or a document id.", param=param)
    try:
        if document_id.startswith("file-"):
            return documents.get_by_file_id(document_id, workspace)
        return documents.get(document_id, workspace)
    except NotFound as exc:  # the HTTP message, naming the tool's argument
        raise NotFound(exc.message, param=param, code=exc.code) from exc


def _missing_passage(raw_id: str, document: Document, param: str) -> NotFound:
    return NotFound(
        f"No passage {raw_id!r}: document {document.id!r} has {document.chunk_count} passage(s), "
        f"numbered 0 to {document.chunk_count - 1}.",
        param=param,
    )


def run_fetch(caller: Caller, raw_id: str, neighbours: int) -> CallToolResult:
    documents, workspace = caller.services.documents, caller.workspace
    document_id, index = _parse_id(_check_text(raw_id, "id"))
    document = _document(caller, document_id, "id")
    if index is None:
        listing = documents.chunks(document.id, MAX_FETCH_PASSAGES, None, workspace)
        target = None
    else:
        first = max(0, index - neighbours)
        listing = documents.chunks(document.id, index + neighbours - first + 1, first - 1 if first else None, workspace)
        found = [c.chunk.chunk_index for c in listing.items]
        if index not in found:
            raise _missing_passage(raw_id, document, "id")
        target = found.index(index)
    passages = [Passage(document, c.chunk, 0.0) for c in listing.items]
    results = [render.passage_result(p, rank, caller.links, score=False) for rank, p in enumerate(passages, start=1)]
    structured = {
        "id": raw_id,
        "document": render.document_result(document, caller.links, passages[0] if passages else None),
        "passages": results,
        "target": target,
        "text": render.joined_text(passages),
        "truncated": index is None and listing.has_more,
    }
    return tool_result(render.fetch_text(structured), structured)


def _passage(caller: Caller, raw_id: str, param: str) -> Passage:
    """The passage a ``<document_id>:<chunk_index>`` id names, in the caller's workspace only."""
    document_id, index = _parse_id(raw_id)
    if index is None:
        raise InvalidRequest(f"{param}: {raw_id!r} is not a passage id '<document_id>:<chunk_index>'.", param=param)
    document = _document(caller, document_id, param)
    listing = caller.services.documents.chunks(document.id, 1, index - 1 if index else None, caller.workspace)
    if not listing.items or listing.items[0].chunk.chunk_index != index:
        raise _missing_passage(raw_id, document, param)
    return Passage(document, listing.items[0].chunk, 0.0)


def run_verify(
    caller: Caller, claim: str, passage_ids: list[str] | None, knowledge_base: str | None, max_passages: int
) -> CallToolResult:
    services = caller.services
    if not _check_text(claim, "claim").strip():
        raise InvalidRequest("The claim is empty; send the sentence to check against the documents.", param="claim")
    if passage_ids:
        passages = [_passage(caller, raw, f"passage_ids[{i}]") for i, raw in enumerate(passage_ids)]
        score = False
    else:
        namespace = _knowledge_base(caller, knowledge_base)
        passages = services.search.search(claim, namespace, max_results=max_passages, workspace=caller.workspace)
        score = True
    threshold = services.settings.support_threshold
    threshold = SUPPORT_THRESHOLD if threshold is None else threshold
    evidence: list[dict[str, Any]] = []
    for rank, passage in enumerate(passages, start=1):
        quote = services.answering.find_quote(claim, Source(rank, passage))
        page_number, page_label, locator = quote_locator(quote, passage)
        evidence.append(
            {
                "passage": render.passage_result(passage, rank, caller.links, score=score),
                "quote": quote.text,
                "quote_start": quote.passage_start,
                "quote_end": quote.passage_end,
                "document_start": quote.document_start,
                "document_end": quote.document_end,
                "page_number": page_number,
                "page_label": page_label,
                "locator_label": locator,
                "support_score": quote.support,
                "supported": quote.supported,
                "link": quote_url(passage, caller.links, quote),
            }
        )
    evidence.sort(key=lambda e: -float(e["support_score"]))
    best = float(evidence[0]["support_score"]) if evidence else 0.0
    structured = {
        "claim": claim,
        "supported": any(e["supported"] for e in evidence),
        "support_score": best,
        "threshold": threshold,
        "evidence": evidence,
    }
    return tool_result(render.verify_text(structured), structured)


def read_document(caller: Caller, document_id: str) -> str:
    """``calypso://documents/{id}``: the document's extracted text (its passages joined) under a header
    with its locators and link; the first MAX_RESOURCE_PASSAGES passages of a longer one."""
    documents, workspace = caller.services.documents, caller.workspace
    document = _document(caller, document_id, "uri")
    passages: list[Passage] = []
    after = None
    while len(passages) < MAX_RESOURCE_PASSAGES:
        listing = documents.chunks(document.id, 100, after, workspace)
        passages += [Passage(document, c.chunk, 0.0) for c in listing.items]
        if not listing.has_more or not listing.items:
            break
        after = listing.items[-1].chunk.chunk_index
    shown = passages[:MAX_RESOURCE_PASSAGES]
    head = render.document_result(document, caller.links, shown[0] if shown else None)
    more = len(shown) < document.chunk_count
    lines = [
        f"# {document.title or document.filename}",
        f"document {document.id} ({document.filename}, {document.media_type}, {document.page_count} page(s), "
        f"{document.chunk_count} passage(s), knowledge base {document.namespace})",
        f"source: {head['link']}",
    ]
    if more:
        lines.append(f"(the first {len(shown)} passages: `fetch` '{document.id}:{len(shown)}' for the rest)")
    return "\n".join(lines) + "\n\n" + render.joined_text(shown)


def run_list(caller: Caller) -> CallToolResult:
    services, workspace = caller.services, caller.workspace
    default = services.settings.default_namespace
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
    services, workspace = caller.services, caller.workspace
    bot = services.bots.get(bot_id, workspace=workspace)
    scope = None
    if knowledge_base is not None:
        namespace = await asyncio.to_thread(_knowledge_base, caller, knowledge_base)
        scope = RetrievalScope((namespace,), None, bot.passage_count)  # the bot's documents are of its own
    request = ask_request(
        bot,
        [{"role": "user", "content": _check_text(question, "question")}],
        workspace=workspace,
        scope=scope or bot_scope(bot),
    )
    answer = await services.answering.answer(request)
    hidden = services.policies.sources_hidden(workspace, bot.sources_policy)
    structured = render.answer_result(question, bot.id, answer, caller.links, hidden)
    return tool_result(render.answer_text(structured), structured)
