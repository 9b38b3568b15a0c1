"""An upstream answer with a huge run of spaces must not stall the event loop (the composer runs on it)."""

from __future__ import annotations

from hostile_files import run_isolated

from calypso.citations.composer import AnswerComposer
from calypso.citations.grounded import Quote


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
