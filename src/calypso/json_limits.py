"""JSON the server accepts: bounded nesting, integers that fit 64 bits, valid Unicode, no NaN.

Python's ``json`` accepts what later breaks: a 5,000-digit integer raises
deep inside a handler, nesting a few thousand levels deep overflows the
stack, and a lone UTF-16 surrogate (``"\\ud800"``) decodes to a string that
cannot be stored or sent back. Every JSON the API reads goes through
``load`` first, so such input is a clear 400 at the boundary.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 32  # OpenAI's request objects nest a handful of levels; filters a few more
MAX_INT_DIGITS = 19  # what fits a signed 64-bit integer
_SURROGATE = re.compile("[\ud800-\udfff]")


class UnacceptableJSON(ValueError):
    """The text is JSON but not JSON this server takes; ``path`` names where (None: the whole body)."""

    def __init__(self, reason: str, path: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise UnacceptableJSON(
            f"an integer has {len(digits.lstrip('-'))} digits; at most {MAX_INT_DIGITS} are accepted"
        )
    return int(digits)


def _constant(name: str) -> float:
    raise UnacceptableJSON(f"{name} is not a JSON number")


def load(raw: bytes | str) -> Any:
    """Decode and check; json.JSONDecodeError for malformed text, UnacceptableJSON for the rest."""
    try:
        value = json.loads(raw, parse_int=_int, parse_constant=_constant)
    except RecursionError:
        raise UnacceptableJSON(f"it is nested too deeply (more than {MAX_DEPTH} levels)") from None
    check(value)
    return value


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def check(value: Any) -> None:
    """Depth and Unicode of an already decoded value (walked without recursion)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise UnacceptableJSON("a string holds a lone UTF-16 surrogate (not valid Unicode)", path or None)
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise UnacceptableJSON(f"it is nested too deeply (more than {MAX_DEPTH} levels)", path or None)
            if isinstance(item, dict):
                for key, inner in item.items():
                    if _SURROGATE.search(key):
                        raise UnacceptableJSON("a key holds a lone UTF-16 surrogate (not valid Unicode)", path or None)
                    stack.append((inner, _join(path, key), depth + 1))
            else:
                stack.extend((inner, _join(path, i), depth + 1) for i, inner in enumerate(item))
