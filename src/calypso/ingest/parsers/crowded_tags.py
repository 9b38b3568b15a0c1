"""Strip the attributes past a sane number from HTML start tags, in one linear pass, before lxml parses.

libxml2's HTML parser checks each new attribute of a tag against every earlier one (duplicates are
dropped), so one tag with n attributes costs n² comparisons: a 2.3 MB page whose single tag carried
200,000 attributes held a parse child for its whole 60 s (3.4 s at 20,000, 13.5 s at 40,000; issue 26).
No page is read by its attributes, and HTML keeps the first of duplicate ones, so a tag keeps its first
``MAX_ATTRIBUTES`` and loses the rest; every other byte of the page is left as it was.

The scan follows the HTML tokenizer closely enough for counting: a tag opens at ``<`` and a letter,
attribute values may be quoted (and hold ``>``), and every step moves forward, so the cost is one pass
over the bytes whatever the markup. An unterminated quote ends the scan: the rest of the page is that
value, for lxml too. Only ASCII-compatible encodings are scanned (UTF-16 pages hold NUL bytes and are
read by lxml as they are).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

MAX_ATTRIBUTES = 256  # real pages carry a few dozen at most (SVG and framework markup included)

_TAG = re.compile(rb"<[A-Za-z][^\s/>]*")
_GAP = re.compile(rb"[\s/]*")  # between attributes ("/" too, as the tokenizer treats a stray one)
_SPACE = re.compile(rb"\s*")
_NAME = re.compile(rb"[^\s\"'>/=]+|[\"'=]")  # a stray quote or "=" is a (bogus) name of its own
_UNQUOTED = re.compile(rb"[^\s>]*")
_QUOTES = (ord('"'), ord("'"))
_GT = ord(">")
_EQUALS = ord("=")


def _attribute_ends(data: bytes, pos: int) -> Iterator[int]:
    """The end offset of each attribute of the tag whose name ends at ``pos``, then the tag's end offset."""
    size = len(data)
    while True:
        pos = _GAP.match(data, pos).end()  # type: ignore[union-attr]  # "*": always matches
        if pos >= size or data[pos] == _GT:
            yield min(pos + 1, size)
            return
        name = _NAME.match(data, pos)
        pos = name.end() if name else pos + 1
        after = _SPACE.match(data, pos).end()  # type: ignore[union-attr]
        if after < size and data[after] == _EQUALS:
            pos = _SPACE.match(data, after + 1).end()  # type: ignore[union-attr]
            if pos < size and data[pos] in _QUOTES:
                close = data.find(data[pos : pos + 1], pos + 1)
                pos = size if close < 0 else close + 1
            else:
                pos = _UNQUOTED.match(data, pos).end()  # type: ignore[union-attr]
        yield pos


def strip_crowded_tags(data: bytes, max_attributes: int = MAX_ATTRIBUTES) -> tuple[bytes, int]:
    """``data`` with every start tag cut to its first ``max_attributes`` attributes, and how many were cut.

    The bytes come back unchanged (the same object) when no tag has more.
    """
    pieces: list[bytes] = []
    copied = 0  # data[:copied] is in pieces
    dropped = 0
    pos = 0
    while (tag := _TAG.search(data, pos)) is not None:
        ends = list(_attribute_ends(data, tag.end()))
        pos = ends[-1]
        attributes = len(ends) - 1
        if attributes > max_attributes:
            keep = ends[max_attributes - 1] if max_attributes else tag.end()
            pieces += [data[copied:keep], b">"]
            copied = pos
            dropped += attributes - max_attributes
        if pos <= tag.start():  # never happens (ends move forward); kept so no input can loop
            pos = tag.end()
    if not dropped:
        return data, 0
    pieces.append(data[copied:])
    return b"".join(pieces), dropped
