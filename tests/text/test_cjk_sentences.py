"""CJK sentence ends (issue 22): 。！？ and their kin end a sentence with the quotes and brackets that
close it; a semicolon does not; mixed scripts, emoji and right-to-left text split without loss."""

from __future__ import annotations

import pytest

from calypso.text.sentences import sentence_spans


def _split(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("他说：“你好。”然后走了。", ["他说：“你好。”", "然后走了。"]),
        ("「退款吗？」她问。『好！』", ["「退款吗？」", "她问。", "『好！』"]),
        ("第一条；第二条；第三条。下一句。", ["第一条；第二条；第三条。", "下一句。"]),
        ("本当ですか？！はい。", ["本当ですか？！", "はい。"]),
        ("환불이 되나요? 네, 됩니다.", ["환불이 되나요?", "네, 됩니다."]),
        ("退款（三十天内）。礼品卡除外。", ["退款（三十天内）。", "礼品卡除外。"]),
        ("価格は5円。😀 次の文！", ["価格は5円。", "😀 次の文！"]),
    ],
)
def test_cjk_sentence_ends(text: str, sentences: list[str]) -> None:
    assert _split(text) == sentences


def test_mixed_scripts_and_right_to_left_text_lose_nothing() -> None:
    text = "مرحبا بالعالم. Hello 世界！ שלום עולם? Привет. 👨‍👩‍👧 done"
    spans = sentence_spans(text)
    kept = "".join(text[a:b] for a, b in spans)
    assert "".join(text.split()) == "".join(kept.split())
    assert len(spans) == 5
