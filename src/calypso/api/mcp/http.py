"""The MCP endpoint of the API server: streamable HTTP at ``/mcp``, stateless, behind the API keys.

Stateless: every POST is answered on its own (no session to find again), so any API process answers
any request, as for the HTTP routes. ``AuthMiddleware`` authenticates ``/mcp`` as it does ``/v1``: a
missing or wrong key is a 401 before any MCP message is read, and the key's workspace is in the scope.
Host and Origin are checked as the SDK recommends (DNS rebinding): loopback names on a loopback bind,
else the bind address, the public URL's host and ``CALYPSO_MCP_ALLOWED_HOSTS``.

The SDK is imported on the first request to ``/mcp``, not at start: it and what it brings (its types,
sse-starlette, the HTTP client) are 21 MB of anonymous memory and 5 MB of libraries in every API process,
most of which never see an MCP client.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fastapi import FastAPI
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from calypso.api.deps import link_signer
from calypso.config import Settings
from calypso.scope import DEFAULT_WORKSPACE

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from calypso.api.mcp.calls import Caller

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


def allowed_hosts(settings: Settings) -> tuple[list[str], list[str]] | None:
    """The Host and Origin patterns this bind accepts; None on a wildcard bind nobody named (checks off)."""
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
        return None
    return hosts, origins


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """The SDK's Host/Origin checks for this bind (``allowed_hosts``)."""
    from mcp.server.transport_security import TransportSecuritySettings

    allowed = allowed_hosts(settings)
    if allowed is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts, origins = allowed
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def _caller(app: FastAPI, ctx: Context) -> Caller:
    from calypso.api.mcp.calls import Caller

    request = ctx.request_context.request
    if not isinstance(request, Request):
        raise RuntimeError("an MCP call over HTTP without its HTTP request")
    workspace = request.scope.get("state", {}).get("workspace", DEFAULT_WORKSPACE)
    return Caller(app.state.services, workspace, link_signer(request))


class MCPEndpoint:
    """The ASGI app at ``/mcp``, and the lifespan its session manager runs in once a request wants it.

    The session manager's task group must be entered and left by one task, so a task of the lifespan's
    own holds it: the first request asks for it and waits until it runs (or says why it could not start).
    """

    def __init__(self, app: FastAPI, settings: Settings) -> None:
        self._app = app
        self._settings = settings
        self._manager: StreamableHTTPSessionManager | None = None
        self._wanted: asyncio.Event | None = None  # made by ``run``, on the loop that serves
        self._started = asyncio.Event()
        self._failure: BaseException | None = None

    def _build(self) -> StreamableHTTPSessionManager:
        from calypso.api.mcp.tools import build_server

        app = self._app
        server = build_server(lambda ctx: _caller(app, ctx))
        # The SDK's app is not mounted (its routes would skip ours); its session manager answers /mcp.
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,  # one JSON reply per POST: nothing streams, so no SSE framing to pay for
            transport_security=transport_security(self._settings),
            max_request_body_size=self._settings.max_request_bytes,
        )
        return server.session_manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._manager is None:
            if self._wanted is None:
                raise RuntimeError("the MCP endpoint is served only inside the app's lifespan")
            self._wanted.set()
            await self._started.wait()
            if self._failure is not None:
                raise RuntimeError("the MCP endpoint could not start") from self._failure
        assert self._manager is not None
        await self._manager.handle_request(scope, receive, send)

    async def _serve(self, wanted: asyncio.Event, stopping: asyncio.Event) -> None:
        await wanted.wait()
        try:
            manager = await asyncio.to_thread(self._build)  # the imports take a moment: not on the loop
            async with manager.run():
                self._manager = manager
                self._started.set()
                await stopping.wait()
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            self._started.set()  # a request still waiting gets the failure, not a hang

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Hold the session manager's task group from the first MCP request until the app stops."""
        wanted, stopping = asyncio.Event(), asyncio.Event()
        self._wanted, self._started, self._manager, self._failure = wanted, asyncio.Event(), None, None
        task = asyncio.create_task(self._serve(wanted, stopping))
        try:
            yield
        finally:
            stopping.set()
            self._wanted = None
            if not wanted.is_set():
                task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("the MCP endpoint failed")


def mount(app: FastAPI, settings: Settings) -> MCPEndpoint:
    """Serve MCP at ``/mcp``; the app's lifespan must enter ``endpoint.run()``."""
    if allowed_hosts(settings) is None:
        log.warning(
            "MCP at %s: Host checks are off on the wildcard bind %s; set CALYPSO_MCP_ALLOWED_HOSTS (or "
            "CALYPSO_PUBLIC_BASE_URL) to the names clients use, so DNS rebinding cannot reach it.",
            PATH,
            settings.host,
        )
    endpoint = MCPEndpoint(app, settings)
    app.router.routes.append(Route(PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    return endpoint
