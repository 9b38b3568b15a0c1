"""The MCP tools: ``search``, ``ask``, ``fetch``, ``list_knowledge_bases``, ``verify``. A translator like the routes.

Here: their names, descriptions, input schemas and the server they are registered on. Each tool reads
its caller (services, workspace, link signer) through ``resolve`` (the HTTP mount gives the request's,
stdio the data directory's), runs its call (``calls``: the same service as its HTTP route), and returns a
``CallToolResult`` with text a model reads and ``structuredContent`` matching its ``outputSchema``
(``shapes``). A ``CalypsoError`` becomes a tool error (``isError``) with the HTTP message and code, so
a bad argument never ends the session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError

from calypso import __version__
from calypso.api.errors import internal_error
from calypso.api.mcp import render
from calypso.api.mcp.calls import MAX_QUERY_CHARS, Resolve, run_ask, run_list, run_search, tool_error
from calypso.api.mcp.passages import MAX_NEIGHBOURS, MAX_VERIFY_PASSAGES, read_document, run_fetch, run_verify
from calypso.api.mcp.shapes import AskResult, FetchResult, KnowledgeBasesResult, SearchResult, VerifyResult
from calypso.api.request_ids import new_request_id
from calypso.bots import MAX_DOCUMENT_IDS
from calypso.errors import CalypsoError, InvalidRequest, NotFound
from calypso.scope import MAX_PASSAGES
from calypso.validation import invalid_request_from

log = logging.getLogger("calypso.mcp")

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


async def _guarded(run: Callable[[], Awaitable[CallToolResult]], tool: str) -> CallToolResult:
    """The tool's result, or its error as a tool error: the session goes on whatever the arguments were."""
    try:
        return await run()
    except CalypsoError as exc:
        if exc.status >= 500:
            log.warning("MCP %s failed: %s %s", tool, exc.status, exc.message)
        return tool_error(exc)
    except Exception as exc:  # a bug: logged with an id, answered as HTTP answers a 500
        rid = new_request_id()
        log.exception("unexpected error in MCP tool %s (request id %s)", tool, rid, exc_info=exc)
        error = internal_error(rid)["error"]
        return tool_error(CalypsoError(error["message"]))


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
                return tool_error(invalid_request_from(exc.__cause__, arguments))
            if self._tool_manager.get_tool(name) is None:
                known = ", ".join(tool.name for tool in await self.list_tools())
                return tool_error(NotFound(f"No tool {name!r}; this server has {known}.", param="name"))
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
