"""Chunking Chinese, Japanese, Korean and mixed-script text (issue 22): passage sizes by content
units, long sentences cut at CJK punctuation or between characters, nothing lost on hostile input."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from calypso.ingest import chunking
from calypso.ingest.chunking import chunk_document
from calypso.ingest.parsers import markdown, text
from calypso.ingest.tokens import count_tokens
from calypso.models import Page, ParsedDocument
from calypso.text import cjk
from calypso.text.cjk import content_length
from calypso.text.sentences import sentence_spans
from calypso.text.tokenize import Analyzer

# Five paragraphs of a Chinese refund policy, ~110 characters each (550 in all: under 1,000 code points).
ZH_PARAGRAPHS = [
    "客户可在购买后三十天内申请全额退款，无需说明理由。退款将在收到退货后的五个工作日内退回原支付账户。"
    "如果商品已经拆封，我们仍然接受退货，但需要保留全部配件和原包装，否则可能扣除部分费用。",
    "礼品卡一律不予退款，也不能兑换现金。礼品卡余额可以在有效期内多次使用，有效期为自购买之日起三年。"
    "遗失的礼品卡无法补办，请像保管现金一样妥善保管您的礼品卡，并尽早登记卡号以便查询余额。",
    "运费由客户承担，除非商品在运输途中损坏或我们发错了商品。损坏的商品请在签收后四十八小时内拍照联系我们。"
    "我们核实之后会免费补发同款商品，或者按照您的要求全额退款，并承担往返的全部运费。",
    "定制商品一经生产即不接受退换，因为它们是按照您的要求专门制作的。下单前请仔细核对尺寸和刻字内容。"
    "如对定制内容有疑问，可以在下单后二十四小时内联系客服修改，生产开始后将无法再做任何更改。",
    "会员在退款时享有优先处理，通常在两个工作日内完成。会员积分在退款后会相应扣除，已使用的积分不予返还。"
    "会员等级根据过去十二个月的消费总额计算，每月一日自动更新，升级后的权益立即生效。",
]


def _doc(body: str) -> ParsedDocument:
    return ParsedDocument(text=body, pages=[Page(1, "1", 0, len(body))])


def _uncovered(body: str, chunks) -> list[int]:
    covered = bytearray(len(body))
    for c in chunks:
        assert body[c.start : c.end] == c.text
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
    return [i for i, ch in enumerate(body) if not covered[i] and not ch.isspace()]


def test_english_lengths_are_code_points() -> None:
    sample = "Refunds within 30 days — “no questions asked”, naïve café."
    assert content_length(sample) == len(sample)
    assert content_length("退款") == 6 and content_length("환불") == 4 and content_length("ABC退") == 6


def test_a_five_paragraph_chinese_markdown_file_is_several_passages() -> None:
    body = "# 退款政策\n\n" + "\n\n".join(f"## 第{i + 1}条\n\n{p}" for i, p in enumerate(ZH_PARAGRAPHS))
    parsed = markdown.parse(body.encode("utf-8"), "policy.md")
    assert len(parsed.text) < 1000  # one passage when counted in code points
    chunks = chunk_document(parsed, size=1000, overlap=150)
    assert len(chunks) >= 3
    assert all(content_length(c.text) <= 1000 for c in chunks)
    assert not _uncovered(parsed.text, chunks)
    gift = next(c for c in chunks if "礼品卡一律不予退款" in c.text)
    assert gift.heading_path[0] == "退款政策" and len(gift.heading_path) == 2


def test_a_long_chinese_sentence_is_cut_after_a_comma() -> None:
    sentence = "，".join(["这是一个没有句号的很长的分句"] * 80) + "。"  # 1,200 characters, one sentence
    chunks = chunk_document(_doc(sentence), size=300, overlap=0)
    assert len(chunks) > 10
    assert all(content_length(c.text) <= 300 for c in chunks)
    assert all(c.text.endswith(("，", "。")) for c in chunks)
    assert not _uncovered(sentence, chunks)


def test_a_megabyte_line_of_chinese_without_punctuation() -> None:
    rng = random.Random(7)
    line = "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(350_000))  # ~1 MB of UTF-8
    assert len(line.encode("utf-8")) > 1_000_000
    assert sentence_spans(line) == [(0, len(line))]
    chunks = chunk_document(_doc(line), size=1000, overlap=150)
    assert all(content_length(c.text) <= 1000 for c in chunks)
    assert len(chunks) >= len(line) * 3 // 1000
    assert not _uncovered(line, chunks)
    language, terms = Analyzer().analyze(line)
    assert language == "zh" and len(terms) == len(line) - 1  # one bigram per pair of characters


def test_cutting_a_cjk_line_is_linear(monkeypatch) -> None:
    # The work is counted, not timed: the characters the cutter weighs, for a line and one twice as long.
    calls = 0
    real = cjk.char_units

    def counting(ch: str) -> int:
        nonlocal calls
        calls += 1
        return real(ch)

    monkeypatch.setattr(cjk, "char_units", counting)
    work = []
    for n in (20_000, 40_000):
        calls = 0
        list(chunking._split_long(0, n, "字" * n, 900))
        work.append(calls)
    assert 20_000 * 0.9 <= work[0] <= 20_000 * 1.1  # each character weighed about once
    assert work[1] <= 2.1 * work[0]


def test_static_token_chunks_count_cjk_characters() -> None:
    body = "".join(ZH_PARAGRAPHS)
    assert count_tokens("礼品卡一律不予退款") == 9
    chunks = chunk_document(_doc(body), size=100, overlap=0, measure="tokens")
    assert len(chunks) >= len(body) // 100
    assert all(count_tokens(c.text) <= 100 for c in chunks)
    assert not _uncovered(body, chunks)


HOSTILE = [
    "Der Preis ist 5€ 😀 und 退款 ist möglich. مرحبا بالعالم! שלום עולם. Привет, мир!",
    "👨‍👩‍👧‍👦" * 3000,  # emoji with zero-width joiners, no space
    "مرحبا بكم في متجرنا. " * 400 + "\u200f\u202e" * 50,  # Arabic with direction marks
    "עברית ללא נקודה " * 500,
    "日本語の文章です。カタカナとひらがな、そして漢字！한국어 문장입니다? 混在する文。",
]


def test_hostile_text_is_chunked_split_and_analysed_without_loss() -> None:
    for body in HOSTILE:
        chunks = chunk_document(_doc(body), size=400, overlap=60)
        assert chunks and not _uncovered(body, chunks), body[:40]
        assert all(content_length(c.text) <= 400 for c in chunks)
        spans = sentence_spans(body)
        assert "".join(body[s:e] for s, e in spans).split() != []
        Analyzer().analyze(body)


def test_text_mislabelled_by_its_charset_is_kept() -> None:
    # Bytes of one encoding that read as another (GBK cut mid-character, Latin-1 read as CJK, UTF-8 with
    # stray bytes) decode to something, and that is chunked whole (nothing dropped), never a crash.
    broken = ("礼品卡一律不予退款。" * 50).encode("gbk")[1:] + "naïve".encode("latin-1")
    for data in broken, ("日本語の文章です。" * 50).encode("utf-8")[:-1] + b"\xff", bytes(range(0x80, 0x100)) * 20:
        parsed = text.parse(data, "policy.txt")
        assert parsed.text
        chunks = chunk_document(parsed, size=300, overlap=50)
        assert not _uncovered(parsed.text, chunks)


_SCRIPTS = st.sampled_from(
    [
        "礼品卡不予退款",
        "，",
        "。",
        "」",
        "ひらがな",
        "한국어",
        " ",
        "\n",
        "\n\n",
        "abc",
        "Ünïcödé",
        "😀",
        "مرحبا",
        "שלום",
        ".",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_SCRIPTS, min_size=1, max_size=200), st.integers(min_value=8, max_value=200))
def test_any_mix_of_scripts_is_covered_within_size(pieces: list[str], size: int) -> None:
    body = "".join(pieces)
    chunks = chunk_document(_doc(body), size=size, overlap=size // 4)
    assert not _uncovered(body, chunks)
    # Only one unbreakable piece may exceed the size, and a CJK character is never unbreakable.
    for c in chunks:
        assert content_length(c.text) <= size or " " not in c.text.strip() and not cjk.has_cjk(c.text)


def test_legacy_cjk_encodings_are_read_as_cjk() -> None:
    samples = {
        "gbk": "礼品卡一律不予退款，也不能兑换现金。礼品卡余额可以在有效期内多次使用。",
        "big5": "禮品卡一律不予退款，也不能兌換現金。禮品卡餘額可以在有效期內多次使用。",
        "shift_jis": "ギフトカードは返金できません。現金との交換もできません。有効期限は三年です。",
        "euc_kr": "기프트 카드는 환불되지 않습니다. 현금으로 교환할 수도 없습니다. 유효 기간은 삼 년입니다.",
    }
    for encoding, body in samples.items():
        assert text.decode_text(body.encode(encoding), "policy.txt") == body, encoding
    # Western legacy text stays Windows-1252, as before.
    german = "Der Müller hat die Fähre um zwölf Uhr genommen. Café crème, naïve résumé – 5 €."
    assert text.decode_text(german.encode("cp1252"), "notes.txt") == german
