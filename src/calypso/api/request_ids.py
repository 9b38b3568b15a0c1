"""A request id on every request: ``request.state.request_id`` and the ``x-request-id`` response header.

A client (or a proxy in front of us) may send its own ``x-request-id``; a sane
one is kept so logs on both sides line up, anything else is replaced by a
fresh ``req_<hex>``. Unexpected errors are logged with the id, and the client's
error message quotes it, so "see the server log" leads to one log entry.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calypso.logs import REQUEST_ID

HEADER = "x-request-id"
_SANE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+=/-]{0,127}")


def new_request_id() -> str:
    return f"req_{secrets.token_hex(12)}"


def sane(value: str | None) -> bool:
    """Whether an incoming id may be reused: 1-128 visible ASCII characters from a safe set (no spaces)."""
    return value is not None and _SANE.fullmatch(value) is not None


def request_id(connection: HTTPConnection) -> str:
    """This request's id (set by ``RequestIdMiddleware``; a fresh one outside it, e.g. in a bare test app)."""
    state: dict[str, Any] = connection.scope.setdefault("state", {})
    if "request_id" not in state:
        state["request_id"] = new_request_id()
    rid: str = state["request_id"]  # only ever set to a str, here or by RequestIdMiddleware
    return rid


class RequestIdMiddleware:
    """Sets ``request.state.request_id`` and echoes it as ``x-request-id`` on every HTTP response.

    Pure ASGI (not ``BaseHTTPMiddleware``) so streamed responses pass straight through.
    Install it outermost, so auth failures carry the header too; the 500 handler
    runs outside all middleware and sets the header itself.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = HTTPConnection(scope).headers.get(HEADER)
        rid = incoming if incoming is not None and sane(incoming) else new_request_id()
        scope.setdefault("state", {})["request_id"] = rid
        token = REQUEST_ID.set(rid)  # log records of this request carry it (``calypso.logs``)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != HEADER.encode()]
                message = {**message, "headers": [*headers, (HEADER.encode(), rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
