"""What to search for in a conversation: the last user turn, with the turn before it when it is a
short follow-up ("Who?", "And in 2021?") that cannot be searched alone.

The rule is deliberately small: a last user message of at most ``FOLLOW_UP_WORDS`` words (text without
spaces, such as Chinese or Japanese: at most ``FOLLOW_UP_CHARS`` characters) is searched together with
the previous user message. A conversation of one question, and every question that stands alone
(SciFact's claims have 6 to 40 words), is searched exactly as written, so single-question retrieval
and its measured quality are unchanged. ``bench/follow_up_queries.py`` measures the gain (Alps:
follow-ups find the question's gold page 166/195 times, 11/195 alone) and the reach (as second turns,
12/1,109 SciFact queries would be combined).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

FOLLOW_UP_WORDS = 4
FOLLOW_UP_CHARS = 6


def is_follow_up(text: str) -> bool:
    """Too short to stand alone: "Who?", "And in 2021?", "为什么？"."""
    words = text.split()
    if any(ord(c) >= 0x2E80 for c in text):  # CJK and other scripts written without spaces
        return len("".join(words)) <= FOLLOW_UP_CHARS
    return len(words) <= FOLLOW_UP_WORDS


def search_query(messages: list[dict[str, Any]], text_of: Callable[[dict[str, Any]], str]) -> str:
    """The query for the conversation's last user turn (messages after it, such as tool results, skipped)."""
    users = [text_of(m).strip() for m in messages if m.get("role") == "user"]
    users = [u for u in users if u]
    if not users:
        return ""
    last = users[-1]
    if len(users) > 1 and is_follow_up(last):
        return f"{users[-2]} {last}"
    return last
