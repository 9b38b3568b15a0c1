"""The composer: plain text, segments, two numberings, offsets, streaming = one-shot."""

from __future__ import annotations

import random

import pytest

from calypso.citations.composer import AnswerComposer
from calypso.citations.events import MarkerEvent, TextEvent
from calypso.citations.grounded import Quote, Source, utf16_len
from calypso.models import Chunk, Document, Passage


def _sources(k: int) -> list[Source]:
    doc = Document("d", "file-d", "default", "general", "a.txt", "text/plain", 1, "h", 0, 1, k)
    return [Source(i, Passage(doc, Chunk(i - 1, f"passage {i}", 0, 9, 1, 1, ("1",)), 1.0)) for i in range(1, k + 1)]


def _quote(segment_text: str, source: Source, support: float = 0.9) -> Quote:
    text = source.passage.chunk.text
    return Quote(text, 0, len(text), 0, len(text), 1, "1", support, support >= 0.5)


def compose(deltas: list[str], k: int = 3, find_quote=_quote, drop: bool = False):
    composer = AnswerComposer(_sources(k), find_quote, drop)
    events = []
    for delta in deltas:
        events += composer.feed(delta)
    events += composer.flush()
    return composer.finish(), events


def test_markers_become_segments_with_display_numbers() -> None:
    raw = "Refunds take 30 days [Source 2]. Card fees are 2.5% [Source 3][Source 2]. Nothing else."
    answer, _ = compose([raw])
    assert answer.text == "Refunds take 30 days. Card fees are 2.5%. Nothing else."
    assert answer.raw_text == raw
    first, second = answer.segments
    assert first.text == "Refunds take 30 days" and answer.text[first.start : first.end] == first.text
    assert second.text == "Card fees are 2.5%"
    assert [c.retrieval_number for c in second.citations] == [3, 2]
    # Display numbers: first citation order, then uncited in retrieval order.
    assert {s.retrieval_number: s.display_number for s in answer.sources} == {2: 1, 3: 2, 1: 3}
    assert [c.display_number for c in second.citations] == [2, 1]
    assert [s.retrieval_number for s in answer.cited_sources] == [2, 3]


def test_marker_after_the_period_cites_the_sentence_before() -> None:
    answer, _ = compose(["First claim here. [1] Second claim here. [2]"])
    assert answer.text == "First claim here. Second claim here."
    assert [s.text for s in answer.segments] == ["First claim here.", "Second claim here."]


def test_segment_starts_at_the_sentence_start_not_at_an_abbreviation() -> None:
    raw = "Refunds\nDr. Smith says refunds take 30 days, e.g. for shoes [1]. In the U.S. The fee is 2.5% [2]."
    answer, _ = compose([raw])
    assert [s.text for s in answer.segments] == [
        "Dr. Smith says refunds take 30 days, e.g. for shoes",
        "The fee is 2.5%",
    ]


def test_invalid_markers_are_dropped_and_never_cite() -> None:
    answer, _ = compose(["Claim one [Source 7]. Claim two [Source 1]."], k=2)
    assert answer.text == "Claim one. Claim two."
    assert len(answer.segments) == 1 and answer.segments[0].text == "Claim two"
    assert answer.markers[0].valid_numbers == () and answer.markers[0].segment_index is None
    assert [s.cited for s in answer.sources] == [True, False]


def test_two_markers_in_one_sentence_make_two_segments() -> None:
    answer, _ = compose(["Refunds take 30 days [1], and fees are 2.5% [2]."])
    assert [s.text for s in answer.segments] == ["Refunds take 30 days", ", and fees are 2.5%"[2:]]


def test_drop_unsupported_citations() -> None:
    weak = lambda text, source: _quote(text, source, 0.1 if source.retrieval_number == 1 else 0.9)  # noqa: E731
    answer, _ = compose(["Claim [1][2]."], find_quote=weak, drop=True)
    assert [c.retrieval_number for c in answer.segments[0].citations] == [2]
    assert [m.valid_numbers for m in answer.markers] == [(), (2,)]
    flagged, _ = compose(["Claim [1][2]."], find_quote=weak, drop=False)
    assert [c.quote.supported for c in flagged.segments[0].citations] == [False, True]


def test_utf16_offsets_with_emoji_and_cjk() -> None:
    raw = "🎉 Party time 🎉 [1]. 退款需要三十天【2】。Ünïcödé ok [3]."
    answer, _ = compose([raw])
    for segment in answer.segments:
        assert answer.text[segment.start : segment.end] == segment.text
        assert segment.start_utf16 == utf16_len(answer.text[: segment.start])
        assert (
            answer.text.encode("utf-16-le")[2 * segment.start_utf16 : 2 * segment.end_utf16].decode("utf-16-le")
            == segment.text
        )
    assert answer.segments[0].text == "🎉 Party time 🎉"
    assert answer.segments[0].end_utf16 == answer.segments[0].end + 2
    assert answer.segments[1].text == "退款需要三十天"


def test_no_space_dropped_before_a_newline_marker() -> None:
    answer, _ = compose(["Line one.\n[1] Next"])
    assert answer.text == "Line one.\n Next"


REALISTIC = [
    "Customers may request a full refund within 30 days [Source 1]. After that, store credit applies [Source 2][Source 3].\n\n"
    "- Gift cards are never refundable [2]\n- Shipping is refunded only for damage【3】.\n\nSee `[1]` in code. Done [Source 9].",
    "Short [1-3]. Then [1, 2] and [[2]](http://x/y#page=3) link.",
    "## Refunds\nDr. Smith, e.g. in No. 5, says 30 days [1]. It began in the U.S. The fee is 2.5%【2】. "
    "Das gilt z. B. am 3. Oktober [3]. 東京は首都です。大阪も [1].",
]


@pytest.mark.parametrize("raw", REALISTIC)
def test_streaming_equals_one_shot_for_every_split(raw: str) -> None:
    whole, _ = compose([raw])
    for cut in range(len(raw) + 1):
        split, events = compose([raw[:cut], raw[cut:]])
        assert split.text == whole.text
        assert [(s.start, s.end, [c.retrieval_number for c in s.citations]) for s in split.segments] == [
            (s.start, s.end, [c.retrieval_number for c in s.citations]) for s in whole.segments
        ]
        assert "".join(e.text for e in events if isinstance(e, TextEvent)) == whole.text
    rng = random.Random(7)
    for _ in range(50):
        cuts = sorted(rng.sample(range(len(raw)), 12))
        deltas = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])]
        assert compose(deltas)[0].text == whole.text


def test_marker_event_follows_the_text_it_cites() -> None:
    _, events = compose(["Alpha beta", " gamma [So", "urce 1", "] delta."])
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("MarkerEvent") > 0
    marker = next(e for e in events if isinstance(e, MarkerEvent))
    assert marker.segment.text == "Alpha beta gamma" and [s.retrieval_number for s in marker.newly_cited] == [1]
    text_before = "".join(e.text for e in events[: events.index(marker)] if isinstance(e, TextEvent))
    assert text_before == "Alpha beta gamma"
