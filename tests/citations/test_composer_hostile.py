"""An upstream answer with a huge run of spaces must not stall the event loop (the composer runs on it)."""

from __future__ import annotations

import random

from calypso.citations.composer import AnswerComposer
from calypso.citations.grounded import Quote, utf16_len
from testkit.hostile_files import run_isolated


def _no_quote(segment_text: str, source) -> Quote:
    raise AssertionError("no marker cites a source here")


def test_spaces_are_held_before_a_marker_and_kept_otherwise() -> None:
    composer = AnswerComposer([], _no_quote)
    for delta in ["Tide ", " ", "\t", "at six", "  ", "[9]", " done.   "]:
        composer.feed(delta)
    composer.flush()
    answer = composer.finish()
    assert answer.text == "Tide  \tat six done.   "  # spaces before the (invalid) marker are dropped
    assert answer.markers[0].leading_space == "  "


def test_a_megabyte_of_spaces_in_one_delta_and_in_many() -> None:
    # Under a CPU cap: the old re.search(r"[ \t]+$") took 12 s for 60,000 spaces and hours for a megabyte.
    out = run_isolated(
        """
        from calypso.citations.composer import AnswerComposer
        for deltas in (["Answer" + " " * 1_000_000 + "done."], ["Answer"] + [" " * 1000] * 1000 + ["done."]):
            composer = AnswerComposer([], None)
            for delta in deltas:
                composer.feed(delta)
            composer.flush()
            print(len(composer.finish().text))
        """,
        cpu_seconds=30,
    )
    assert out.split() == ["1000011", "1000011"]


def test_utf16_len_counts_astral_characters_twice_and_lone_surrogates_once() -> None:
    rng = random.Random(3)
    alphabet = ["a", "é", "中", "\U0001f600", "\ud800", "\udfff", "\n", "\U00010348"]
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert utf16_len(text) == len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF), repr(text)


def test_an_answer_with_fifteen_thousand_markers() -> None:
    # Each cited segment measured the whole answer so far in UTF-16 with a Python loop: 20,000 markers
    # took 236 s on the event loop. The cap leaves the fixed code (about 2 s) a wide margin.
    out = run_isolated(
        """
        from calypso.citations.composer import AnswerComposer
        from calypso.citations.grounded import Quote, Source
        from calypso.models import Chunk, Document, Passage
        doc = Document("d", "file-d", "default", "general", "a.txt", "text/plain", 1, "h", 0, 1, 1)
        source = Source(1, Passage(doc, Chunk(0, "passage", 0, 7, 1, 1, ("1",)), 1.0))
        quote = Quote("passage", 0, 7, 0, 7, 1, "1", 0.9, True)
        composer = AnswerComposer([source], lambda segment, source: quote)
        for i in range(15_000):
            composer.feed(f"Claim number {i} is here \\U0001f600 [1]. ")
        composer.flush()
        answer = composer.finish()
        print(len(answer.segments), answer.segments[-1].end_utf16 - answer.segments[-1].end)
        """,
        cpu_seconds=40,
    )
    assert out.split() == ["15000", "15000"]


def test_a_hundred_thousand_markers_cost_linear_time() -> None:
    # Each marker re-joined the whole answer so far: 100,000 markers took 92 s on the event loop.
    # A marker now reads only the text since the previous segment. The cap is far above the fixed cost.
    out = run_isolated(
        """
        import time
        from calypso.citations.composer import AnswerComposer
        from calypso.citations.grounded import Quote, Source
        from calypso.models import Chunk, Document, Passage
        doc = Document("d", "file-d", "default", "general", "a.txt", "text/plain", 1, "h", 0, 1, 1)
        source = Source(1, Passage(doc, Chunk(0, "passage", 0, 7, 1, 1, ("1",)), 1.0))
        quote = Quote("passage", 0, 7, 0, 7, 1, "1", 0.9, True)
        composer = AnswerComposer([source], lambda segment, source: quote)
        started = time.process_time()
        for i in range(100_000):
            composer.feed(f"Claim {i} \\u00e9 [1]. ")
        composer.flush()
        answer = composer.finish()
        last = answer.segments[-1]
        print(len(answer.segments), last.text, last.end_utf16 == last.end, round(time.process_time() - started, 2))
        """,
        cpu_seconds=40,
    )
    segments, claim, number, _, same, seconds = out.split()
    assert (segments, claim, number, same) == ("100000", "Claim", "99999", "True")
    print(f"100,000 markers: {seconds} s CPU")
