"""Sentence statuses while an answer streams equal those computed once over the finished answer.

The real composer (with and without inferred citations) is fed model output split every way; the
tracker's statuses, in stream order, must be those of ``sentence_support`` on the finished answer, and
each must be given no later than the text of the sentence after it.
"""

from __future__ import annotations

import random

import pytest

from calypso.citations.claims import SentenceTracker, sentence_support
from calypso.citations.composer import AnswerComposer
from calypso.citations.events import MarkerEvent, TextEvent
from calypso.citations.grounded import Quote, Source
from calypso.citations.inference import Attributor
from calypso.citations.support import best_evidence
from calypso.models import Chunk, Document, Passage

PASSAGES = [
    "Customers may request a full refund within 30 days of purchase. Refunds go back to the original card.",
    "Gift cards are never refundable. They expire after five years.",
    "Orders ship within two business days. Shipping is free above 50 euros.",
]


def _sources() -> list[Source]:
    sources = []
    for number, text in enumerate(PASSAGES, start=1):
        doc = Document(
            f"doc-{number}", f"file-{number}", "default", "kb", f"f{number}.md", "text/markdown", 1, "x", 0, 1, 1
        )
        sources.append(Source(number, Passage(doc, Chunk(0, text, 0, len(text), 1, 1, ("1",)), score=0.5)))
    return sources


def _find_quote(segment: str, source: Source) -> Quote:
    text = source.passage.chunk.text
    evidence = best_evidence(segment, text)
    return Quote(
        evidence.text,
        evidence.start,
        evidence.end,
        evidence.start,
        evidence.end,
        1,
        "1",
        evidence.score,
        evidence.score >= 0.5,
    )


ANSWERS = [
    "Refunds are possible within 30 days [1]. Gift cards are never refundable [2]. "
    "Refunds are also paid in cash at any of our stores. Orders ship within two business days.[3]",
    "Hello! Gift cards expire after five years. [2]\n\nShipping is free above 50 euros [3][1]. "
    "The moon is made of cheese and nobody disputes it.",
    "Dr. Smith said refunds go back to the original card [1]. E.g. a card bought on 3.5.2026 [9]. Yes.",
    "退款可在三十天内申请[1]。礼品卡不可退款。Orders ship within two business days [3]",
]


def _splits(text: str, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    pieces, i = [], 0
    while i < len(text):
        n = rng.randint(1, 7)
        pieces.append(text[i : i + n])
        i += n
    return [[text], list(text), pieces]


@pytest.mark.parametrize("attribution", ["off", "fill", "verify"])
@pytest.mark.parametrize("raw", ANSWERS)
def test_streamed_statuses_equal_one_pass(raw: str, attribution: str) -> None:
    for number, tokens in enumerate(_splits(raw, seed=len(raw))):
        sources = _sources()
        attributor = Attributor(sources, _find_quote, attribution) if attribution != "off" else None  # type: ignore[arg-type]
        composer = AnswerComposer(sources, _find_quote, True, attributor=attributor)
        tracker = SentenceTracker()
        released = 0  # plain text handed out so far
        given_at: list[int] = []  # for each status, how much text was out when it was given
        for token in tokens:
            for event in composer.feed(token):
                if isinstance(event, MarkerEvent):
                    if event.segment is not None:
                        tracker.cited(event.segment)
                    continue
                assert isinstance(event, TextEvent)
                tracker.text(event.text)
                released += len(event.text)
                given_at += [released] * len(tracker.settled())
        for event in composer.flush():
            if isinstance(event, MarkerEvent):
                if event.segment is not None:
                    tracker.cited(event.segment)
            else:
                tracker.text(event.text)
                given_at += [released] * len(tracker.settled())
        answer = composer.finish(generator="test", attribution=attribution)
        tracker.finish(answer)
        assert tracker.sentences == sentence_support(answer), f"split {number}"
        assert len(tracker.sentences) >= 3 and given_at, "statuses must come while the answer streams"
        # A status given mid-stream came before the end of the sentence after next had been written.
        for status, at in zip(tracker.sentences, given_at):
            assert at > status.end


def test_an_invented_sentence_is_unsupported_as_soon_as_the_next_begins() -> None:
    sources = _sources()
    composer = AnswerComposer(sources, _find_quote, True)
    tracker = SentenceTracker()
    statuses = []
    for token in [
        "Gift cards are never refundable [2]. ",
        "Refunds are paid in cash at any store. ",
        "Orders ship within two business",
    ]:
        for event in composer.feed(token):
            if isinstance(event, MarkerEvent) and event.segment is not None:
                tracker.cited(event.segment)
            elif isinstance(event, TextEvent):
                tracker.text(event.text)
        statuses += [s.status for s in tracker.settled()]
    assert statuses == ["supported", "unsupported"]
