"""Guard request bodies before any route reads them: size first, then the shape of JSON.

Uploads have their own, larger limit (CALYPSO_MAX_UPLOAD_BYTES, checked where
the file is read); every other body is JSON and small, so a multi-megabyte one
is a mistake or an attack, answered 413 in OpenAI's shape. A JSON body is then
checked once by ``calypso.json_limits`` (nesting, integer size, Unicode), so
no route, whether FastAPI or ``parse_body`` decodes it, sees input that would
break it later.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calypso import json_limits
from calypso.api.validation import unacceptable_json
from calypso.errors import CalypsoError, PayloadTooLarge

_UPLOAD_PATHS = ("/v1/documents", "/v1/files")


class BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, json_limit: int, upload_limit: int) -> None:
        self.app = app
        self.json_limit = json_limit
        self.upload_limit = upload_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        is_upload = path in _UPLOAD_PATHS
        # Multipart framing adds a little to the file itself.
        limit = self.upload_limit + 64 * 1024 if is_upload else self.json_limit
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, limit, is_upload)
            return
        received = 0
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        if _is_json(scope) and scope.get("method") in ("POST", "PUT", "PATCH"):
            try:
                body = await _read_all(counting_receive)
            except BodyTooLarge:
                await self._refuse(scope, receive, send, limit, is_upload)
                return
            problem = _json_problem(body)
            if problem is not None:
                await _error(problem, scope, receive, send)
                return
            await self.app(scope, _replay(body, receive), send)
            return
        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not response_started:
                await self._refuse(scope, receive, send, limit, is_upload)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int, is_upload: bool) -> None:
        setting = "CALYPSO_MAX_UPLOAD_BYTES" if is_upload else "CALYPSO_MAX_REQUEST_BYTES"
        error = PayloadTooLarge(
            f"The request body is larger than the {limit:,}-byte limit (setting {setting}).",
            code="request_too_large",
        )
        await _error(error, scope, receive, send, close=True)


async def _error(error: CalypsoError, scope: Scope, receive: Receive, send: Send, close: bool = False) -> None:
    headers = {"Connection": "close"} if close else {}
    await JSONResponse(error.to_dict(), status_code=error.status, headers=headers)(scope, receive, send)


def _is_json(scope: Scope) -> bool:
    content_type: bytes = dict(scope.get("headers") or []).get(b"content-type", b"")
    return content_type.split(b";")[0].strip().lower() == b"application/json"


async def _read_all(receive: Receive) -> bytes:
    parts = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _json_problem(body: bytes) -> CalypsoError | None:
    """A 400 for JSON this server does not take; None when it is fine or not JSON at all (the route says so)."""
    try:
        json_limits.load(body)
    except json_limits.UnacceptableJSON as exc:
        return unacceptable_json(exc)
    except (ValueError, UnicodeDecodeError):
        return None  # malformed: the route's own parser reports it in the usual words
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: disconnects, as the server reports them

    return replay
