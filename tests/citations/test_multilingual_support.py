"""The support scorer and inferred citations on Chinese and German text (issue 22)."""

from __future__ import annotations

from urllib.parse import quote

from calypso.citations.inference import MIN_CONTENT_TERMS, content_terms
from calypso.citations.links import text_fragment
from calypso.citations.support import SUPPORT_THRESHOLD, _has_negation, _terms, best_evidence, support_score
from calypso.ingest.titles import plausible_title


def percent(text: str) -> str:
    return quote(text, safe="").replace("-", "%2D")


GIFT = "礼品卡一律不予退款，也不能兑换现金。礼品卡余额可以在有效期内多次使用。"
SHIPPING = "运费由客户承担，除非商品在运输途中损坏。损坏的商品请在签收后四十八小时内拍照联系我们。"


def test_chinese_terms_are_the_analyzers_bigrams_in_order() -> None:
    assert _terms("礼品卡退款") == ["礼品", "品卡", "卡退", "退款"]
    assert _terms("退") == ["退"]
    # English words inside Chinese text keep their English stems, in place.
    assert _terms("使用Refunds政策") == ["使用", "refund", "政策"]


def test_a_chinese_claim_is_supported_by_its_passage_only() -> None:
    claim = "礼品卡不予退款。"
    assert support_score(claim, GIFT) >= SUPPORT_THRESHOLD
    assert support_score(claim, SHIPPING) < SUPPORT_THRESHOLD
    assert best_evidence(claim, GIFT).text == "礼品卡一律不予退款，也不能兑换现金。"


def test_a_chinese_claim_that_drops_the_negation_scores_lower() -> None:
    assert _has_negation("礼品卡一律不予退款") and not _has_negation("礼品卡可以退款")
    assert support_score("礼品卡可以退款。", GIFT) < support_score("礼品卡不予退款。", GIFT)


def test_german_negation_counts_only_in_german_text() -> None:
    passage = "Die Fähre fährt jeden Tag um zwölf Uhr ab. Tickets kosten fünf Euro."
    assert _has_negation("Die Fähre fährt nicht um zwölf Uhr ab.")
    assert support_score("Die Fähre fährt nicht um zwölf Uhr ab.", passage) < support_score(
        "Die Fähre fährt um zwölf Uhr ab.", passage
    )
    # "pas" and "nie" in English text are not negations: English scores stay as fitted.
    assert not _has_negation("The pas de deux opens the second act of the ballet in Nie.")


def test_cjk_bigrams_count_two_to_a_content_word() -> None:
    assert content_terms("总结") < MIN_CONTENT_TERMS  # "Summary": one word, one bigram
    assert content_terms("是的。") < MIN_CONTENT_TERMS
    assert content_terms("礼品卡一律不予退款") >= MIN_CONTENT_TERMS  # 8 bigrams, ~4 words
    assert content_terms("Summary") == 1
    assert content_terms("The ferry leaves at noon every day.") == 5  # ferri leav noon everi day


def test_a_long_chinese_quote_links_by_its_ends() -> None:
    quote = "礼品卡一律不予退款，也不能兑换现金。礼品卡余额可以在有效期内多次使用。"
    assert text_fragment(quote) == ":~:text=" + percent("礼品卡一律不予退") + "," + percent(
        "可以在有效期内多次使用。"[-8:]
    )
    assert text_fragment("礼品卡不予退款。") == ":~:text=" + percent("礼品卡不予退款。")  # short: exact
    assert text_fragment("Ducks, geese & swans") == ":~:text=Ducks%2C%20geese%20%26%20swans"  # English as before


def test_a_chinese_title_is_a_title() -> None:
    assert plausible_title("退款政策") == "退款政策"
    assert plausible_title("report_final") is None  # one Latin token: an id or a file name, as before
    assert plausible_title("退") is None
