"""Citation marker parsing: the forms models write, what is not a marker, and streaming == batch."""

from __future__ import annotations

import random
import time

import pytest

from calypso.citations.markers import (
    MAX_BRACKET,
    MAX_NAMED,
    MAX_URL,
    Marker,
    MarkerPiece,
    MarkerStream,
    TextPiece,
    find_markers,
)

Segment = tuple[str, object]  # ("text", str) or ("marker", Marker)

# (text, [(start, raw, numbers), ...])
MARKERS: list[tuple[str, list[tuple[int, str, tuple[int, ...]]]]] = [
    ("See [Source 3].", [(4, "[Source 3]", (3,))]),
    ("see [source 3]", [(4, "[source 3]", (3,))]),
    ("[SOURCE 12]", [(0, "[SOURCE 12]", (12,))]),
    ("[Sources 1, 2]", [(0, "[Sources 1, 2]", (1, 2))]),
    ("[Source: 4]", [(0, "[Source: 4]", (4,))]),
    ("[Source3]", [(0, "[Source3]", (3,))]),
    ("[Source 1, Source 2]", [(0, "[Source 1, Source 2]", (1, 2))]),
    ("x [3] y", [(2, "[3]", (3,))]),
    ("[1, 2]", [(0, "[1, 2]", (1, 2))]),
    ("[1,2]", [(0, "[1,2]", (1, 2))]),
    ("[1; 2]", [(0, "[1; 2]", (1, 2))]),
    ("[ 3 ]", [(0, "[ 3 ]", (3,))]),
    ("[999]", [(0, "[999]", (999,))]),
    ("[1-3]", [(0, "[1-3]", (1, 2, 3))]),
    ("[1–3]", [(0, "[1–3]", (1, 2, 3))]),
    ("[1 - 3]", [(0, "[1 - 3]", (1, 2, 3))]),
    ("[Source 2-4]", [(0, "[Source 2-4]", (2, 3, 4))]),
    ("[5-5]", [(0, "[5-5]", (5,))]),
    ("[1-20]", [(0, "[1-20]", tuple(range(1, 21)))]),
    ("[1, 3-4, 1, 3]", [(0, "[1, 3-4, 1, 3]", (1, 3, 4))]),
    ("[2, 1]", [(0, "[2, 1]", (2, 1))]),
    ("[Source 1][Source 2]", [(0, "[Source 1]", (1,)), (10, "[Source 2]", (2,))]),
    ("a[1][2][3].", [(1, "[1]", (1,)), (4, "[2]", (2,)), (7, "[3]", (3,))]),
    ("【3】", [(0, "【3】", (3,))]),
    ("据报道【Source 3】。", [(3, "【Source 3】", (3,))]),
    ("【1, 2】", [(0, "【1, 2】", (1, 2))]),
    ("【1，2】", [(0, "【1，2】", (1, 2))]),
    ("x [[3]](http://example.com/a?b=1) y", [(2, "[[3]](http://example.com/a?b=1)", (3,))]),
    ("[[3]](/v1/files/file-abc/content)", [(0, "[[3]](/v1/files/file-abc/content)", (3,))]),
    ("[[3]]", [(0, "[[3]]", (3,))]),
    ("[3](https://x.org/p).", [(0, "[3](https://x.org/p)", (3,))]),
    ("[^3]", [(0, "[^3]", (3,))]),
    # the "(...)" is kept only when it looks like a url
    ("[3](see below)", [(0, "[3]", (3,))]),
    ("[3](see)", [(0, "[3]", (3,))]),
    ("[3]()", [(0, "[3]", (3,))]),
    ("[[3]](" + "a/" * 200 + ")", [(0, "[[3]]", (3,))]),  # url longer than MAX_URL
    ("[[3]](http://x", [(0, "[[3]]", (3,))]),  # unclosed url at end of text
    # nested / broken brackets: the inner marker still counts
    ("[see [3]]", [(5, "[3]", (3,))]),
    ("[[3]x", [(1, "[3]", (3,))]),
    ("[[3]", [(1, "[3]", (3,))]),  # "[[3]" at end of text
    ("[[1], [2]]", [(1, "[1], [2]", (1, 2))]),  # a list joined by a comma is one marker (issue 39)
    ("[Source 1 [2]", [(10, "[2]", (2,))]),
    # code: only markers outside code count
    ("`[1]` and [2]", [(10, "[2]", (2,))]),
    ("```\n[1]\n```\n[2]", [(12, "[2]", (2,))]),
    ("```\n[1]\n``` not a close\n[2]\n```\n[3]", [(32, "[3]", (3,))]),
    ("~~~\n[1]\n```\n[2]\n~~~\n[3]", [(20, "[3]", (3,))]),
    ("````\n```\n[1]\n````\n[2]", [(18, "[2]", (2,))]),
    ("unclosed `span [1]\n[2]", [(19, "[2]", (2,))]),
    ("``a ` [1]`` [2]", [(12, "[2]", (2,))]),
    ("x ```[1]``` [2]", [(12, "[2]", (2,))]),
    ("1. Step\n    ```bash\n    ls [1]\n    ```\n[2]", [(39, "[2]", (2,))]),
    ("```\n[1]\n```  \n[2]", [(14, "[2]", (2,))]),
    ("a ```\n[1]", [(6, "[1]", (1,))]),  # ``` mid-line is a span, and spans end at the line break
]

