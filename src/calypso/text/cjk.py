"""Content units: how long a text is by what it says, not by its code points.

A Chinese or Japanese character carries about as much as three letters of English with their space
(a 1,000-character English passage holds ~170 words, the same content in Chinese ~330 characters);
a Hangul syllable, written with spaces between words, about two. Sizing passages and answers by
these units keeps them of one length whatever the script: counted in code points, a five-paragraph
Chinese file fitted in one 1,000-character passage.

Latin, Cyrillic, Arabic, Hebrew, digits, punctuation and spaces count one unit per code point, so
English lengths are exactly their code-point lengths.
"""

from __future__ import annotations

import re

HAN_KANA_UNITS = 3
HANGUL_UNITS = 2

_HAN_KANA = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
_HANGUL = "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af"
CJK_CHARS = _HAN_KANA + _HANGUL
CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
_HAN_KANA_RUN = re.compile(f"[{_HAN_KANA}]+")
_HANGUL_RUN = re.compile(f"[{_HANGUL}]+")
# Where a long CJK sentence may be cut: after a comma, enumeration comma, semicolon, colon or a
# closing quote or bracket (full-width and ASCII), as a reader would pause.
CJK_BREAKS = frozenset("，、；：,;:」』”’）】》〉〕")


def has_cjk(text: str, start: int = 0, end: int | None = None) -> bool:
    """Whether ``text[start:end]`` holds a Han, kana or Hangul character."""
    return CJK_RUN.search(text, start, len(text) if end is None else end) is not None


def cjk_chars(text: str) -> int:
    """How many Han, kana and Hangul characters ``text`` holds."""
    return sum(m.end() - m.start() for m in CJK_RUN.finditer(text))


def content_length(text: str, start: int = 0, end: int | None = None) -> int:
    """Content units of ``text[start:end]``: code points, Han and kana counting three, Hangul two."""
    end = len(text) if end is None else end
    extra = 0
    for match in _HAN_KANA_RUN.finditer(text, start, end):
        extra += (HAN_KANA_UNITS - 1) * (match.end() - match.start())
    for match in _HANGUL_RUN.finditer(text, start, end):
        extra += (HANGUL_UNITS - 1) * (match.end() - match.start())
    return end - start + extra


def char_units(ch: str) -> int:
    """Content units of one code point."""
    if ch < "\u1100":  # Latin, Greek, Cyrillic, Arabic, Hebrew, Indic …: no regex test
        return 1
    if _HAN_KANA_RUN.match(ch):
        return HAN_KANA_UNITS
    if _HANGUL_RUN.match(ch):
        return HANGUL_UNITS
    return 1


def prefix_end(text: str, start: int, end: int, budget: int) -> int:
    """The largest ``e`` in ``[start, end]`` with ``content_length(text, start, e) <= budget``
    (at least ``start + 1`` when ``start < end``, so a caller cutting pieces always advances).

    Linear in ``e - start``: at most ``budget`` code points are looked at.
    """
    stop = min(end, start + max(budget, 1))
    used = 0
    pos = start
    while pos < stop:
        cost = char_units(text[pos])
        if used + cost > budget and pos > start:
            break
        used += cost
        pos += 1
    return pos
