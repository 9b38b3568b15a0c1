"""The extractive answerer: one real, cleaned sentence per citation, chosen by the question's content words."""

from __future__ import annotations

import asyncio

from calypso.citations.composer import AnswerComposer
from calypso.citations.grounded import GroundedAnswer, Quote, Source
from calypso.citations.support import best_evidence
from calypso.generation.base import GenerationRequest, TextDelta
from calypso.generation.extractive import NOT_FOUND, ExtractiveGenerator, select_sentences
from calypso.generation.sentence_pick import clean_sentence, pick_sentences, sentence_units
from calypso.models import Chunk, Document, Passage


def _passage(text: str, n: int = 0) -> Passage:
    document = Document(f"doc{n}", f"file-{n}", "default", "general", f"d{n}.pdf", "application/pdf", 1, "x", 0, 1, 1)
    return Passage(document, Chunk(0, text, 0, len(text), 1, 1, ("1",)), 1.0)


def _answer(question: str, passages: list[Passage], words_per_token: int = 1) -> GroundedAnswer:
    """Run the generator through the composer, as ``Answerer.stream`` does."""

    def find_quote(segment: str, source: Source) -> Quote:
        ev = best_evidence(segment, source.passage.chunk.text)
        return Quote(ev.text, ev.start, ev.end, ev.start, ev.end, 1, "1", ev.score, ev.score > 0.3)

    async def run() -> GroundedAnswer:
        composer = AnswerComposer([Source(i, p) for i, p in enumerate(passages, 1)], find_quote)
        request = GenerationRequest(messages=[], passages=passages, question=question)
        async for event in ExtractiveGenerator(words_per_token).stream(request):
            if isinstance(event, TextDelta):
                composer.feed(event.text)
        composer.flush()
        return composer.finish(generator="extractive")

    return asyncio.run(run())


DUCKS = _passage(
    "What do you know about ponds? Ducks do what they like all day. "
    "Ducks eat aquatic plants, small fish, insects and snails. Ducks are birds."
)


def test_each_sentence_carries_its_own_citation() -> None:
    passages = [
        _passage("Ducks eat aquatic plants and insects. Ducks eat bread in parks, which harms them.", 1),
        _passage("In winter, ducks eat grain left in harvested fields.", 2),
    ]
    answer = _answer("What do ducks eat?", passages)
    assert len(answer.segments) == len(answer.markers) >= 2
    for segment, marker in zip(answer.segments, answer.markers, strict=True):
        assert marker.position == segment.end and len(marker.valid_numbers) == 1
        assert len(segment.citations) == 1 and segment.citations[0].quote.supported
        assert answer.text[segment.start : segment.end] == segment.text


def test_every_answer_sentence_is_inside_a_cited_segment() -> None:
    passages = [_passage(DUCKS.chunk.text, 1), _passage("Ducks eat seeds. Mallards eat snails and worms too.", 2)]
    answer = _answer("What do ducks eat?", passages, words_per_token=3)
    covered = set()
    for segment in answer.segments:
        covered.update(range(segment.start, segment.end))
    assert all(i in covered for i, ch in enumerate(answer.text) if not ch.isspace())


def test_function_words_do_not_drive_the_choice() -> None:
    picked = select_sentences("What do ducks eat?", [DUCKS])
    assert picked[0][2] == "Ducks eat aquatic plants, small fish, insects and snails."
    assert all("What do you know" not in sentence for _, _, sentence in picked)
    # A question of function words only finds nothing rather than anything.
    assert select_sentences("What do they do?", [DUCKS]) == []
    assert _answer("What do they do?", [DUCKS]).text == NOT_FOUND


def test_near_duplicates_are_dropped() -> None:
    # Overlapping chunks repeat sentences; the answer quotes each once.
    repeated = "The Brenner Pass has been used as a trading route since the 14th century."
    passages = [_passage(f"Passes matter. {repeated}", 1), _passage(f"{repeated} It is low.", 2)]
    picked = select_sentences("Since when has the Brenner Pass been a trading route?", passages)
    assert [sentence for _, _, sentence in picked].count(repeated) == 1
    near = "The Brenner Pass has been used as a trading route since the 14th century, it is said."
    picked = select_sentences("Brenner Pass trading route", [_passage(f"{repeated} {near}")])
    assert len(picked) == 1


