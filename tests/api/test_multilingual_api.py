"""A Chinese knowledge base over the API (issue 22): the answer in Chinese, offsets a JavaScript
client can slice with (UTF-16, around CJK and astral characters), in Responses and Chat Completions."""

from __future__ import annotations

import pytest

from calypso.services.ingestion import Upload

POLICY = (
    "# 退款政策 😀\n\n## 礼品卡\n\n礼品卡一律不予退款，也不能兑换现金 🎁。礼品卡余额可以在有效期内多次使用，"
    "有效期为自购买之日起三年。\n\n## 运费\n\n运费由客户承担，除非商品在运输途中损坏。𠀋损坏的商品请在签收后"
    "四十八小时内拍照联系我们。\n"
)


def _utf16_slice(text: str, start: int, end: int) -> str:
    """What ``text.slice(start, end)`` gives in JavaScript."""
    return text.encode("utf-16-le")[2 * start : 2 * end].decode("utf-16-le")


@pytest.fixture
def zh_kb(kb):
    kb.ingest(Upload(POLICY.encode("utf-8"), "policy.md"))
    return kb


def test_responses_offsets_in_utf16_slice_the_segment(zh_kb, openai_client) -> None:
    response = openai_client.responses.create(model="calypso-rag-agent", input="礼品卡可以退款吗？")
    message = next(item for item in response.output if item.type == "message")
    (content,) = message.content
    text = content.text
    assert "礼品卡一律不予退款" in text and "🎁" in text
    assert content.annotations
    for annotation in content.annotations:
        extra = annotation.model_extra
        core = extra["_aicore"]
        assert text[extra["start_index"] : extra["end_index"]] == core["segment_text"]
        assert _utf16_slice(text, core["segment_start_utf16"], core["segment_end_utf16"]) == core["segment_text"]
    # The emoji before the end makes the two numberings differ: the test would catch code points in UTF-16 fields.
    last = content.annotations[-1].model_extra
    assert last["_aicore"]["segment_end_utf16"] > last["end_index"]


def test_chat_completions_offsets_in_utf16(zh_kb, openai_client) -> None:
    completion = openai_client.chat.completions.create(
        model="calypso-rag-agent", messages=[{"role": "user", "content": "礼品卡可以退款吗？"}]
    )
    message = completion.choices[0].message
    assert "礼品卡一律不予退款" in message.content
    annotations = message.annotations or []
    assert annotations
    for annotation in annotations:
        span = annotation.url_citation
        core = annotation.model_extra["_aicore"]
        assert (
            _utf16_slice(message.content, core["start_index_utf16"], core["end_index_utf16"])
            == (message.content[span.start_index : span.end_index])
        )


def test_not_found_in_the_question_language_over_the_api(zh_kb, openai_client) -> None:
    response = openai_client.responses.create(model="calypso-rag-agent", input="量子色动力学中的夸克禁闭是怎么回事？")
    assert response.output_text == "我在知识库中没有找到与此相关的内容。"
