"""/v1/bots: create, list, read, change and delete the caller's workspace's bots."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from calypso.api.auth import Workspace
from calypso.api.deps import Bots
from calypso.api.validation import json_object
from calypso.bots import Bot
from calypso.errors import NotFound

router = APIRouter(prefix="/v1", tags=["bots"])


def bot_object(bot: Bot) -> dict[str, Any]:
    return {
        "id": bot.id,
        "object": "bot",
        "created_at": bot.created_at,
        "updated_at": bot.updated_at,
        **bot.config(),
        "source": bot.source,
    }


async def _json_object(request: Request) -> dict[str, Any]:
    return await json_object(request, 'a JSON object of bot fields, e.g. {"id": "my-bot"}')


def _not_found(bot_id: str) -> NotFound:
    return NotFound(f"No bot {bot_id!r} in this workspace (see GET /v1/bots).", param="bot_id", code="bot_not_found")


# Directory calls touch SQLite (and may wait for the writer lock): keep them off the event loop.


@router.post("/bots", status_code=201)
async def create_bot(request: Request, workspace: Workspace, directory: Bots) -> JSONResponse:
    body = await _json_object(request)
    bot = await asyncio.to_thread(directory.create, workspace, body)
    return JSONResponse(bot_object(bot), status_code=201)


@router.get("/bots")
async def list_bots(workspace: Workspace, directory: Bots) -> dict[str, Any]:
    data = [bot_object(b) for b in await asyncio.to_thread(directory.all, workspace)]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": False,
    }


@router.get("/bots/{bot_id}")
async def get_bot(bot_id: str, workspace: Workspace, directory: Bots) -> dict[str, Any]:
    bot = await asyncio.to_thread(directory.find, bot_id, workspace)
    if bot is None:
        raise _not_found(bot_id)
    return bot_object(bot)


@router.patch("/bots/{bot_id}")
async def update_bot(bot_id: str, request: Request, workspace: Workspace, directory: Bots) -> dict[str, Any]:
    changes = await _json_object(request)
    return bot_object(await asyncio.to_thread(directory.update, workspace, bot_id, changes))


@router.delete("/bots/{bot_id}")
async def delete_bot(bot_id: str, workspace: Workspace, directory: Bots) -> dict[str, Any]:
    await asyncio.to_thread(directory.delete, workspace, bot_id)
    return {"id": bot_id, "object": "bot.deleted", "deleted": True}
