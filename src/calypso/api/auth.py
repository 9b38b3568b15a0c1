"""Who is calling: API keys map to workspaces; the admin key manages keys.

Every /v1 route takes ``current_workspace``; with auth off (local use) every
request is in the ``default`` workspace.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from calypso.config import Settings, revealed
from calypso.errors import AuthenticationFailed, CalypsoError, MissingApiKey, PermissionDenied
from calypso.scope import DEFAULT_WORKSPACE
from calypso.services.keys import KeyService


def auth_enabled(settings: Settings) -> bool:
    if settings.auth != "auto":
        return settings.auth == "on"
    host = settings.host.strip("[]")
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a host name we cannot judge: require keys


def _bearer(request: Request) -> str:
    return bearer_key(request.headers.get("authorization"))


def bearer_key(header: str | None) -> str:
    """The key of an ``Authorization: Bearer KEY`` header (HTTP header or gRPC metadata); 401 otherwise."""
    if not header:
        raise MissingApiKey(
            "Missing API key: send 'Authorization: Bearer <key>' (create one with `calypso keys create`)."
        )
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key or " " in key:
        raise AuthenticationFailed("Malformed Authorization header: expected 'Bearer <key>'.")
    return key


def authenticate(request: Request) -> str:
    """The workspace of the request's key; 401 for a missing, malformed, unknown or revoked key."""
    if not request.app.state.auth_enabled:
        return DEFAULT_WORKSPACE
    return workspace_for_header(request.app.state.services.keys, request.headers.get("authorization"))


def workspace_for_header(keys: KeyService, header: str | None) -> str:
    """The workspace of the key an Authorization header (or gRPC metadata) carries; 401 when it has none."""
    workspace = keys.workspace_for(bearer_key(header))
    if workspace is None:
        raise AuthenticationFailed("Invalid or revoked API key; ask your administrator for a new one.")
    return workspace


def current_workspace(request: Request) -> str:
    """The caller's workspace, as the auth middleware established it."""
    workspace = request.scope.get("state", {}).get("workspace")
    return workspace if workspace is not None else authenticate(request)


async def _workspace_dependency(request: Request) -> str:
    # ``async``: FastAPI runs a plain ``def`` dependency on its thread pool, a hop per request for a dictionary
    # lookup; only a request the middleware did not see goes to the key store, on the pool.
    workspace = request.scope.get("state", {}).get("workspace")
    return workspace if workspace is not None else await run_in_threadpool(authenticate, request)


Workspace = Annotated[str, Depends(_workspace_dependency)]


def _is_signed_content(scope: Scope) -> bool:
    # A signed source link carries its own proof; the route checks the signature.
    query: bytes = scope.get("query_string", b"")
    path: str = scope["path"]
    return path.endswith(("/content", "/view")) and (b"signature=" in query or b"expires=" in query)


class AuthMiddleware:
    """Authenticates every /v1 and /mcp request before anything else runs (even body parsing), so a missing key is 401."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        # /mcp too: a wrong key is a 401 before the MCP endpoint reads any message.
        api = (path.startswith("/v1/") and not path.startswith("/v1/admin/")) or path.rstrip("/") == "/mcp"
        guarded = scope["type"] == "http" and api
        if guarded and not _is_signed_content(scope):
            request = Request(scope)
            try:
                workspace = authenticate(request)
            except CalypsoError as exc:
                response = JSONResponse(exc.to_dict(), status_code=exc.status, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
            scope.setdefault("state", {})["workspace"] = workspace
        await self.app(scope, receive, send)


async def require_admin(request: Request) -> None:
    """Admin routes need CALYPSO_ADMIN_KEY; with auth off and no admin key set, local use is allowed."""
    admin_key = revealed(request.app.state.services.settings.admin_key)
    if not admin_key:
        if request.app.state.auth_enabled:
            raise PermissionDenied("The admin API is disabled: set CALYPSO_ADMIN_KEY to enable it.")
        return
    # As bytes: compare_digest refuses non-ASCII str. Headers are decoded as Latin-1: encoding back gives the bytes sent.
    if not hmac.compare_digest(_bearer(request).encode("latin-1"), admin_key.encode()):
        raise AuthenticationFailed("This route needs the admin key (CALYPSO_ADMIN_KEY).")
