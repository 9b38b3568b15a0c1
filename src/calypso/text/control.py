"""Control characters: PDF glyphs, form feeds and similar bytes that are not text a reader should see.

GeoTopo's math fonts come out of PDFium as \\x04, \\x08, \\x12 …; such characters would show in
passages, quotes and answers as boxes or garbage. Tab, newline and carriage return are kept;
vertical tab and form feed are line breaks; every other C0/C1 control character is removed.
"""

from __future__ import annotations

import bisect
import re

CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
_LINE_BREAKS = ("\x0b", "\x0c")


def _breaks_to_newlines(text: str) -> str:
    for char in _LINE_BREAKS:  # same length: offsets do not move
        text = text.replace(char, "\n")
    return text


def clean_text(text: str) -> str:
    """``text`` without control characters (line breaks for VT and FF)."""
    return CONTROL.sub("", _breaks_to_newlines(text))


class OffsetShift:
    """Maps offsets in a text onto the same places in that text with its control characters removed."""

    def __init__(self, text: str) -> None:
        self.removed = [m.start() for m in CONTROL.finditer(_breaks_to_newlines(text))]

    def __bool__(self) -> bool:
        return bool(self.removed)

    def __call__(self, offset: int) -> int:
        return offset - bisect.bisect_left(self.removed, offset)