NON_MARKERS = [
    "[0]",
    "[00]",
    "[03]",
    "[abc]",
    "[1.5]",
    "[2023]",
    "[ 2023 ]",
    "[1000]",
    "[-1]",
    "[1-]",
    "[1,]",
    "[,1]",
    "[]",
    "[ ]",
    "[Source]",
    "[Note 1]",
    "[Sx 1]",
    "[S 1]",
    "[src 1]",
    "[1-30]",  # range longer than 20
    "[3-1]",
    "[1 2]",
    "[1\n]",
    "【3]",
    "[3】",
    "[text](http://example.com)",
    "[a [b] c]",
    "[[x]]",
    "[^x]",
    "[^0]",
    "[" + " " * 70 + "1]",  # longer than MAX_BRACKET
    "[Source 1",
    "unclosed [1, 2",
    "【3",
    "`[3]`",
    "``[3] ` [4]``",
    "```\n[1]\n```",
    "~~~md\n[1]\n~~~",
    "  ```python\nx = a[1]\n  ```",
    "```\nunclosed fence [1]\n\n[2]",
    "see `x[1]` and ``y[2]``",
]

REALISTIC = [
    "The refund window is 30 days [Source 1]. After that, store credit applies [Source 2][Source 3].\n\n"
    "Exceptions exist for damaged goods [2, 4] and for items bought in 2023 [1–3].",
    "To list files, run:\n\n```bash\nls -la [1]\necho `date` [2]\n```\n\nThen check the output [3]. "
    "See the [docs](https://example.com/docs) for more [[4]](/v1/files/file-9/content).",
    "Laut Handbuch gilt die Frist 【1】, verlängerbar 【Source 2】【2, 3】. Use `arr[1]` carefully [^5].\n"
    "- item one [Source: 6]\n- item two [Sources 7, 8]\n  ~~~\n  [9]\n  ~~~\nDone [10](http://x.y/z).",
    "Edge cases: [ [ [[ ]] [Source 1 [S [So [Sou ] `` ` `` [1]`, [0], [1000] and [3](see) end [Source 2",
]


def _expected(text: str, spec: list[tuple[int, str, tuple[int, ...]]]) -> list[Marker]:
    return [Marker(start, start + len(raw), numbers, raw) for start, raw, numbers in spec]


def _segments_from_markers(text: str) -> list[Segment]:
    segments: list[Segment] = []
    pos = 0
    for marker in find_markers(text):
        if marker.start > pos:
            segments.append(("text", text[pos : marker.start]))
        segments.append(("marker", marker))
        pos = marker.end
    if pos < len(text):
        segments.append(("text", text[pos:]))
    return segments


def _stream(deltas: list[str]) -> list[Segment]:
    """Feed the deltas, flush, and merge adjacent text pieces."""
    stream = MarkerStream()
    segments: list[Segment] = []
    for piece in [p for d in deltas for p in _feed_checked(stream, d)] + stream.flush():
        if isinstance(piece, TextPiece):
            assert piece.text, "empty text pieces are never emitted"
            if segments and segments[-1][0] == "text":
                segments[-1] = ("text", segments[-1][1] + piece.text)  # type: ignore[operator]
            else:
                segments.append(("text", piece.text))
        else:
            assert isinstance(piece, MarkerPiece)
            segments.append(("marker", piece.marker))
    return segments


def _feed_checked(stream: MarkerStream, delta: str) -> list[TextPiece | MarkerPiece]:
    """Feed one delta and check the held suffix stays bounded."""
    pieces = stream.feed(delta)
    held = len(stream.held)
    assert held <= MAX_NAMED + MAX_URL + 2 * MAX_BRACKET
    assert not stream.held or stream.held[0] in "[【(S"
    return pieces


def _raw(segments: list[Segment]) -> str:
    return "".join(value if kind == "text" else value.raw for kind, value in segments)  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "spec"), MARKERS, ids=[t for t, _ in MARKERS])
