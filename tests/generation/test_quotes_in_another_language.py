"""Quotes in another language than the question's are said to be so, in the question's language (issue 43)."""

from __future__ import annotations

import asyncio

from calypso.citations.claims import sentence_support
from calypso.citations.composer import AnswerComposer
from calypso.citations.grounded import GroundedAnswer, Quote, Source
from calypso.citations.support import best_evidence
from calypso.generation import phrases
from calypso.generation.base import GenerationRequest, TextDelta
from calypso.generation.extractive import ExtractiveGenerator, compose
from calypso.models import Chunk, Document, Passage
from calypso.services.answering import OWN_SENTENCES

GERMAN = "Die Verteidigung der Panthers gab nur 308 Punkte ab und belegte den sechsten Platz in der Liga."


def _passage(text: str) -> Passage:
    document = Document("doc1", "file-1", "default", "general", "d1.txt", "text/plain", 1, "x", 0, 1, 1)
    return Passage(document, Chunk(0, text, 0, len(text), 1, 1, ("1",)), 1.0)


def test_the_note_names_the_sources_language_in_the_questions() -> None:
    assert compose([(1, 0, GERMAN)], "en") == f"The sources say this in German. {GERMAN} [Source 1]"
    assert compose([(1, 0, GERMAN)], "zh").startswith("以下资料原文为德文。")
    assert compose([(1, 0, GERMAN)], "de") == f"{GERMAN} [Source 1]"  # same language: no note
    assert phrases.quoted_in("en", "xx") is None  # a language without a name here: the quotes speak for themselves


def test_an_english_question_over_a_german_passage_quotes_it_and_the_note_claims_nothing() -> None:
    passage = _passage(GERMAN)

    def find_quote(segment: str, source: Source) -> Quote:
        ev = best_evidence(segment, source.passage.chunk.text)
        return Quote(ev.text, ev.start, ev.end, ev.start, ev.end, 1, "1", ev.score, ev.score > 0.3)

    async def run() -> GroundedAnswer:
        composer = AnswerComposer([Source(1, passage)], find_quote)
        request = GenerationRequest(
            messages=[], passages=[passage], question="How many points did the Panthers give up?"
        )
        async for event in ExtractiveGenerator().stream(request):
            if isinstance(event, TextDelta):
                composer.feed(event.text)
        composer.flush()
        return composer.finish(generator="extractive")

    answer = asyncio.run(run())
    assert answer.text.startswith("The sources say this in German. Die Verteidigung der Panthers")
    statuses = [s.status for s in sentence_support(answer, OWN_SENTENCES)]
    assert statuses == ["not_a_claim", "supported"]
