"""A quoted sentence answers a question only when it gives what is asked of what is named (issue 42)."""

from __future__ import annotations

import pytest

from calypso.generation.extractive import select_sentences
from calypso.models import Chunk, Document, Passage


def _passage(text: str, n: int = 0, filename: str = "") -> Passage:
    name = filename or f"d{n}.txt"
    document = Document(f"doc{n}", f"file-{n}", "default", "general", name, "text/plain", 1, "x", 0, 1, 1)
    return Passage(document, Chunk(0, text, 0, len(text), 1, 1, ("1",)), 1.0)


LAKES = (
    "The rivers form lakes, such as Lake Geneva, a crescent shaped lake crossing the Swiss border. "
    "Lake Constance is 63 km long and 252 m deep at its deepest point."
)


@pytest.mark.parametrize(
    "question",
    [
        "How deep is Lake Geneva?",  # names the lake, gives no depth
        "How many brown bears live in the Alps?",  # a number, but of species
        "When was the Aletsch Glacier first measured?",  # a decade, of another glacier
        "What is the population of Grenoble?",  # a population, of the region
    ],
)
def test_a_sentence_that_shares_the_words_but_not_the_answer_is_not_quoted(question: str) -> None:
    passages = [
        _passage(LAKES, 1),
        _passage(
            "The Alps are a habitat for 30,000 species of wildlife, ranging from the tiniest snow fleas to brown "
            "bears. Louis Agassiz's studies of the Unteraar Glacier in the 1840s showed that it moved at 100 m per "
            "year. The population of the region is 14 million spread across eight countries.",
            2,
        ),
    ]
    assert select_sentences(question, passages) == []


@pytest.mark.parametrize(
    ("question", "gold"),
    [
        ("How deep is Lake Constance?", "252 m"),
        ("How many species of wildlife live in the Alps?", "30,000"),
        ("When did Agassiz study the Unteraar Glacier?", "1840s"),
        ("Where was Otzi the Iceman discovered?", "Similaun"),  # no accent in the question
    ],
)
def test_a_sentence_that_gives_it_is_quoted(question: str, gold: str) -> None:
    passages = [
        _passage(LAKES, 1),
        _passage(
            "The Alps are a habitat for 30,000 species of wildlife. Louis Agassiz studied the Unteraar Glacier in "
            "the 1840s. In 1991 a mummy known as Ötzi the Iceman was discovered by hikers on the Similaun glacier.",
            2,
        ),
    ]
    assert any(gold in text for _, _, text in select_sentences(question, passages))


def test_a_name_the_documents_are_about_need_not_be_repeated() -> None:
    mined = "Among the many substances Celtic tribes mined was salt in areas such as Salzburg."
    question = "What did Celtic tribes mine from the Alps?"
    assert any("salt" in text for _, _, text in select_sentences(question, [_passage(mined, 1, "alps_wiki.pdf")]))
    assert select_sentences(question, [_passage(mined, 1, "europe.pdf")]) == []


def test_a_chinese_year_in_the_next_sentence_of_the_passage_answers() -> None:
    text = "路德维希·普朗特（Ludwig Prandtl）是德国力学家，近代力学的奠基人之一。他于1953年在哥廷根逝世。"
    assert any("1953" in s for _, _, s in select_sentences("路德维希·普朗特卒于哪年？", [_passage(text)]))


def test_a_chinese_question_about_something_else_is_declined() -> None:
    text = "战国无双3是由光荣和ω-force开发的战国无双系列的正统第三续作。本作以三大故事为主轴。"
    assert select_sentences("深圳地铁5号线的全长是多少公里？", [_passage(text)]) == []


def test_a_german_question_is_answered_in_other_inflections_and_declined_off_topic() -> None:
    text = (
        "Die Verteidigung der Panthers gab nur 308 Punkte ab und belegte den sechsten Platz in der Liga. "
        "Kawann Short führte das Team mit 11 Sacks an."
    )
    answered = select_sentences("Wie viele Punkte gab die Verteidigung der Panthers ab?", [_passage(text)])
    assert any("308" in s for _, _, s in answered)
    assert select_sentences("Wann wurde die Universität Warschau gegründet?", [_passage(text)]) == []
