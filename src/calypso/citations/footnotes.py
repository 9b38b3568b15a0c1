"""A footnote is not a marker (GUIDE): "[2]" copied from a passage's own text is the passage's.

Wikipedia text reads "… in the 18th century[2] The Caucasus …". A model quoting it writes the
"[2]" too, and taken as a marker it would cite source 2 (or, naming no source, be deleted from
the numeric text). A bracketed number that follows the same words in a retrieved passage as in
the answer is therefore left as text. Only the plain forms a source's text can hold qualify
("[2]", "[2, 3]", "[12–14]"); "[Source 2]" is always the model's marker.
"""

from __future__ import annotations

import re

_PLAIN_NUMBERS = re.compile(r"\[\d{1,3}(?:\s*[,;\-–]\s*\d{1,3})*\]")
_WORD = re.compile(r"\S+")
_CONTEXT_WORDS = 4  # the words before the bracket that must match the passage
_MIN_CONTEXT_CHARS = 10  # "a [1]" proves nothing


def is_passage_footnote(raw: str, before: str, passages: list[str]) -> bool:
    """Whether marker ``raw``, written after the answer text ``before``, stands so in one of ``passages``."""
    if not _PLAIN_NUMBERS.fullmatch(raw):
        return False
    words = _WORD.findall(before[-200:])[-_CONTEXT_WORDS:]
    if sum(len(w) for w in words) < _MIN_CONTEXT_CHARS:
        return False
    # The same words in order, any whitespace between them (the model may re-wrap lines), then the
    # bracket itself with or without a space before it.
    pattern = re.compile(r"\s+".join(map(re.escape, words)) + r"\s*" + re.escape(raw))
    return any(raw in text and pattern.search(text) for text in passages)
