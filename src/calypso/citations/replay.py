"""The events of a finished answer, as the composer emitted them while it was written.

Renderers consume ``TextEvent``/``MarkerEvent`` one by one when streaming; fed
this replay instead, the same renderer produces the non-streamed reply, so
both paths share one implementation (and one set of offsets).
"""

from __future__ import annotations

from collections.abc import Iterator

from calypso.citations.composer import MarkerEvent, TextEvent
from calypso.citations.grounded import GroundedAnswer, SegmentCitation, Source


def answer_events(answer: GroundedAnswer) -> Iterator[TextEvent | MarkerEvent]:
    """Text between the markers, and each marker with the segment it cites and what it added.

    Text is replayed in one event per gap between markers rather than token by
    token: renderers must not depend on how text deltas are split.
    """
    last = 0
    added_before: set[tuple[int, int]] = set()  # (segment index, retrieval number)
    cited_before: set[int] = set()
    for placement in answer.markers:
        if placement.position > last:
            yield TextEvent(answer.text[last : placement.position])
            last = placement.position
        index = placement.segment_index
        if index is None:
            yield MarkerEvent(placement, None, [], [])
            continue
        segment = answer.segments[index]
        by_number = {c.retrieval_number: c for c in segment.citations}
        added: list[SegmentCitation] = []
        newly: list[Source] = []
        for number in placement.valid_numbers:
            if (index, number) in added_before or number not in by_number:
                continue  # a repeat: the composer kept it in place but added nothing
            added_before.add((index, number))
            added.append(by_number[number])
            if number not in cited_before:
                cited_before.add(number)
                newly.append(answer.source(number))
        yield MarkerEvent(placement, segment, newly, added)
    if last < len(answer.text):
        yield TextEvent(answer.text[last:])
