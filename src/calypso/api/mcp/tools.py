"""The MCP tools: ``search``, ``ask``, ``fetch``, ``list_knowledge_bases``, ``verify``. A translator like the routes.

Each tool reads its caller (services, workspace, link signer) through ``resolve`` (the HTTP mount gives
the request's, stdio the data directory's), calls the same service as its HTTP route, and returns a
``CallToolResult`` with text a model reads and ``structuredContent`` matching its ``outputSchema``
(``shapes``). A ``CalypsoError`` becomes a tool error (``isError``) with the HTTP message and code, so
a bad argument never ends the session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from calypso import __version__
from calypso.api.errors import internal_error
from calypso.api.mcp import render
from calypso.api.mcp.shapes import AskResult, FetchResult, KnowledgeBasesResult, SearchResult, VerifyResult
from calypso.api.request_ids import new_request_id
from calypso.bots import MAX_DOCUMENT_IDS, bot_scope
from calypso.citations.grounded import Source, quote_locator
from calypso.citations.links import LinkSigner, source_url
from calypso.citations.support import SUPPORT_THRESHOLD
from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.models import Document, Passage
from calypso.scope import MAX_PASSAGES, RetrievalScope
from calypso.services import Services
from calypso.services.bots import ask_request
from calypso.validation import invalid_request_from

log = logging.getLogger("calypso.mcp")

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

INSTRUCTIONS = (
    "Calypso searches the user's documents and answers with citations. `search` returns numbered passages "
    "with their document, page or section and a link; cite them as [n] and give the link. `ask` returns a "
    "grounded answer with its citations and which sentences the sources support. `fetch` a passage id for "
    "the text around it. `list_knowledge_bases` names what can be searched."
)
_READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)

Query = Annotated[
    str,
    Field(
        description="What to look for: a question or keywords.",
        json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS},
    ),
]
KnowledgeBase = Annotated[
    str | None,
    Field(
        description="A knowledge base (namespace or vector store id, see `list_knowledge_bases`); default: the default one."
    ),
]
DocumentIds = Annotated[
    list[str] | None,
    Field(description="Only passages of these document ids.", json_schema_extra={"maxItems": MAX_DOCUMENT_IDS}),
]
MaxResults = Annotated[int, Field(ge=1, le=MAX_PASSAGES, description="How many passages, 1 to 50.")]


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


def _success(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _failure(exc: CalypsoError) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=render.error_text(exc))],
        structured_content={"error": render.error_fields(exc)},
        is_error=True,
    )


async def _guarded(run: Callable[[], Awaitable[CallToolResult]], tool: str) -> CallToolResult:
    """The tool's result, or its error as a tool error: the session goes on whatever the arguments were."""
    try:
        return await run()
    except CalypsoError as exc:
        if exc.status >= 500:
            log.warning("MCP %s failed: %s %s", tool, exc.status, exc.message)
        return _failure(exc)
    except Exception as exc:  # a bug: logged with an id, answered as HTTP answers a 500
        rid = new_request_id()
        log.exception("unexpected error in MCP tool %s (request id %s)", tool, rid, exc_info=exc)
        error = internal_error(rid)["error"]
        return _failure(CalypsoError(error["message"]))


# -- the tools' work, on a thread where it touches the store -----------------------------------------


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
    return _success(render.search_text(query, namespace, results), structured)


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
    return _success(render.fetch_text(structured), structured)


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
                "link": source_url(passage, caller.links, quote.page_number, quote.text),
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
    return _success(render.verify_text(structured), structured)


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
    return _success("\n".join(lines), {"knowledge_bases": listed, "bots": bots})


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
    return _success(render.answer_text(structured), structured)


# -- the server --------------------------------------------------------------------------------------


