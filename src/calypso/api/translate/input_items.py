"""``GET /v1/responses/{id}/input_items`` pages and ``POST /v1/responses/input_tokens`` counts."""

from __future__ import annotations

import json
from typing import Any

from calypso.api.serialize import list_object
from calypso.errors import InvalidRequest, NotFound
from calypso.ingest.tokens import count_tokens

# OpenAI's chat format spends a few tokens on each message's role and framing.
TOKENS_PER_MESSAGE = 4


def item_page(
    items: list[dict[str, Any]], *, limit: int, order: str, after: str | None, before: str | None
) -> dict[str, Any]:
    """One page of ``items`` in ``order`` ("desc": newest first), after / before the items named by cursor."""
    ordered = list(reversed(items)) if order == "desc" else list(items)
    ids = [item.get("id") for item in ordered]
    for name, cursor in (("after", after), ("before", before)):
        if cursor is not None and cursor not in ids:
            raise NotFound(f"No input item {cursor!r} in this response.", param=name)
    start = ids.index(after) + 1 if after is not None else 0
    end = ids.index(before) if before is not None else len(ordered)
    if end < start:
        raise InvalidRequest("before names an item that comes before after.", param="before")
    window = ordered[start:end]
    return list_object(window[:limit], len(window) > limit)


def _message_tokens(message: dict[str, Any]) -> int:
    content = message.get("content")
    text = content if isinstance(content, str) else "" if content is None else json.dumps(content)
    calls = json.dumps(message["tool_calls"]) if message.get("tool_calls") else ""
    return TOKENS_PER_MESSAGE + count_tokens(text) + count_tokens(calls)


def input_token_count(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """The estimated tokens of the conversation and the tool definitions, as the client sent them.

    The passages Calypso adds to the prompt on its own are not counted: they are chosen when the answer
    is written, and the count is of the request."""
    total = sum(_message_tokens(m) for m in messages)
    if tools:
        total += count_tokens(json.dumps(tools))
    return total
