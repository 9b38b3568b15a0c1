"""Markers a model uses as words: "According to [Source 2], …", "[2] notes that …", "as (Source 1) shows".

Removing such a marker leaves broken prose ("According to, moraines accumulate …"), which real models
produced in 6 of 24 answers (issue 39). Where a marker stands as a noun — after a preposition or a verb
that takes an object, or at the start of a sentence before a reporting verb — it is replaced by a phrase
naming the source ("the source", "der Quelle", "资料"), and the marker itself moves to the end of its
sentence, where a marker that follows the words it cites would stand. Every other marker passes through
unchanged.

``NounMarkers`` works on the pieces of ``MarkerStream`` while they stream: it holds text only while it
waits for the word after a sentence-initial marker, or for the character after a possible sentence end,
so streamed and one-shot answers read the same.
"""

from __future__ import annotations

import re

from calypso.citations.markers import Marker, MarkerPiece, TextPiece
from calypso.text.languages import detect

Piece = TextPiece | MarkerPiece

# Words after which a marker is the object of the phrase: "according to [2]", "as stated in [2]", "see [2]".
_OBJECT_BEFORE = re.compile(
    r"(?:(?<![\w'’])(?:according to|to|in|from|by|see|per|of|as|like|cf\.?|under|on|with|than|via|within|"
    r"following|laut|gemäß|nach|siehe|aus|von|bei|wie|selon|dans|d['’]après|según|en|de|da)"
    r"|根据|根據|据|據|依据|依據|参见|參見|见|見|如|按照|在|によると|によれば)\s*$",
    re.IGNORECASE,
)
# A sentence-initial marker is a noun when a reporting verb follows: "[Source 2] says that …".
_REPORTING = re.compile(
    r"\s*(?:also\s+|further\s+)?(?:says?|states?|notes?|shows?|mentions?|indicates?|describes?|reports?|"
    r"explains?|confirms?|suggests?|adds?|lists?|gives?|provides?|points? out|writes?|argues?|claims?|"
    r"tells?|defines?|identifies?|highlights?|discusses?|is|was|are|were|has|had|sagt|besagt|zeigt|nennt|"
    r"beschreibt|erwähnt|gibt|ist|提到|指出|显示|顯示|表明|说明|說明|称|稱|记载|記載|描述|中)(?![\w])",
    re.IGNORECASE,
)
_SENTENCE_START = re.compile(r"(?:^|[.!?。！？:：\n]|^\s*(?:[-*•]|\d{1,2}[.)]))\s*$")
_CJK_ENDS = "。！？"
_ENDS = ".!?" + _CJK_ENDS + "\n"
_LOOKAHEAD = 40  # characters read after a sentence-initial marker before deciding it is no noun
_TAIL = 200

# The phrase a marker becomes, by the language of the text around it: (one source, several, sentence start).
_PHRASES = {
    "en": ("the source", "the sources", "The source", "The sources"),
    "de": ("der Quelle", "den Quellen", "Die Quelle", "Die Quellen"),
    "fr": ("la source", "les sources", "La source", "Les sources"),
    "es": ("la fuente", "las fuentes", "La fuente", "Las fuentes"),
    "zh": ("资料", "资料", "资料", "资料"),
    "ja": ("資料", "資料", "資料", "資料"),
}


def source_phrase(marker: Marker, context: str, sentence_start: bool) -> str:
    """The words that stand for ``marker`` in a sentence written in the language of ``context``."""
    language = detect(context[-_TAIL:], "en") if context.strip() else "en"
    one, several, one_start, several_start = _PHRASES.get(language, _PHRASES["en"])
    plural = len(marker.numbers) + len(marker.names) > 1
    if sentence_start:
        return several_start if plural else one_start
    return several if plural else one


