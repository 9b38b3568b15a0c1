"""Token counts for OpenAI's static chunking strategy (``max_chunk_size_tokens``, ``chunk_overlap_tokens``).

OpenAI counts tokens with its BPE vocabulary, which cannot ship here (tiktoken downloads it at run
time). This estimate splits text the way that vocabulary's pre-tokenizer does (a word with its leading
space, runs of at most three digits, runs of punctuation) and counts a word of more than
``LETTERS_PER_TOKEN`` letters as one token per started ``LETTERS_PER_TOKEN`` letters, since long or
rare words are several BPE tokens. It is an estimate, not cl100k's exact count (that vocabulary is not
available offline to compare); what it guarantees is that every chunk of a static strategy holds at most
``max_chunk_size_tokens`` tokens by this count, which the tests measure.

A Han, kana or Hangul character counts as one token (cl100k encodes the common ones as one, rarer
ones as two or three), so a Chinese sentence is cut between characters, not as one long "word".
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from calypso.text.cjk import CJK_CHARS, has_cjk

LETTERS_PER_TOKEN = 8

# A word (letters, with an optional leading space or mark), 1-3 digits, a punctuation run, or whitespace.
_PIECES = re.compile(r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?(?:[^\s\w]|_)+|\s+", re.IGNORECASE)
# The same for text with CJK in it: each CJK character is a piece of its own, words stop before one.
_PIECES_CJK = re.compile(
    rf"'(?:[sdmt]|ll|ve|re)| ?[{CJK_CHARS}]| ?(?:(?![{CJK_CHARS}])[^\W\d_])+| ?\d{{1,3}}| ?(?:[^\s\w]|_)+|\s+",
    re.IGNORECASE,
)


def _pieces(text: str) -> re.Pattern[str]:
    return _PIECES_CJK if has_cjk(text) else _PIECES


def _piece_tokens(piece: str) -> int:
    if piece.isspace():
        return 1 if "\n" in piece else 0  # a space joins the next word; a line break is its own token
    letters = len(piece.lstrip())
    return max(1, -(-letters // LETTERS_PER_TOKEN)) if letters > LETTERS_PER_TOKEN else 1


def count_tokens(text: str) -> int:
    """The estimated number of tokens in ``text``."""
    return sum(_piece_tokens(m.group()) for m in _pieces(text).finditer(text))


def token_cuts(text: str, start: int, end: int, size: int) -> Iterator[int]:
    """Offsets in ``text[start:end]`` at which to cut it into pieces of at most ``size`` tokens.

    Cuts fall before a word's leading space, so no word is split unless it alone is over ``size``.
    """
    used = 0
    pieces = _PIECES_CJK if has_cjk(text, start, end) else _PIECES
    for match in pieces.finditer(text, start, end):
        tokens = _piece_tokens(match.group())
        if used and used + tokens > size:
            yield match.start()
            used = 0
        if tokens > size:  # one word longer than a chunk: cut inside it
            step = size * LETTERS_PER_TOKEN
            last = match.start()
            for cut in range(match.start() + step, match.end(), step):
                yield cut
                last = cut
            used = count_tokens(text[last : match.end()])
            continue
        used += tokens