def test_marker_forms(text: str, spec: list[tuple[int, str, tuple[int, ...]]]) -> None:
    markers = find_markers(text)
    assert markers == _expected(text, spec)
    for marker in markers:
        assert text[marker.start : marker.end] == marker.raw


@pytest.mark.parametrize("text", NON_MARKERS)
def test_non_markers(text: str) -> None:
    assert find_markers(text) == []
    assert _stream([text]) == [("text", text)]


ALL_TEXTS = [t for t, _ in MARKERS] + NON_MARKERS + REALISTIC


@pytest.mark.parametrize("text", ALL_TEXTS)
def test_every_two_way_split_matches_batch(text: str) -> None:
    expected = _segments_from_markers(text)
    assert _raw(expected) == text
    for cut in range(len(text) + 1):
        assert _stream([text[:cut], text[cut:]]) == expected, cut


@pytest.mark.parametrize("text", ALL_TEXTS)
def test_char_by_char_matches_batch(text: str) -> None:
    assert _stream(list(text)) == _segments_from_markers(text)


_FRAGMENTS = [
    "word ",
    "The answer",
    ". ",
    "\n",
    "\n\n",
    " ",
    "  ",
    "[",
    "]",
    "【",
    "】",
    "(",
    ")",
    "`",
    "``",
    "```",
    "~~~",
    "[Source 1]",
    "[source 2]",
    "[Sources 1, 2]",
    "[Source: 3]",
    "[3]",
    "[1, 2]",
    "[1-3]",
    "[1–4]",
    "[^2]",
    "[[3]](http://e.com/x)",
    "[[2]]",
    "[4](/v1/files/f/content)",
    "【5】",
    "【Source 6】",
    "[0]",
    "[2023]",
    "[abc]",
    "[Source",
    "[So",
    "[1,",
    "[[",
    "(http://",
    "Source",
    "1",
    "12",
    ",",
    "-",
    ":",
    "[text](http://x.y)",
    "```python\n",
    "code [1]\n",
    "    ",
    "~",
    "^",
    "a" * 40,
]


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(1, 40)))


def _random_split(rng: random.Random, text: str) -> list[str]:
    cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 12))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("seed", range(20))
