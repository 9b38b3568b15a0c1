"""Markers used as nouns become words; their citations move to the end of the sentence (issue 39)."""

from __future__ import annotations

import pytest

from calypso.citations.marker_prose import NounMarkers
from calypso.citations.markers import MarkerPiece, MarkerStream, TextPiece


def _run(text: str, split: int = 0) -> list[tuple[str, str]]:
    """(kind, text) pieces after NounMarkers, for ``text`` fed whole or in pieces of ``split`` characters."""
    stream, nouns = MarkerStream(), NounMarkers()
    deltas = [text] if not split else [text[i : i + split] for i in range(0, len(text), split)]
    out = []
    for delta in deltas:
        out += nouns.feed(stream.feed(delta))
    out += nouns.feed(stream.flush()) + nouns.flush()
    merged: list[tuple[str, str]] = []
    for piece in out:
        if isinstance(piece, TextPiece):
            if merged and merged[-1][0] == "text":
                merged[-1] = ("text", merged[-1][1] + piece.text)
            else:
                merged.append(("text", piece.text))
        else:
            assert isinstance(piece, MarkerPiece)
            merged.append(("marker", piece.marker.raw))
    return merged


CASES = [
    (
        "According to [Source 2], moraines accumulate. More.",
        [("text", "According to the source, moraines accumulate "), ("marker", "[Source 2]"), ("text", ". More.")],
    ),
    (
        "[Source 2] says that lakes freeze. More.",
        [("text", "The source says that lakes freeze "), ("marker", "[Source 2]"), ("text", ". More.")],
    ),
    (
        "Lakes freeze. [Source 2] The next one.",  # after its sentence, before the next: cites the one before
        [("text", "Lakes freeze. "), ("marker", "[Source 2]"), ("text", " The next one.")],
    ),
    (
        "As stated in [1] and [2], lakes freeze",
        [("text", "As stated in the sources, lakes freeze "), ("marker", "[1] and [2]")],
    ),
    ("根据【2】，湖泊结冰。", [("text", "根据资料，湖泊结冰"), ("marker", "【2】"), ("text", "。")]),
    ("Lakes freeze [2]. Rivers flow.", [("text", "Lakes freeze "), ("marker", "[2]"), ("text", ". Rivers flow.")]),
    ("It is 3.5 km long, see [2] for 4.5 more.", None),  # "3.5" is no sentence end
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0][:24] for c in CASES])
def test_nouns_become_words_and_citations_follow_their_sentence(text: str, expected) -> None:
    whole = _run(text)
    if expected is not None:
        flat = _flatten(whole)
        assert flat == _flatten(expected)
    for split in (1, 2, 3, 5):
        assert _flatten(_run(text, split)) == _flatten(whole)


def test_a_decimal_point_is_not_the_sentence_end() -> None:
    pieces = _flatten(_run("It is 3.5 km long, see [2] for 4.5 more. Next."))
    text = "".join(t for kind, t in pieces if kind == "text")
    assert text == "It is 3.5 km long, see the source for 4.5 more . Next."
    assert pieces.index(("marker", "[2]")) == len(pieces) - 2  # before the period that ends the sentence


def _flatten(pieces: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for kind, text in pieces:
        if out and kind == "text" and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + text)
        else:
            out.append((kind, text))
    return out
