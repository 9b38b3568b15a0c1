"""Refuse request bodies over a size limit before anything reads them whole.

Uploads have their own, larger limit (CALYPSO_MAX_UPLOAD_BYTES, checked where
the file is read); every other body is JSON and small, so a multi-megabyte one
is a mistake or an attack, answered 413 in OpenAI's shape.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calypso.errors import PayloadTooLarge

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
        await JSONResponse(error.to_dict(), status_code=error.status, headers={"Connection": "close"})(
            scope, receive, send
        )
