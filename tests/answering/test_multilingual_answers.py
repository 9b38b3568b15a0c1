"""The extractive answerer on a Chinese knowledge base (issue 22): the right sentence, cited, its
fixed phrases in the question's language, offsets exact in UTF-16 around CJK and emoji."""

from __future__ import annotations

import asyncio

import pytest

from calypso.citations.grounded import utf16_len
from calypso.generation import phrases
from calypso.scope import RetrievalScope
from calypso.services import Services
from calypso.services.answering import Answerer, AskRequest
from calypso.services.ingestion import Upload

POLICY = """# 退款政策 😀

## 退款期限

客户可在购买后三十天内申请全额退款，无需说明理由。退款将在收到退货后的五个工作日内退回原支付账户。

## 礼品卡

礼品卡一律不予退款，也不能兑换现金。礼品卡余额可以在有效期内多次使用，有效期为自购买之日起三年 🎁。

## 运费

运费由客户承担，除非商品在运输途中损坏。𠀋损坏的商品请在签收后四十八小时内拍照联系我们。
"""

SCOPE = RetrievalScope(namespaces=("zh",))


def _ask(services: Services, question: str, scope: RetrievalScope = SCOPE):
    request = AskRequest([{"role": "user", "content": question}], scope, generator="extractive")
    return asyncio.run(Answerer(services.documents, services.search).answer(request))


@pytest.fixture
def zh_kb(services: Services) -> Services:
    services.ingestion.ingest(Upload(POLICY.encode("utf-8"), "policy.md", "zh"))
    return services


def test_a_chinese_question_gets_the_sentence_that_answers_it(zh_kb: Services) -> None:
    answer = _ask(zh_kb, "礼品卡可以退款吗？")
    assert "礼品卡一律不予退款" in answer.text
    assert "运费由客户承担" not in answer.text  # the wrong answer: the shipping-cost sentence
    cited = [s for s in answer.segments if s.citations]
    assert cited
    by_number = {source.retrieval_number: source.passage.chunk.text for source in answer.sources}
    for segment in cited:
        for c in segment.citations:
            assert by_number[c.retrieval_number][c.quote.passage_start : c.quote.passage_end] == c.quote.text


def test_offsets_are_exact_in_utf16_around_cjk_and_emoji(zh_kb: Services) -> None:
    answer = _ask(zh_kb, "礼品卡的有效期是多久？")
    assert "🎁" in answer.text  # an astral character before the segment's end
    assert answer.segments
    for segment in answer.segments:
        assert answer.text[segment.start : segment.end] == segment.text
        assert segment.start_utf16 == utf16_len(answer.text[: segment.start])
        assert segment.end_utf16 == utf16_len(answer.text[: segment.end])
    assert (
        answer.text.encode("utf-16-le")[2 * answer.segments[-1].start_utf16 :]
        .decode("utf-16-le")
        .startswith(answer.segments[-1].text)
    )


@pytest.mark.parametrize(
    ("question", "language"),
    [
        ("量子色动力学中的夸克禁闭是怎么回事？", "zh"),
        ("Wie funktioniert die Quantenchromodynamik und was ist das Confinement?", "de"),
        ("Comment fonctionne la chromodynamique quantique et qu'est-ce que le confinement ?", "fr"),
        ("¿Cómo funciona la cromodinámica cuántica y qué es el confinamiento?", "es"),
    ],
)
def test_not_found_is_said_in_the_question_language(zh_kb: Services, question: str, language: str) -> None:
    answer = _ask(zh_kb, question)
    assert answer.text == phrases.not_found(language)
    assert not any(s.citations for s in answer.segments)


@pytest.mark.parametrize(
    ("question", "language"),
    [("礼品卡可以退款吗？", "zh"), ("ギフトカードは返金できますか？", "ja"), ("기프트 카드는 환불이 되나요?", "ko")],
)
def test_no_knowledge_base_is_said_in_the_question_language(services: Services, question: str, language: str) -> None:
    answer = _ask(services, question, RetrievalScope(namespaces=()))
    assert answer.text == phrases.no_knowledge_base(language)
    assert answer.text != phrases.no_knowledge_base("en")


def test_hostile_documents_are_answered_from_and_lose_nothing(services: Services) -> None:
    # A megabyte line of Chinese without punctuation, mixed scripts, emoji and right-to-left text.
    line = "".join(chr(0x4E00 + (i * 7919) % 20900) for i in range(350_000)) + "礼品卡一律不予退款"
    mixed = (
        "Der Preis ist 5€ 😀 und 退款 ist möglich. سياسة الاسترداد: ثلاثون يومًا. מדיניות החזרים: שלושים יום. "
        "Refunds take 👨‍👩‍👧 five days."
    )
    for name, body in (("line.txt", line), ("mixed.txt", mixed)):
        document = services.ingestion.ingest(Upload(body.encode("utf-8"), name, "hostile")).document
        covered = bytearray(len(body))
        after = None
        while True:  # every stored chunk, page by page
            listing = services.storage.documents.list_chunks(document.workspace, document.id, 500, after)
            for stored in listing.items:
                c = stored.chunk
                assert body[c.start : c.end] == c.text
                covered[c.start : c.end] = b"\x01" * (c.end - c.start)
            if not listing.has_more:
                break
            after = listing.items[-1].chunk.chunk_index
        assert all(covered[i] or ch.isspace() for i, ch in enumerate(body))
    scope = RetrievalScope(namespaces=("hostile",))
    answer = _ask(services, "礼品卡一律不予退款吗？", scope)
    assert "礼品卡一律不予退款" in answer.text and any(s.citations for s in answer.segments)
    answer = _ask(services, "מדיניות החזרים? 😀", scope)  # Hebrew, right to left, with an emoji
    assert "מדיניות החזרים" in answer.text and answer.segments
    for segment in answer.segments:
        assert segment.start_utf16 == utf16_len(answer.text[: segment.start])
    # A megabyte question is read up to its first few thousand characters, and answered.
    answer = _ask(services, line, scope)
    assert answer.text


def test_one_shared_bigram_is_not_an_answer(zh_kb: Services) -> None:
    # "客户" (customer) is in the policy; baking baguettes is not.
    answer = _ask(zh_kb, "客户在家里如何烤制法式长棍面包？")
    assert answer.text == phrases.not_found("zh")
    assert not any(s.citations for s in answer.segments)
