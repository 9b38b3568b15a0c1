"""GET /v1/models: the bots, in OpenAI's model list shape."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from calypso.api.deps import bots
from calypso.bots import Bot, BotDirectory

router = APIRouter(prefix="/v1", tags=["models"])


def model_object(bot: Bot) -> dict:
    return {"id": bot.id, "object": "model", "created": bot.created_at, "owned_by": "calypso"}


@router.get("/models")
def list_models(directory: BotDirectory = Depends(bots)) -> dict:
    return {"object": "list", "data": [model_object(b) for b in directory.all()]}


@router.get("/models/{model_id}")
def get_model(model_id: str, directory: BotDirectory = Depends(bots)) -> dict:
    return model_object(directory.get(model_id))
