"""Language-aware keyword analysis: detection, CJK bigrams, per-language stems, and English unchanged."""

from __future__ import annotations

import re

import pytest
import Stemmer

from calypso.retrieval.bm25 import BM25Index
from calypso.services.ingestion import Upload
from calypso.text.languages import detect
from calypso.text.tokenize import DEFAULT_ANALYZER, STOPWORDS_EN, Analyzer, tokenize


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("客户可在购买后30天内申请全额退款。礼品卡一律不予退款。", "zh"),
        ("東京は日本の首都です。", "ja"),
        ("환불은 구매 후 30일 이내에 신청할 수 있습니다.", "ko"),
        ("Kunden können innerhalb von 30 Tagen nach dem Kauf eine Rückerstattung beantragen.", "de"),
        ("Les clients peuvent demander un remboursement dans les 30 jours suivant leur achat.", "fr"),
        ("Los clientes pueden solicitar un reembolso dentro de los 30 días posteriores a la compra.", "es"),
        ("Клиенты могут запросить возврат в течение 30 дней после покупки.", "ru"),
        ("يمكن للعملاء طلب استرداد المبلغ خلال 30 يومًا من الشراء", "ar"),
        ("לקוחות יכולים לבקש החזר תוך 30 יום מהרכישה", "he"),
        ("ग्राहक खरीद के 30 दिनों के भीतर धनवापसी का अनुरोध कर सकते हैं", "hi"),
        ("Khách hàng có thể yêu cầu hoàn tiền trong vòng 30 ngày kể từ ngày mua.", "vi"),
        ("Customers may request a full refund within 30 days of purchase.", "en"),
        # A short English claim naming IL-6 or "pro-" is not Italian or Czech.
        ("IL-6 signaling plays a major role in atherosclerotic cardiovascular disease.", "en"),
        ("Primary pro-inflammatory cytokines suppress secondary pro- and anti-inflammatory mediators.", "en"),
    ],
)
def test_detects_the_language_of_a_text(text: str, language: str) -> None:
    assert detect(text) == language
    assert DEFAULT_ANALYZER.analyze(text)[0] == language


def test_a_text_too_short_to_tell_takes_the_fallback() -> None:
    assert detect("Berlin 1949") == "en"
    assert detect("Berlin 1949", fallback="de") == "de"


def test_cjk_runs_become_character_bigrams_and_numbers_and_names_stay_words() -> None:
    assert sorted(tokenize("客户可在购买后30天内申请全额退款")) == sorted(
        [
            *("客户", "户可", "可在", "在购", "购买", "买后"),
            "30",
            *("天内", "内申", "申请", "请全", "全额", "额退", "退款"),
        ]
    )  # a bag of terms: BM25 counts, it does not read in order
    assert "refund" in tokenize("礼品卡 refunds 不予退款")  # an English word in Chinese text is stemmed as English
    assert tokenize("礼") == ["礼"]  # a lone character is a unigram


def test_full_width_letters_and_digits_fold_as_nfkc_does() -> None:
    assert tokenize("ＡＢＣ１２３") == tokenize("abc123") == ["abc123"]
    assert tokenize("退款３０天") == tokenize("退款30天")


def test_other_languages_use_their_own_stemmer_and_stop_words() -> None:
    assert tokenize("Die Rückerstattungen werden innerhalb von dreißig Tagen bearbeitet") == [
        Stemmer.Stemmer("german").stemWord(w)
        for w in ("rückerstattungen", "innerhalb", "dreißig", "tagen", "bearbeitet")
    ]
    # Devanagari vowel signs are combining marks that \w misses: the word stays whole.
    assert tokenize("हिन्दी भाषा") == [Stemmer.Stemmer("hindi").stemWord(w) for w in ("हिन्दी", "भाषा")]


def test_english_analysis_is_what_it_was() -> None:
    """The a1 pipeline: ``\\w+`` lowercased, Lucene's stop set, Snowball English (SciFact was tuned on it)."""
    english = Stemmer.Stemmer("english")
    text = "The refunds are processed within 30 days; naïve “quotes” and µ-opioid receptors (IL-6) matter."
    old = [english.stemWord(w) for w in re.findall(r"\w+", text.lower()) if len(w) > 1 and w not in STOPWORDS_EN]
    assert tokenize(text) == old


def test_a_query_too_short_to_tell_is_analysed_in_the_index_s_most_common_language() -> None:
    german = [
        "Die Hauptstadt von Deutschland ist Berlin, und sie hat mehr als drei Millionen Einwohner.",
        "Der Rhein ist einer der längsten Flüsse in Europa und fließt durch mehrere Länder.",
    ] * 8
    index = BM25Index()
    index.add_many((i, [(i, text)]) for i, text in enumerate(german))
    assert index.query_language() == "de"
    # "Flüssen" alone says no language; analysed as German it stems like "Flüsse" in the passages.
    assert index.search("Flüssen", k=1)[0][0] % 2 == 1


def test_extra_stopwords_also_apply_to_other_languages() -> None:
    plain, extra = Analyzer(stopwords={"berlin"}), Analyzer(stopwords={"berlin"}, extra_stopwords=True)
    german = "Die Stadt Berlin ist die Hauptstadt und die größte Stadt von Deutschland."
    assert "berlin" in plain.tokenize(german) and "berlin" not in extra.tokenize(german)


@pytest.mark.parametrize(
    "text",
    [
        "客" * 1_000_000,  # a 1 MB line of Chinese without punctuation
        "混合 scripts в одном 文 sentence 😀 עברית عربي",
        "😀" * 1000,
        "\u200f\u202e" + "مرحبا" * 1000,
        "Ã©Ã¨" * 1000,  # UTF-8 read as cp1252
        "\udcff broken surrogate",
    ],
)
def test_odd_text_is_analysed_without_loss_or_error(text: str) -> None:
    language, terms = DEFAULT_ANALYZER.analyze(text)
    assert isinstance(language, str)
    if text.startswith("客"):
        assert len(terms) == len(text) - 1  # every character is in a bigram


def test_an_index_built_from_stored_terms_knows_its_passages_language(settings) -> None:  # type: ignore[no-untyped-def]
    from calypso.services import open_services

    german = "Die Hauptstadt von Deutschland ist Berlin, und sie hat mehr als drei Millionen Einwohner."
    services = open_services(settings)
    try:
        for n in range(3):
            services.ingestion.ingest(Upload(f"{german} Absatz {n}.".encode(), f"de{n}.txt", "general"))
    finally:
        services.close()
    services = open_services(settings)  # a restart: the index is built from the stored terms alone
    try:
        assert services.search.index("general").query_language() == "de"
    finally:
        services.close()


def test_query_analysis_keeps_words_with_combining_marks_whole() -> None:
    from calypso.retrieval.query import keyword_query

    # "\\w+" cut "डिफ़ेंस" into letters, and the letters then matched nothing the passages indexed.
    assert keyword_query("पैंथर्स डिफ़ेंस ने कितने अंक दिए?") == "पैंथर्स डिफ़ेंस ने कितने अंक दिए"


def test_a_spanish_question_is_told_by_its_opening_mark() -> None:
    # Its words are Italian, Portuguese and Catalan too; only Spanish opens a question with "¿".
    question = "¿Con qué frecuencia se debe revisar la fianza del fideicomisario permanente?"
    assert detect(question, "") == "es"
    assert detect(question.lstrip("¿"), "") == ""