def test_random_texts_and_splits(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        text = _random_text(rng)
        expected = _segments_from_markers(text)
        assert _raw(expected) == text
        for marker in find_markers(text):
            assert text[marker.start : marker.end] == marker.raw
            assert marker.numbers and all(0 < n < 1000 for n in marker.numbers)
        for _ in range(5):
            deltas = _random_split(rng, text)
            assert _stream(deltas) == expected, (text, deltas)


def test_plain_text_is_never_held() -> None:
    stream = MarkerStream()
    for ch in "The refund window is 30 days":
        assert stream.feed(ch) == [TextPiece(ch)]
    assert stream.flush() == []


def test_leading_text_emitted_at_once() -> None:
    assert MarkerStream().feed("Hello wor") == [TextPiece("Hello wor")]


def test_backticks_are_not_held() -> None:
    stream = MarkerStream()
    assert stream.feed("run ``") == [TextPiece("run ``")]
    assert stream.feed("`x [1]") == [TextPiece("`x [1]")]  # ``` mid-line opens a span: [1] is code
    assert stream.feed("``` [2]") == [TextPiece("``` ")]  # span closed; [2] held for a possible "(url)"
    assert stream.feed(".") == [MarkerPiece(Marker(16, 19, (2,), "[2]")), TextPiece(".")]


@pytest.mark.parametrize(
    "prefix",
    [
        "[",
        "[S",
        "[So",
        "[sour",
        "[Source",
        "[Source ",
        "[Source 1",
        "[1,",
        "[1-",
        "[ ",
        "【",
        "【1",
        "[[3]",
        "[[3]]",
        "[3]",
        "[[3]](http://ex",
        "[^",
        "[^3",
    ],
)
def test_possible_marker_prefix_is_held(prefix: str) -> None:
    stream = MarkerStream()
    assert stream.feed("See " + prefix) == [TextPiece("See ")]
    flushed = stream.flush()
    assert "".join(p.text if isinstance(p, TextPiece) else p.marker.raw for p in flushed) == prefix


@pytest.mark.parametrize("text", ["[^x", "(x", "(Sx", "Sx", "Sources x", "[Source x\n"])
def test_dead_prefix_is_released_immediately(text: str) -> None:
    assert MarkerStream().feed(text) == [TextPiece(text)]


@pytest.mark.parametrize("text", ["[Sx]", "[a b]", "[Source x]", "[1x]", "[1.5]", "【x】", "[1000]", "[x\n"])
def test_bracket_that_names_nothing_is_released_at_its_end(text: str) -> None:
    """A bracket may name a document ("[alps_wiki.pdf]"): held until its closer or a line break, no longer."""
    assert MarkerStream().feed(text) == [TextPiece(text)]


def test_held_marker_released_with_following_text() -> None:
    stream = MarkerStream()
    assert stream.feed("Refunds take 5 days [Sour") == [TextPiece("Refunds take 5 days ")]
    assert stream.feed("ce 2") == []
    assert stream.feed("]. Next") == [MarkerPiece(Marker(20, 30, (2,), "[Source 2]")), TextPiece(". Next")]


def test_unclosed_marker_flushed_as_text() -> None:
    stream = MarkerStream()
    assert stream.feed("end [Source 1") == [TextPiece("end ")]
    assert stream.flush() == [TextPiece("[Source 1")]


def test_stray_bracket_never_stalls() -> None:
    stream = MarkerStream()
    out = stream.feed("[" + " " * 200)
    assert out == [TextPiece("[" + " " * 200)]


def test_offsets_are_stream_offsets() -> None:
    stream = MarkerStream()
    pieces = stream.feed("a [1] b") + stream.feed(" c [2]") + stream.flush()
    markers = [p.marker for p in pieces if isinstance(p, MarkerPiece)]
    assert [(m.start, m.end) for m in markers] == [(2, 5), (10, 13)]


def test_linear_time_char_by_char() -> None:
    text = (REALISTIC[0] + "\n" + REALISTIC[2] + "\n[[" + "[" * 50 + " " * 30) * 150
    started = time.perf_counter()
    assert _stream(list(text)) == _segments_from_markers(text)
    assert time.perf_counter() - started < 10  # ~70k chars; quadratic behaviour would take far longer


# Forms real models write (issue 39): by name, in parentheses, bare, with a page, joined by words.
MODEL_FORMS = [
    ("According to [Source 2], moraines.", "[Source 2]", (2,), (), False),
    ("Lakes (Source 2).", "(Source 2)", (2,), (), False),
    ("Lakes (Sources 1 and 3).", "(Sources 1 and 3)", (1, 3), (), False),
    ("Lakes [Source: alps_wiki.pdf].", "[Source: alps_wiki.pdf]", (), ("alps_wiki.pdf",), False),
    ("Lakes [alps_wiki.pdf, p. 3].", "[alps_wiki.pdf, p. 3]", (), ("alps_wiki.pdf",), False),
    ("Lakes 【alps_wiki.pdf】.", "【alps_wiki.pdf】", (), ("alps_wiki.pdf",), False),
    ("Source 2 says so.", "Source 2", (2,), (), True),
    ("See Sources 1 and 3.", "Sources 1 and 3", (1, 3), (), True),
    ("Skulls [Source 3] (p. 15), seven.", "[Source 3] (p. 15)", (3,), (), False),
    ("Skulls [Source 3, p. 15].", "[Source 3, p. 15]", (3,), (), False),
    ("the sources [1] and [2], so", "[1] and [2]", (1, 2), (), False),
    ("Lakes [Source 1 and Source 2].", "[Source 1 and Source 2]", (1, 2), (), False),
    ("湖泊【1】和【2】。", "【1】和【2】", (1, 2), (), False),
]


@pytest.mark.parametrize(("text", "raw", "numbers", "names", "bare"), MODEL_FORMS, ids=[m[0] for m in MODEL_FORMS])
def test_model_forms(text: str, raw: str, numbers: tuple[int, ...], names: tuple[str, ...], bare: bool) -> None:
    (marker,) = find_markers(text)
    assert (marker.raw, marker.numbers, marker.names, marker.bare) == (raw, numbers, names, bare)
    assert text[marker.start : marker.end] == raw
    for cut in range(len(text) + 1):  # any split while streaming finds the same marker
        stream = MarkerStream()
        pieces = _feed_checked(stream, text[:cut]) + _feed_checked(stream, text[cut:]) + stream.flush()
        found = [p.marker for p in pieces if isinstance(p, MarkerPiece)]
        assert found == [marker]


@pytest.mark.parametrize(
    "text",
    [
        "[citation needed]",
        "The Source of the Rhine.",
        "the river source 2 km away",
        "resource 2",
        "Source 2nd",
        "(2)",
        "[see above]",
        "Sources say 3 lakes.",
    ],
)
def test_prose_that_looks_like_a_marker(text: str) -> None:
    assert find_markers(text) == []
