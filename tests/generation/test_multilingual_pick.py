"""The extractive answerer's sentence choice in Chinese and German (issue 22)."""

from __future__ import annotations

import asyncio

import numpy as np

from calypso.generation import phrases
from calypso.generation.base import GenerationRequest, TextDelta
from calypso.generation.extractive import ExtractiveGenerator
from calypso.generation.question_words import drop_question_terms, is_question_term
from calypso.generation.sentence_pick import pick_sentences, question_terms
from calypso.generation.similarity import EmbeddingSimilarity
from calypso.models import Chunk, Document, Passage


def _passage(text: str, n: int = 0) -> Passage:
    document = Document(f"doc{n}", f"file-{n}", "default", "general", f"d{n}.md", "text/markdown", 1, "x", 0, 1, 1)
    return Passage(document, Chunk(0, text, 0, len(text), 1, 1, ("1",)), 1.0)


def _picked(question: str, *texts: str) -> list[str]:
    return [c.text for c in pick_sentences(question, [_passage(t, i) for i, t in enumerate(texts)])]


def test_chinese_interrogatives_are_not_content() -> None:
    terms = question_terms("赵鹏的职业是什么？", "zh")
    assert "什么" not in terms and "是什" not in terms
    assert "赵鹏" in terms and "职业" in terms
    assert is_question_term("哪里") and is_question_term("多少") and not is_question_term("退款")
    assert drop_question_terms(["refund", "什么"]) == frozenset({"refund"})


def test_a_chinese_sentence_that_says_what_is_not_the_answer() -> None:
    subject = "赵鹏是中国足球运动员，司职后卫。赵鹏曾效力于河南建业队，并入选国家队。"
    distractor = "校长又是什么？学生们在操场上讨论了很久，直到上课铃响。"
    picked = _picked("赵鹏的职业是什么？", distractor, subject)
    assert picked and all("赵鹏" in sentence for sentence in picked)
    assert "赵鹏是中国足球运动员，司职后卫。" in picked


def test_a_short_chinese_sentence_is_quoted() -> None:
    # 18 characters: under MIN_SENTENCE_CHARS as code points, well over it as content.
    picked = _picked(
        "礼品卡可以退款吗？", "礼品卡一律不予退款，也不能兑换现金。运费由客户承担，除非商品在运输途中损坏。"
    )
    assert picked[0] == "礼品卡一律不予退款，也不能兑换现金。"


def test_german_question_words_are_not_content() -> None:
    terms = question_terms("Wann wurde die erste Warschauer Börse gegründet?", "de")
    assert not {"wann", "wurd"} & set(terms)
    assert {"warschau", "bors", "gegrund"} <= set(terms)
    # English keeps its own list (the picker's stop words): nothing else is removed.
    assert question_terms("When was the stock exchange founded?") == ["exchang", "found", "stock"]


def test_a_german_compound_matches_its_head() -> None:
    passage = "Die Hochzeit fand im Mai 1901 statt. Die öffentliche Demonstration fand im Mai 1901 in Cornwall statt."
    picked = _picked("Wann fand die Funkdemonstration statt?", passage)
    assert picked[0] == "Die öffentliche Demonstration fand im Mai 1901 in Cornwall statt."


def test_a_german_answer_names_whom_its_sentence_refers_to() -> None:
    passage = (
        "Polonia Warschau ist ein Fußballverein aus der Hauptstadt. "
        "Dennoch gelang es ihnen, die Ekstraklasa-Meisterschaft im Jahr 2000 zu gewinnen."
    )
    picked = _picked("Wer gewann 2000 die Ekstraklasa-Meisterschaft?", passage)
    assert picked == [
        "Polonia Warschau ist ein Fußballverein aus der Hauptstadt.",
        "Dennoch gelang es ihnen, die Ekstraklasa-Meisterschaft im Jahr 2000 zu gewinnen.",
    ]


def test_an_english_sentence_that_refers_back_stays_alone() -> None:
    passage = "Polonia is a football club from the capital. They won the Ekstraklasa championship in 2000."
    assert _picked("Who won the Ekstraklasa championship in 2000?", passage) == [
        "They won the Ekstraklasa championship in 2000."
    ]