def test_relevance_falls_off_and_stops() -> None:
    text = (
        "Glaciers carved the valleys of the Alps. Glaciers in the Alps are retreating fast. "
        "Cheese is made in many villages. Cows graze on alpine pastures in summer."
    )
    picked = pick_sentences("Why are the glaciers of the Alps retreating?", [_passage(text)])
    assert picked[0].text == "Glaciers in the Alps are retreating fast."
    assert all("Cheese" not in c.text and "Cows" not in c.text for c in picked)


def test_control_characters_footnotes_and_emphasis_are_cleaned() -> None:
    raw = "The **Alps** are\u00ad high\x07 moun\u200btains.[12] They\x0bspan eight countries.[citation needed]"
    assert clean_sentence(raw) == "The Alps are high mountains. They span eight countries."


def test_line_break_hyphenation_is_joined_only_where_the_layout_broke_a_word() -> None:
    context = "a well-known peak; an exam-\nple of layout; the well-\nknown peak; ISBN 978-\n0-8021"
    assert clean_sentence("an exam-\nple of layout", context) == "an example of layout"
    assert clean_sentence("the well-\nknown peak", context) == "the well-known peak"  # spelt so elsewhere
    assert clean_sentence("ISBN 978-\n0-8021", context) == "ISBN 978-0-8021"  # digits: not a word
    assert clean_sentence("north-south axis") == "north-south axis"


def test_page_furniture_lines_are_dropped() -> None:
    raw = "The Alps stretch across\n12\neight countries and\nhttps://en.wikipedia.org/wiki/Alps 3/25\nmany regions."
    assert clean_sentence(raw) == "The Alps stretch across eight countries and many regions."


def test_pdf_layout_breaks_are_mended() -> None:
    text = (
        "The geological subdivision differentiates the Western, Eastern and Southern Alps.\n"
        "According to geologist Stefan Schmid, because the Western\n"
        "Alps underwent a metamorphic event in the Cenozoic Era, the areas differ.\n"
        "A view from the Männlichen of the Eiger, Mönch and Jungfrau (left to right)\n"
        "The Alps are a source of minerals that have been mined for thousands of years."
    )
    units = [" ".join(text[s:e].split()) for s, e in sentence_units(text)]
    assert (
        "According to geologist Stefan Schmid, because the Western Alps underwent a metamorphic event "
        "in the Cenozoic Era, the areas differ."
    ) in units
    assert "The Alps are a source of minerals that have been mined for thousands of years." in units


def test_cleaned_sentence_is_still_found_as_the_quote() -> None:
    text = "Intro line here.\nThe tourist in-\ndustry became dominant by the end of the century.[24] Cows graze."
    answer = _answer("Which industry became dominant?", [_passage(text)])
    assert answer.text.startswith("The tourist industry became dominant by the end of the century.")
    (segment, *_) = answer.segments
    quote = segment.citations[0].quote
    assert quote.supported and "dustry became dominant" in quote.text and quote.text in text


def test_a_similarity_callable_joins_the_score() -> None:
    text = "Mallards dabble for duckweed. Ducks live near water."
    lexical = select_sentences("What do ducks eat?", [_passage(text)])
    assert lexical[0][2] == "Ducks live near water."

    def similarity(question: str, sentences: list[str]) -> list[float]:
        return [1.0 if "duckweed" in s else 0.0 for s in sentences]

    # The semantic score ranks only sentences that share a content word; both do here via "duck".
    text = "Ducks dabble for duckweed in ponds. Ducks live near water."
    picked = select_sentences("What do ducks eat?", [_passage(text)], similarity=similarity)
    assert picked[0][2] == "Ducks dabble for duckweed in ponds."
