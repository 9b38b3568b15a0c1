"""Labels over composed answers: where each cited quote stands, in every dialect, and a source quoted in two places.

A source cited by quotes under two headings (or on two pages) has one "Sources:" line: it names every
distinct place, in order of citation, joined by "; " (docs/citations-chat.md). The chat ``citations`` entry's
``label`` is that line's text; its ``quote`` and page are the first quote's.
"""

from __future__ import annotations

from calypso.citations.composer import AnswerComposer
from calypso.citations.grounded import GroundedAnswer, Quote, Source
from calypso.dialects.chat import render_chat
from calypso.dialects.responses import RenderOptions, aicore_metadata
from calypso.dialects.text import render_evidence
from calypso.models import Chunk, Document, Passage, Section

ELIGIBILITY = "Gift cards are never refundable. "
REQUEST = "## How to request a refund\n\nOpen the order in your account and choose the refund button."
POLICY_TEXT = ELIGIBILITY + "\n\n" + REQUEST
PAGE_FOUR = "The dome opened in 1931. "
PAGE_FIVE = "The mirror measures 2.4 metres."
PDF_TEXT = PAGE_FOUR + PAGE_FIVE


def _sources() -> list[Source]:
    def document(number: int, filename: str, media: str, pages: int) -> Document:
        return Document(f"doc-{number}", f"file-{number}", "default", "general", filename, media, 10, "x", 0, pages, 3)

    # A Markdown passage that starts under "Eligibility" and runs into "How to request a refund".
    policy = Chunk(
        1,
        POLICY_TEXT,
        100,
        100 + len(POLICY_TEXT),
        1,
        1,
        ("1",),
        heading_path=("Refund Policy", "Eligibility"),
        sections=(
            Section(0, ("Refund Policy", "Eligibility")),
            Section(POLICY_TEXT.index("## How"), ("Refund Policy", "How to request a refund")),
        ),
    )
    pdf = Chunk(0, PDF_TEXT, 0, len(PDF_TEXT), 4, 5, ("4", "5"))
    unquoted = Chunk(2, "Shipping is free for damaged items.", 0, 35, 1, 1, ("1",), heading_path=("Shipping",))
    return [
        Source(1, Passage(document(1, "refund_policy.md", "text/markdown", 1), policy, 0.9)),
        Source(2, Passage(document(2, "observatory.pdf", "application/pdf", 6), pdf, 0.8)),
        Source(3, Passage(document(3, "shipping.md", "text/markdown", 1), unquoted, 0.7)),
    ]


# Each answer sentence names the words it quotes; the quote finder finds that sentence in the passage.
QUOTED = {
    "gift": "Gift cards are never refundable.",
    "order": "Open the order",
    "dome": "The dome",
    "mirror": "The mirror",
}


def _quote(segment_text: str, source: Source) -> Quote:
    text = source.passage.chunk.text
    key = next(k for k in QUOTED if k in segment_text.lower())
    start = text.index(QUOTED[key])
    stop = text.find(". ", start)  # a sentence's end ("2.4" is not one)
    end = len(text) if stop < 0 else stop + 1
    page = 5 if start >= len(PAGE_FOUR) and source.passage.has_pages else 4
    return Quote(text[start:end], start, end, start, end, page, str(page), 0.9, True)


def _answer(raw: str) -> GroundedAnswer:
    composer = AnswerComposer(_sources(), _quote)
    composer.feed(raw)
    composer.flush()
    return composer.finish(generator="test", knowledge_base=True, citations_enabled=True, retrieval_ran=True)


RAW = (
    "Gift cards cannot be refunded [Source 1]. Open the order to ask for one [Source 1]. "
    "The mirror is 2.4 metres wide [Source 2]. The dome dates from 1931 [Source 2]."
)
POLICY_LABEL = "refund_policy.md (Refund Policy › Eligibility; Refund Policy › How to request a refund)"
PDF_LABEL = "observatory.pdf (p. 5; p. 4)"  # in order of citation: the mirror on p. 5 is cited first


def test_a_source_quoted_in_two_places_names_both_on_its_one_line() -> None:
    answer = _answer(RAW)
    rendered = render_chat(answer, "numeric")
    assert rendered.content.endswith(f"\n\nSources:\n[1] {POLICY_LABEL}\n[2] {PDF_LABEL}")
    policy, pdf = rendered.citations or []
    assert (policy["label"], policy["quote"], policy["page_number"]) == (POLICY_LABEL, QUOTED["gift"], None)
    assert (pdf["label"], pdf["quote"], pdf["page_number"], pdf["page_label"]) == (
        PDF_LABEL,
        "The mirror measures 2.4 metres.",
        5,
        "5",
    )
    source_style = render_chat(answer, "source")
    assert [c["label"] for c in source_style.citations or []] == [POLICY_LABEL, PDF_LABEL]


def test_one_place_is_named_once() -> None:
    answer = _answer("Gift cards cannot be refunded [Source 1]. Really, gift cards cannot be refunded [Source 1].")
    assert render_chat(answer, "numeric").content.endswith(
        "\n\nSources:\n[1] refund_policy.md (Refund Policy › Eligibility)"
    )
    second = _answer("Open the order to ask for one [Source 1]. The mirror is 2.4 metres wide [Source 2].")
    rendered = render_chat(second, "numeric")
    # The passage starts under Eligibility and on p. 4: the quotes are under "How to request a refund", on p. 5.
    assert rendered.content.endswith(
        "\n\nSources:\n[1] refund_policy.md (Refund Policy › How to request a refund)\n[2] observatory.pdf (p. 5)"
    )


def test_responses_sources_name_the_quotes_and_an_unquoted_passage_its_own_place() -> None:
    answer = _answer(RAW)
    meta = aicore_metadata(answer, RenderOptions())
    by_number = {s["source_index"]: s for s in meta["grounded_sources"]}
    assert by_number[1]["label"] == POLICY_LABEL and "page_number" not in by_number[1]
    assert by_number[1]["locator_label"] == "Refund Policy › Eligibility; Refund Policy › How to request a refund"
    assert (by_number[2]["label"], by_number[2]["page_number"], by_number[2]["page_label"]) == (PDF_LABEL, 5, "5")
    assert by_number[3]["cited"] is False
    assert (by_number[3]["label"], by_number[3]["locator_label"]) == ("shipping.md (Shipping)", "Shipping")
    (items,) = [part["items"] for part in meta["ui"] if part["type"] == "sources"]
    assert [item["label"] for item in items] == [POLICY_LABEL, PDF_LABEL]
    assert meta["display_text"].endswith(f"\n\nSources:\n[1] {POLICY_LABEL}\n[2] {PDF_LABEL}")


def test_the_evidence_list_gives_each_quote_its_own_place() -> None:
    evidence = render_evidence(_answer(RAW))
    assert '"Gift cards are never refundable." (Refund Policy › Eligibility)' in evidence
    assert (
        '"Open the order in your account and choose the refund button." (Refund Policy › How to request a refund)'
        in (evidence)
    )
    assert '"The mirror measures 2.4 metres." (p. 5)' in evidence and '"The dome opened in 1931." (p. 4)' in evidence
