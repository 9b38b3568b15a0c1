"""Server-sent events from async generators that stop when the client leaves."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse


def sse_data(payload: dict[str, Any] | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"data: {data}\n\n"


def sse_event(event: str, payload: dict[str, Any]) -> str:
    return f"event: {event}\n{sse_data(payload)}"


async def _until_disconnect(request: Request, events: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
    try:
        async for chunk in events:
            if await request.is_disconnected():
                break
            yield chunk
    finally:
        # Closing the generator chain closes the upstream request too.
        await events.aclose()


def sse_response(request: Request, events: AsyncGenerator[str, None]) -> StreamingResponse:
    return StreamingResponse(
        _until_disconnect(request, events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
