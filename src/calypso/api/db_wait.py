"""Every HTTP request waits at most the pool timeout for the database in all (``store/wait_budget.py``)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from calypso.services import request_budget


class DatabaseWaitMiddleware:
    """Opens one wait budget per request; a streamed body runs inside it too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with request_budget():
            await self.app(scope, receive, send)
