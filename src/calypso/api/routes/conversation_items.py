"""OpenAI's Conversations API items over seed 004's stored conversations (one conversation, two views).

``GET/POST /v1/conversations/{id}/items``, ``GET/DELETE /v1/conversations/{id}/items/{item_id}``; the
mapping between stored messages and items is ``api/translate/conversation_items.py``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from calypso.api.auth import Workspace
from calypso.api.deps import Conversations
from calypso.api.routes.conversations import MAX_ITEMS, conversation_object
from calypso.api.schemas.items import InputItem
from calypso.api.serialize import list_object
from calypso.api.translate.conversation_items import item_of, stored_message
from calypso.api.translate.input_items import item_page
from calypso.api.translate.items import item_dicts
from calypso.api.validation import parse_body
from calypso.errors import NotFound

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


class AddItems(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: Annotated[list[InputItem], Field(min_length=1, max_length=MAX_ITEMS)]


def _items(store: Any, conversation_id: str, workspace: str) -> list[dict[str, Any]]:
    store.get(conversation_id, workspace)  # an unknown conversation is a 404
    return [item_of(m) for m in store.messages(conversation_id, workspace)]


@router.get("/{conversation_id}/items")
def list_items(
    conversation_id: str,
    store: Conversations,
    workspace: Workspace,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Literal["asc", "desc"] = "desc",
    after: str | None = None,
    include: Annotated[list[str] | None, Query()] = None,  # accepted: items are stored whole
) -> dict[str, Any]:
    """The conversation's items, newest first by default (OpenAI's default), by cursor."""
    return item_page(_items(store, conversation_id, workspace), limit=limit, order=order, after=after, before=None)


@router.post("/{conversation_id}/items")
async def add_items(
    conversation_id: str,
    request: Request,
    store: Conversations,
    workspace: Workspace,
    include: Annotated[list[str] | None, Query()] = None,
) -> dict[str, Any]:
    """Append items (at most 20) atomically; the answer lists them as stored, with their ids."""
    body: AddItems = await parse_body(request, AddItems)
    messages = [stored_message(item) for item in item_dicts(body.items)]
    await asyncio.to_thread(lambda: store.add_turn(conversation_id, *messages, workspace=workspace))
    return list_object([item_of(m) for m in messages], False)


@router.get("/{conversation_id}/items/{item_id}")
def get_item(conversation_id: str, item_id: str, store: Conversations, workspace: Workspace) -> dict[str, Any]:
    for item in _items(store, conversation_id, workspace):
        if item["id"] == item_id:
            return item
    raise NotFound(f"No item {item_id!r} in conversation {conversation_id!r}.", param="item_id")


@router.delete("/{conversation_id}/items/{item_id}")
def delete_item(conversation_id: str, item_id: str, store: Conversations, workspace: Workspace) -> dict[str, Any]:
    """OpenAI answers a deleted item with the conversation it was deleted from."""
    store.delete_message(conversation_id, item_id, workspace)
    return conversation_object(store.get(conversation_id, workspace))