class CalypsoMCP(MCPServer[Any]):
    """The SDK's server, whose argument errors read like the HTTP API's: OpenAI's codes, the argument named."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):  # the arguments do not match the input schema
                return _failure(invalid_request_from(exc.__cause__, arguments))
            if self._tool_manager.get_tool(name) is None:
                known = ", ".join(tool.name for tool in await self.list_tools())
                return _failure(NotFound(f"No tool {name!r}; this server has {known}.", param="name"))
            raise


def build_server(resolve: Resolve) -> MCPServer[Any]:
    """An MCP server with Calypso's tools; ``resolve`` gives each call its caller."""
    # MCPServer configures logging (logging.basicConfig): a no-op while the root logger has a handler,
    # so the server's own log format stays, whoever set it up (or nobody).
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    try:
        server = CalypsoMCP(name="calypso", title="Calypso", version=__version__, instructions=INSTRUCTIONS)
    finally:
        root.removeHandler(guard)

    async def search(
        query: Query,
        ctx: Context,
        knowledge_base: KnowledgeBase = None,
        document_ids: DocumentIds = None,
        max_results: MaxResults = 5,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search the knowledge base: the passages an answer would rest on, each with its document, page or
        heading, text, score and a signed link. Cite a passage as [n] with its link."""

        async def run() -> CallToolResult:
            caller = resolve(ctx)
            return await asyncio.to_thread(run_search, caller, query, knowledge_base, document_ids, max_results)

        return await _guarded(run, "search")

    async def ask(
        question: Annotated[
            str,
            Field(
                description="The question to answer from the documents.",
                json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS},
            ),
        ],
        ctx: Context,
        bot: Annotated[
            str | None, Field(description="A bot (see `list_knowledge_bases`); default: the default bot.")
        ] = None,
        knowledge_base: KnowledgeBase = None,
    ) -> Annotated[CallToolResult, AskResult]:
        """Answer a question from the documents: a grounded answer whose every citation carries the exact
        quote, its page or heading, and a link, and the support of each sentence (supported, weak,
        unsupported). Sentences the sources do not support are flagged: say so rather than repeat them."""

        async def run() -> CallToolResult:
            return await run_ask(resolve(ctx), question, bot, knowledge_base)

        return await _guarded(run, "ask")

    async def fetch(
        id: Annotated[
            str,
            Field(description="A passage id '<document_id>:<chunk_index>' from `search` (or a document or file id)."),
        ],
        ctx: Context,
        neighbours: Annotated[
            int, Field(ge=0, le=MAX_NEIGHBOURS, description="Passages to add on each side of a passage id.")
        ] = 1,
    ) -> Annotated[CallToolResult, FetchResult]:
        """Read a passage in full with the passages around it (or the start of a document), with its
        document, locators and link."""

        async def run() -> CallToolResult:
            caller = resolve(ctx)
            return await asyncio.to_thread(run_fetch, caller, id, neighbours)

        return await _guarded(run, "fetch")

    async def list_knowledge_bases(ctx: Context) -> Annotated[CallToolResult, KnowledgeBasesResult]:
        """The knowledge bases (namespaces, vector stores) this key can search, with their document counts,
        and the bots `ask` can answer with."""

        async def run() -> CallToolResult:
            caller = resolve(ctx)
            return await asyncio.to_thread(run_list, caller)

        return await _guarded(run, "list_knowledge_bases")

    async def verify(
        claim: Annotated[
            str,
            Field(
                description="A sentence to check: an answer's claim, a draft's statement.",
                json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS},
            ),
        ],
        ctx: Context,
        passage_ids: Annotated[
            list[str] | None,
            Field(
                description="Passage ids from `search` to check it against; none: search the claim itself.",
                json_schema_extra={"maxItems": MAX_VERIFY_PASSAGES},
            ),
        ] = None,
        knowledge_base: KnowledgeBase = None,
        max_passages: Annotated[
            int, Field(ge=1, le=MAX_VERIFY_PASSAGES, description="Passages to search when no ids are given.")
        ] = 5,
    ) -> Annotated[CallToolResult, VerifyResult]:
        """Check whether the documents support a claim: each passage's best supporting sentence(s), with
        the support score answers' citations carry and whether it passes the server's threshold."""

        async def run() -> CallToolResult:
            caller = resolve(ctx)
            if passage_ids is not None and len(passage_ids) > MAX_VERIFY_PASSAGES:
                raise InvalidRequest(
                    f"passage_ids lists {len(passage_ids)} ids; the limit is {MAX_VERIFY_PASSAGES}.",
                    param="passage_ids",
                )
            return await asyncio.to_thread(run_verify, caller, claim, passage_ids, knowledge_base, max_passages)

        return await _guarded(run, "verify")

    async def document(document_id: str, ctx: Context) -> str:
        """A document's extracted text, with its locators and source link."""
        caller = resolve(ctx)
        try:
            return await asyncio.to_thread(read_document, caller, document_id)
        except CalypsoError as exc:  # the resource error carries the HTTP message and code
            raise ResourceError(render.error_text(exc)) from exc

    server.resource(
        "calypso://documents/{document_id}",
        name="document",
        title="A document of the knowledge base",
        description="The document's extracted text (its passages joined), with its pages and source link. "
        "Document ids come from `search`, `fetch` and `ask`.",
        mime_type="text/markdown",
    )(document)

    for tool, title in (
        (search, "Search the knowledge base"),
        (ask, "Ask, with citations"),
        (fetch, "Read a passage"),
        (list_knowledge_bases, "List knowledge bases"),
        (verify, "Check a claim against the documents"),
    ):
        server.add_tool(tool, title=title, annotations=_READ_ONLY, structured_output=True)
    return server
