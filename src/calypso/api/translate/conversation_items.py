"""One conversation, two views (GUIDE): seed 004's stored messages as OpenAI's Conversations API items.

A conversation is a list of stored messages. Seed 004's turns store a user and an assistant message
(content as the client saw it, the plain text in ``extra["text"]``); OpenAI's view (``items.create``,
``conversations.create(items=…)``, ``conversation`` on ``/v1/responses``) stores each item as one
message too, the item itself in ``extra["item"]`` and its role and text in the columns, so seed 004's
``GET /v1/conversations/{id}`` lists it as a message and ``items.list`` lists seed 004's turns as
items. Both views feed the model through ``history``.
"""

from __future__ import annotations

import time
from typing import Any

from calypso.api.translate.items import chat_messages, listed
from calypso.models import StoredMessage
from calypso.services.answering import message_text

_ROLE_OF = {"function_call": "assistant", "function_call_output": "tool", "file_search_call": "assistant"}


def item_of(message: StoredMessage) -> dict[str, Any]:
    """The stored message as an OpenAI item (its id the message's)."""
    stored = message.extra.get("item")
    if isinstance(stored, dict):
        return {**stored, "id": message.id}
    part = "output_text" if message.role == "assistant" else "input_text"
    content: dict[str, Any] = {"type": part, "text": message.content or ""}
    if part == "output_text":
        content["annotations"] = []  # seed 004's annotations are Chat's nested url_citation: not this shape
    return {"id": message.id, "type": "message", "role": message.role, "status": "completed", "content": [content]}


def stored_message(item: dict[str, Any], *, keep_id: bool = False) -> StoredMessage:
    """An item to store: a fresh id (ids are unique across conversations) unless ``keep_id`` (our own output)."""
    item = listed(dict(item) if keep_id else {k: v for k, v in item.items() if k != "id"})
    kind = item["type"]
    role = item.get("role", _ROLE_OF.get(kind, "assistant")) if kind == "message" else _ROLE_OF.get(kind, "assistant")
    text = message_text({"content": item.get("content")}) if kind == "message" else None
    if kind == "function_call_output" and isinstance(item.get("output"), str):
        text = item["output"]
    return StoredMessage(item["id"], role, text, None, int(time.time()), {"item": item})


def history(messages: list[StoredMessage]) -> list[dict[str, Any]]:
    """The chat messages the model is shown for a stored conversation, in order.

    Seed 004's answers go back as their plain text: their old numbers would otherwise clash with
    this turn's freshly numbered ``[Source N]`` passages."""
    items = []
    for m in messages:
        if isinstance(m.extra.get("item"), dict):
            items.append(m.extra["item"])
        else:
            text = m.extra.get("text", m.content) if m.role == "assistant" else m.content
            items.append({"type": "message", "role": m.role, "content": text or ""})
    return chat_messages(items, lambda _id: None, strict=False)
