"""The MCP endpoint of the API server: streamable HTTP at ``/mcp``, stateless, behind the API keys.

Stateless: every POST is answered on its own (no session to find again), so any API process answers
any request, as for the HTTP routes. ``AuthMiddleware`` authenticates ``/mcp`` as it does ``/v1``: a
missing or wrong key is a 401 before any MCP message is read, and the key's workspace is in the scope.
Host and Origin are checked as the SDK recommends (DNS rebinding): loopback names on a loopback bind,
else the bind address, the public URL's host and ``CALYPSO_MCP_ALLOWED_HOSTS``.
"""

from __future__ import annotations

import ipaddress
import logging
from contextlib import AbstractAsyncContextManager
from urllib.parse import urlsplit

from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from calypso.api.deps import link_signer
from calypso.api.mcp.calls import Caller
from calypso.api.mcp.tools import build_server
from calypso.config import Settings
from calypso.scope import DEFAULT_WORKSPACE

log = logging.getLogger("calypso.mcp")

PATH = "/mcp"
_LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
_LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def _is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_patterns(host: str) -> list[str]:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return [shown, f"{shown}:*"]


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """The Host/Origin checks for this bind; off only on a wildcard bind nobody named (said once, at start)."""
    hosts = list(_LOOPBACK_HOSTS)
    origins = list(_LOOPBACK_ORIGINS)
    named = [h.strip() for h in settings.mcp_allowed_hosts.split(",") if h.strip()]
    for host in named:
        hosts += _host_patterns(host)
    origins += [o.strip().rstrip("/") for o in settings.mcp_allowed_origins.split(",") if o.strip()]
    if settings.public_base_url:
        public = urlsplit(settings.public_base_url)
        if public.hostname:
            hosts += [public.netloc, *_host_patterns(public.hostname)]
            origins.append(f"{public.scheme}://{public.netloc}")
    bind = settings.host.strip("[]")
    wildcard = bind in ("0.0.0.0", "::", "")
    if not wildcard and not _is_loopback(bind):
        hosts += _host_patterns(bind)
    if wildcard and not named and not settings.public_base_url:
        log.warning(
            "MCP at %s: Host checks are off on the wildcard bind %s; set CALYPSO_MCP_ALLOWED_HOSTS (or "
            "CALYPSO_PUBLIC_BASE_URL) to the names clients use, so DNS rebinding cannot reach it.",
            PATH,
            settings.host,
        )
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def _caller(app: FastAPI, ctx: Context) -> Caller:
    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise RuntimeError("an MCP call over HTTP without its HTTP request")
    workspace = request.scope.get("state", {}).get("workspace", DEFAULT_WORKSPACE)
    return Caller(app.state.services, workspace, link_signer(request))


class MCPEndpoint:
    """The ASGI app at ``/mcp`` and the lifespan its session manager runs in."""

    def __init__(self, app: FastAPI, settings: Settings) -> None:
        server = build_server(lambda ctx: _caller(app, ctx))
        # The SDK's app is not mounted (its routes would skip ours); its session manager answers /mcp.
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,  # one JSON reply per POST: nothing streams, so no SSE framing to pay for
            transport_security=transport_security(settings),
            max_request_body_size=settings.max_request_bytes,
        )
        self.manager: StreamableHTTPSessionManager = server.session_manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)

    def run(self) -> AbstractAsyncContextManager[None]:
        return self.manager.run()


def mount(app: FastAPI, settings: Settings) -> MCPEndpoint:
    """Serve MCP at ``/mcp``; the app's lifespan must enter ``endpoint.run()``."""
    endpoint = MCPEndpoint(app, settings)
    app.router.routes.append(Route(PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    return endpoint