class _EnglishOnly:
    name = "english-only-test-model"
    dimension = 2
    languages = frozenset({"en"})

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        return np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (len(texts), 1))


def test_no_semantic_score_for_a_language_the_model_does_not_cover() -> None:
    model = _EnglishOnly()
    similarity = EmbeddingSimilarity(model)
    try:
        assert similarity.languages == frozenset({"en"})
        assert similarity("礼品卡可以退款吗？", ["礼品卡一律不予退款。"]) is None
        assert similarity("Wann wurde die Warschauer Börse gegründet und von wem?", ["Die Börse."]) is None
        assert model.calls == 0
        assert similarity("When was the stock exchange founded?", ["It was founded in 1817."]) == [1.0]
        assert model.calls == 1
    finally:
        similarity.close()


def _stream_text(question: str, passages: list[Passage], searched: bool = True) -> str:
    async def run() -> str:
        request = GenerationRequest(
            messages=[{"role": "user", "content": question}], passages=passages, question=question, searched=searched
        )
        return "".join([e.text async for e in ExtractiveGenerator().stream(request) if isinstance(e, TextDelta)])

    return asyncio.run(run())


def test_the_fixed_phrases_follow_the_question() -> None:
    passages = [_passage("Die Fähre fährt um zwölf Uhr ab.")]
    assert _stream_text("这个城市的人口有多少？", passages) == phrases.not_found("zh")
    assert _stream_text("この町の人口はどれくらいですか？", passages) == phrases.not_found("ja")
    assert _stream_text("이 도시의 인구는 얼마입니까?", passages) == phrases.not_found("ko")
    assert _stream_text("Quelle est la population de cette ville et de sa région ?", passages) == phrases.not_found(
        "fr"
    )
    assert _stream_text("¿Cuál es la población de esta ciudad y de su región?", passages) == phrases.not_found("es")
    # Too short to tell: the passages' language.
    assert _stream_text("Xylophon?", passages) == phrases.not_found("de")
    assert len({phrases.not_found(code) for code in ("en", "zh", "ja", "ko", "de", "fr", "es")}) == 7


def test_a_choice_by_words_alone_quotes_one_more_sentence_outside_english() -> None:
    german = (
        "Montags fährt die Fähre schon früh vom Hafen ab. Dienstags verlässt die Fähre den Hafen erst mittags. "
        "Mittwochs bleibt die Fähre wegen Wartung im Hafen. Donnerstags legt die Fähre abends am Hafen an. "
        "Freitags wartet die Fähre im Hafen auf Lastwagen. Samstags füllt sich die Fähre im Hafen mit Touristen."
    )
    english = (
        "On Mondays the ferry leaves the harbour early. On Tuesdays the ferry leaves the harbour at noon. "
        "On Wednesdays the ferry stays in the harbour for repairs. On Thursdays the ferry reaches the harbour late. "
        "On Fridays the ferry waits in the harbour for lorries. On Saturdays the ferry fills with tourists in the harbour."
    )
    assert len(_picked("Wann ist die Fähre im Hafen?", german)) == 4
    assert len(_picked("When is the ferry in the harbour?", english)) == 3


def test_a_chinese_answer_streams_a_few_characters_at_a_time() -> None:
    passages = [_passage("礼品卡一律不予退款，也不能兑换现金。运费由客户承担，除非商品在运输途中损坏。")]

    async def run() -> list[str]:
        request = GenerationRequest(
            messages=[{"role": "user", "content": "礼品卡可以退款吗？"}],
            passages=passages,
            question="礼品卡可以退款吗？",
        )
        return [e.text async for e in ExtractiveGenerator().stream(request) if isinstance(e, TextDelta)]

    deltas = asyncio.run(run())
    text = "".join(deltas)
    assert text.startswith("礼品卡一律不予退款，也不能兑换现金。 [Source 1]")
    assert len(deltas) > 10 and all(len(d.strip()) <= 10 for d in deltas)