class NounMarkers:
    """Between ``MarkerStream`` and the composer: markers used as nouns become words, their citations move
    to the end of the sentence. ``feed`` and ``flush`` take and return pieces in stream order."""

    def __init__(self) -> None:
        self._tail = ""  # the text passed on so far (its end): what a marker follows
        self._deferred: list[MarkerPiece] = []  # markers to place at the end of the current sentence
        self._opening: MarkerPiece | None = None  # a sentence-initial marker waiting for the next word
        self._held = ""  # text held while waiting (after ``_opening``, or a possible sentence end)

    def feed(self, pieces: list[Piece]) -> list[Piece]:
        out: list[Piece] = []
        for piece in pieces:
            if isinstance(piece, TextPiece):
                out += self._text(piece.text, final=False)
            else:
                out += self._marker(piece)
        return out

    def flush(self) -> list[Piece]:
        out: list[Piece] = []
        if self._opening is not None:
            out += self._decide_opening()
        out += self._text("", final=True)
        if self._deferred:
            out += self._release_deferred()
        return out

    # -- markers -----------------------------------------------------------
    def _marker(self, piece: MarkerPiece) -> list[Piece]:
        out: list[Piece] = []
        if self._opening is not None:
            out += self._decide_opening()
        if self._held:  # a possible sentence end is decided by a marker after it: no end ("3.[2]")
            out += self._text("", final=False, force=True)
        before = self._tail.rstrip(" \t")
        if _OBJECT_BEFORE.search(before[-40:]):
            phrase = source_phrase(piece.marker, before, sentence_start=False)
            self._deferred.append(piece)
            joined = before != self._tail or not before or _has_cjk(before[-1]) or _has_cjk(phrase)
            return out + self._pass(phrase if joined else " " + phrase)
        if _SENTENCE_START.search(before[-12:]) and not self._deferred:
            self._opening = piece
            return out
        return out + [piece]

    def _decide_opening(self) -> list[Piece]:
        """The word after a sentence-initial marker is known (or never will be): a noun or a citation."""
        piece, held = self._opening, self._held
        assert piece is not None
        self._opening, self._held = None, ""
        if _REPORTING.match(held):
            before = self._tail.rstrip(" \t")
            phrase = source_phrase(piece.marker, before + held, sentence_start=not before.endswith(":"))
            self._deferred.append(piece)
            return self._pass(phrase) + self._text(held, final=False)
        return [piece] + self._text(held, final=False)

    # -- text --------------------------------------------------------------
    def _text(self, text: str, final: bool, force: bool = False) -> list[Piece]:
        if self._opening is not None:
            self._held += text
            words = re.match(r"\s*[^\W\d_]+(?:\s+[^\W\d_]+)?\W", self._held)
            if final or words or len(self._held) >= _LOOKAHEAD or _has_cjk(self._held):
                return self._decide_opening()
            return []
        text = self._held + text
        self._held = ""
        if not self._deferred:
            return self._pass(text)
        end = _sentence_end(text, final or force)
        if end is None:  # the sentence goes on, or the last character may end it: hold that character
            if text and text[-1] in _ENDS and not final:
                self._held = text[-1]
                return self._pass(text[:-1])
            return self._pass(text)
        out = self._pass(text[:end])
        out += self._release_deferred()
        return out + self._text(text[end:], final)

    def _release_deferred(self) -> list[Piece]:
        deferred, self._deferred = self._deferred, []
        if self._tail and _has_cjk(self._tail[-1]):
            return list(deferred)  # CJK text sets markers without a space: "称为「锣鼓点」[1]。"
        return [TextPiece(" "), *deferred]  # the space the composer keeps as the marker's leading space

    def _pass(self, text: str) -> list[Piece]:
        if not text:
            return []
        self._tail = (self._tail + text)[-_TAIL:]
        return [TextPiece(text)]


def _sentence_end(text: str, final: bool) -> int | None:
    """Where the first sentence in ``text`` ends (the offset of its closing punctuation), or None."""
    for k, c in enumerate(text):
        if c not in _ENDS:
            continue
        if c in _CJK_ENDS or c == "\n":
            return k
        if k + 1 < len(text):
            if text[k + 1].isspace() or text[k + 1] in "\"'”’)":
                return k
        elif final:
            return k
    return len(text) if final and text else None


def _has_cjk(text: str) -> bool:
    # CJK punctuation (「」，。) and fullwidth forms too: a marker after "」" takes no space either.
    return any("\u3000" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7af" or "\uff00" <= c <= "\uffef" for c in text)
