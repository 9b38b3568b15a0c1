"""What answering yields, in order: ``Retrieved``, then text and marker events (and tool calls), then ``Done``.

A ``SentenceEvent`` follows the text that made a sentence's status final (``citations.claims``).

The renderers of every dialect consume these; the answering service produces them while the answer is
written (``composer.AnswerComposer``), and ``answer_events`` replays them from a finished answer, so a
renderer fed the replay gives the non-streamed reply with the same code (and the same offsets).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from calypso.citations.grounded import (
    GroundedAnswer,
    MarkerPlacement,
    Segment,
    SegmentCitation,
    SentenceSupport,
    Source,
)


@dataclass
class TextEvent:
    text: str  # plain-text delta


@dataclass
class MarkerEvent:
    placement: MarkerPlacement
    segment: Segment | None  # the segment this marker cites, with its citations so far
    newly_cited: list[Source]  # sources cited for the first time here, display numbers assigned
    added: list[SegmentCitation]  # citations this marker added to the segment (not repeats)


@dataclass
class Retrieved:
    sources: list[Source]
    query: str | None  # None: retrieval did not run
    # Whether markers can become citations (a knowledge base, citations enabled): renderers read it here.
    citing: bool = True


@dataclass
class ToolCallsEvent:
    calls: list[dict[str, Any]]


@dataclass
class SentenceEvent:
    sentence: SentenceSupport  # offsets into the plain answer
    index: int  # the sentence's position in the answer, from 0
    text: str  # the sentence, as in the plain answer


@dataclass
class Done:
    answer: GroundedAnswer


AnswerEvent = Retrieved | TextEvent | MarkerEvent | SentenceEvent | ToolCallsEvent | Done


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


__all__ = [
    "AnswerEvent",
    "Done",
    "MarkerEvent",
    "Retrieved",
    "SentenceEvent",
    "TextEvent",
    "ToolCallsEvent",
    "answer_events",
]
