"""GET /v1/models: the caller's workspace's bots, in OpenAI's model shape."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from calypso.api.auth import Workspace
from calypso.api.deps import Bots
from calypso.bots import Bot

router = APIRouter(prefix="/v1", tags=["models"])


def model_object(bot: Bot) -> dict[str, Any]:
    return {"id": bot.id, "object": "model", "created": bot.created_at, "owned_by": "calypso"}


# Plain (sync) routes: FastAPI runs them in its thread pool, so the SQLite reads do not block the loop.


@router.get("/models")
def list_models(workspace: Workspace, directory: Bots) -> dict[str, Any]:
    return {"object": "list", "data": [model_object(b) for b in directory.all(workspace)]}


@router.get("/models/{model_id}")
def get_model(model_id: str, workspace: Workspace, directory: Bots) -> dict[str, Any]:
    return model_object(directory.get(model_id, workspace))
