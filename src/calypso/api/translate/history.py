"""A conversation within the history limit (``CALYPSO_MAX_HISTORY_CHARS``), as every chat surface sends it."""

from __future__ import annotations

from typing import Any

from calypso.errors import InvalidRequest


def _chars(message: dict[str, Any]) -> int:
    content = message.get("content")
    return len(content) if isinstance(content, str) else len(str(content))


def fit_history(
    messages: list[dict[str, Any]], limit: int, *, truncate: bool, param: str = "input"
) -> list[dict[str, Any]]:
    """The conversation within ``limit`` characters: with ``truncation: "auto"`` the oldest turns are
    dropped (system messages and the newest message stay), as OpenAI does; otherwise a 400."""
    total = sum(_chars(m) for m in messages)
    if total <= limit:
        return messages
    if not truncate:
        raise InvalidRequest(
            f"The conversation is {total:,} characters long; the limit is {limit:,} (setting "
            'CALYPSO_MAX_HISTORY_CHARS). Send truncation: "auto" to drop the oldest turns, or start a new one.',
            param=param,
            code="context_length_exceeded",
        )
    kept = list(messages)
    droppable = [i for i, m in enumerate(kept[:-1]) if m["role"] != "system"]
    for index in droppable:  # oldest first
        if total <= limit:
            break
        total -= _chars(kept[index])
        kept[index] = {}
    kept = [m for m in kept if m]
    if total > limit:
        raise InvalidRequest(
            f"The newest message alone is over the {limit:,}-character limit (setting CALYPSO_MAX_HISTORY_CHARS).",
            param=param,
            code="context_length_exceeded",
        )
    return kept
