"""``calypso mcp``: the MCP tools over stdio, for desktop clients (Claude Desktop, Cursor, VS Code).

Two ways to reach a knowledge base:

* a data directory (``--home``) no server holds: the tools run here, on its services (SQLite locks the
  directory: with ``calypso serve`` on it, this says to use ``--url`` instead);
* a running server (``--url``, ``--api-key``): a thin relay to its ``/mcp``, so a desktop assistant and
  ``calypso serve`` share one knowledge base (and the key's workspace).

Nothing but MCP messages goes to stdout; logs go to stderr.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx2
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    CallToolRequestParams,
    CallToolResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    TextContent,
)

from calypso import __version__
from calypso.api.mcp.calls import Caller
from calypso.api.mcp.tools import build_server
from calypso.citations.links import LinkSigner
from calypso.config import Settings
from calypso.errors import AuthenticationFailed, CalypsoError, UpstreamError
from calypso.services import open_services

log = logging.getLogger("calypso.mcp")


def http_base_url(settings: Settings) -> str:
    """Where source links point: the public URL, else where ``calypso serve`` would listen with these settings."""
    if settings.public_base_url:
        return settings.public_base_url.rstrip("/")
    host = settings.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


async def serve_home(settings: Settings, workspace: str) -> None:
    """The tools on this data directory's services, until stdin closes."""
    if not settings.database_url and not settings.database_path.exists():
        log.warning(
            "no knowledge base at %s yet: the tools will find nothing until documents are ingested there "
            "(`calypso ingest --home %s PATH...`); is --home (CALYPSO_HOME) the directory you ingested into?",
            settings.home,
            settings.home,
        )
    services = open_services(settings, exclusive=True)  # DataDirectoryInUse when a server holds it
    try:
        links = LinkSigner(services.signing_secret, http_base_url(settings), settings.source_link_ttl_seconds)
        caller = Caller(services, workspace, links)
        server = build_server(lambda ctx: caller)
        await server.run_stdio_async()
    finally:
        await services.aclose()


def endpoint_url(url: str) -> str:
    """The server's MCP endpoint: ``http://host:8080`` and ``http://host:8080/mcp`` both name it."""
    url = url.rstrip("/")
    return url if url.endswith("/mcp") else url + "/mcp"


class Remote:
    """A running server's ``/mcp``, one JSON-RPC POST per message (it is stateless: nothing to keep open).

    Posting each message itself, rather than through an SDK client session, means a server that went away
    is a connection error on that call at once, and the next call finds it again once it is back.
    """

    HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}

    def __init__(self, http: httpx2.AsyncClient, endpoint: str) -> None:
        self.http = http
        self.endpoint = endpoint
        self._ids = 0

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result of one request; AuthenticationFailed, UpstreamError, or MCPError (a JSON-RPC error)."""
        self._ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        if params is not None:
            message["params"] = params
        try:
            response = await self.http.post(self.endpoint, json=message, headers=self.HEADERS)
        except httpx2.HTTPError as exc:
            raise UpstreamError(
                f"Cannot reach Calypso at {self.endpoint} ({type(exc).__name__}: {exc}); "
                "is `calypso serve` running there?"
            ) from exc
        if response.status_code == 401:
            raise AuthenticationFailed(
                f"Calypso at {self.endpoint} refused the key: {_error_message(response)} (--api-key, CALYPSO_API_KEY)"
            )
        if response.status_code >= 400:
            raise UpstreamError(
                f"Calypso at {self.endpoint} answered {response.status_code}: {_error_message(response)}"
            )
        body = response.json()
        if "error" in body:
            error = body["error"]
            raise MCPError(code=error.get("code", -32603), message=error.get("message", ""), data=error.get("data"))
        result: dict[str, Any] = body["result"]
        return result


def _error_message(response: httpx2.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:300]


async def serve_remote(url: str, api_key: str | None) -> None:
    """Relay stdio to the server's ``/mcp``: its tools, schemas and results, unchanged.

    Raises AuthenticationFailed or UpstreamError, before serving, when the server refuses the key or
    cannot be reached."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    async with create_mcp_http_client(headers=headers) as http:
        remote = Remote(http, endpoint_url(url))
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "calypso-mcp-relay", "version": __version__},
        }
        info = await remote.request("initialize", hello)  # checks the key before serving anything
        await _relay(remote, info.get("instructions"))


async def _relay(remote: Remote, instructions: str | None) -> None:
    """Serve stdio with the remote's tools and document resources: each request forwarded, its result given
    back unchanged."""

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult.model_validate(await remote.request("tools/list", {}))

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        try:
            result = await remote.request("tools/call", {"name": params.name, "arguments": params.arguments or {}})
        except CalypsoError as exc:  # the server went away, or the key was revoked: a tool error, the session goes on
            log.warning("MCP relay: %s", exc.message)
            return CallToolResult(content=[TextContent(type="text", text=exc.message)], is_error=True)
        return CallToolResult.model_validate(result)

    async def forward(method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await remote.request(method, params)
        except CalypsoError as exc:  # a request that is not a tool call has only the protocol's error
            raise MCPError(code=INTERNAL_ERROR, message=exc.message) from exc

    async def list_templates(ctx: Any, params: PaginatedRequestParams | None) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult.model_validate(await forward("resources/templates/list", {}))

    async def read_resource(ctx: Any, params: ReadResourceRequestParams) -> ReadResourceResult:
        return ReadResourceResult.model_validate(await forward("resources/read", {"uri": str(params.uri)}))

    relay: Server[Any] = Server(
        "calypso",
        version=__version__,
        title="Calypso",
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )
    async with stdio_server() as (read_stream, write_stream):
        await relay.run(read_stream, write_stream, relay.create_initialization_options())
