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
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams, TextContent

from calypso import __version__
from calypso.api.mcp.tools import Caller, build_server
from calypso.citations.links import LinkSigner
from calypso.config import Settings
from calypso.errors import AuthenticationFailed, UpstreamError
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


async def _preflight(http: httpx2.AsyncClient, endpoint: str) -> None:
    """Say plainly, before any MCP message, that the server is unreachable or refuses the key."""
    ping = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    try:
        response = await http.post(endpoint, json=ping, headers=headers)
    except httpx2.HTTPError as exc:
        raise UpstreamError(
            f"Cannot reach Calypso at {endpoint} ({type(exc).__name__}: {exc}); is `calypso serve` running there?"
        ) from exc
    if response.status_code == 401:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text
        raise AuthenticationFailed(f"Calypso at {endpoint} refused the key: {message} (--api-key, CALYPSO_API_KEY)")
    if response.status_code >= 400:
        raise UpstreamError(f"Calypso at {endpoint} answered {response.status_code}: {response.text[:300]}")


async def serve_remote(url: str, api_key: str | None) -> None:
    """Relay stdio to the server's ``/mcp``: its tools, schemas and results, unchanged.

    Raises AuthenticationFailed or UpstreamError, before serving, when the server refuses the key or
    cannot be reached."""
    endpoint = endpoint_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    async with create_mcp_http_client(headers=headers) as http:
        await _preflight(http, endpoint)
        async with Client(streamable_http_client(endpoint, http_client=http)) as remote:
            await _relay(remote, endpoint)


async def _relay(remote: Client, endpoint: str) -> None:
    """Serve stdio with the remote's tools: each call forwarded, its result given back unchanged."""

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return await remote.list_tools()

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        try:
            result = await remote.call_tool(params.name, params.arguments or {})
        except Exception as exc:  # the server went away mid-session: a tool error, not a dead session
            log.warning("MCP relay to %s: %s", endpoint, exc)
            text = f"Calypso at {endpoint} did not answer ({type(exc).__name__}: {exc}); is `calypso serve` running?"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        if not isinstance(result, CallToolResult):
            raise TypeError(f"unexpected result from {endpoint}: {type(result).__name__}")
        return result

    relay: Server[Any] = Server(
        "calypso",
        version=__version__,
        title="Calypso",
        instructions=remote.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    async with stdio_server() as (read_stream, write_stream):
        await relay.run(read_stream, write_stream, relay.create_initialization_options())
