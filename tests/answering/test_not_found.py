"""The default answerer declines, citing nothing, when the documents do not answer (issue 24)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from calypso.generation import phrases
from calypso.scope import RetrievalScope
from calypso.services import Services
from calypso.services.answering import Answerer, AskRequest
from calypso.services.ingestion import Upload


def _ask(services: Services, question: str):  # type: ignore[no-untyped-def]
    scope = RetrievalScope(namespaces=(services.settings.default_namespace,))
    request = AskRequest([{"role": "user", "content": question}], scope, generator="extractive")
    return asyncio.run(Answerer(services.documents, services.search).answer(request))


@pytest.fixture
def alps(services: Services, data_dir: Path) -> Services:
    pdf = data_dir / "alps-wiki-qa" / "alps_wiki.pdf"
    services.ingestion.ingest(Upload(pdf.read_bytes(), pdf.name))
    return services


# Near the article's topic, not answered by it: before the coverage rule each got a sentence quoted.
@pytest.mark.parametrize(
    "question",
    [
        "What is the capital city of Austria?",
        "Who won the 2018 Winter Olympics downhill race?",
        "What is the recipe for Swiss fondue?",
        "Ethanol stress lowers the expression of PSP in bacteria.",
        # Issue 42: the article names the place or the thing, not what is asked of it.
        "How deep is Lake Geneva?",
        "How many brown bears live in the Alps today?",
        "How many people live in Chamonix?",
        "How long is the Fréjus Road Tunnel?",
        "How many cable cars operate in the Alps?",
    ],
)
def test_a_question_the_documents_do_not_answer_is_declined(alps: Services, question: str) -> None:
    answer = _ask(alps, question)
    assert answer.text == phrases.NOT_FOUND["en"]
    assert not any(segment.citations for segment in answer.segments)
    assert answer.retrieval_status == "ungrounded"  # seed 000: grounded_sources_state "missing"


def test_a_question_they_answer_is_answered_and_cited(alps: Services) -> None:
    answer = _ask(alps, "What did the Frankish expansion and the Bavarian expansion introduce?")
    assert "feudalism" in answer.text and any(segment.citations for segment in answer.segments)


# Issue 42: questions asking for a number, a year or a name the article does give stay answered.
@pytest.mark.parametrize(
    ("question", "gold"),
    [
        ("Water from the rivers is used in over how many hydroelectric power plants?", "500"),
        ("What year did Edward Whymper reach the top of the Matterhorn?", "1865"),
        ("When were most of the Alpine fourthousanders climber?", "19th century"),
        ("Where was Otzi the Iceman discovered?", "Similaun"),  # "Ötzi" in the article
        ("How many species of wildlife habitat the Alps?", "30,000"),
    ],
)
def test_a_question_whose_answer_is_there_is_answered(alps: Services, question: str, gold: str) -> None:
    answer = _ask(alps, question)
    assert gold in " ".join(segment.text for segment in answer.segments if segment.citations)
