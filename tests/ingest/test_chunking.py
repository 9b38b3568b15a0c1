from __future__ import annotations

import random

import pytest

from calypso.ingest.chunking import chunk_document
from calypso.models import Heading, Page, ParsedDocument


def _doc(text: str, pages: list[Page] | None = None, headings: list[Heading] | None = None) -> ParsedDocument:
    return ParsedDocument(text=text, pages=pages or [Page(1, "1", 0, len(text))], headings=headings or [])


def _covered(text: str, chunks) -> set[int]:
    covered: set[int] = set()
    for chunk in chunks:
        covered.update(range(chunk.start, chunk.end))
    return covered


def test_chunks_are_whole_sentences_at_exact_offsets() -> None:
    # Every sentence is 27-40 characters and any two exceed size=40, so each chunk is exactly
    # one sentence. A split inside a sentence would start the next chunk with its tail (it
    # fits in overlap=26); a missed split would make a unit over 40 characters, cut at a space.
    sentences = [
        "Approx. three items, e.g. apples.",
        "Dr. Smith wrote No. 5 in the U.S.",
        "Then it cost 3.14 or 1,000.5 EUR.",
        "It was built in the 18th century.[83]",
        'He said "no." to Mr. Jones twice.',
        "Mr. Jones read Fig. 3 on p. 12.",
    ]
    text = " ".join(sentences[:3]) + "\n\n" + " ".join(sentences[3:])
    chunks = chunk_document(_doc(text), size=40, overlap=26)
    assert [(c.start, c.end) for c in chunks] == [(0, 33), (34, 67), (68, 101), (103, 140), (141, 174), (175, 206)]
    assert [c.text for c in chunks] == sentences


@pytest.mark.parametrize("seed", range(5))
def test_chunks_cover_every_non_space_character(seed: int) -> None:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "Epsilon", "zeta.", "Eta!", "theta?", "\n\n", "x" * 120]
    text = " ".join(rng.choice(words) for _ in range(3000))
    chunks = chunk_document(_doc(text), size=500, overlap=80)
    covered = _covered(text, chunks)
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and i not in covered]
    assert missing == []
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]
        assert len(chunk.text) <= 500 + 1


def test_chunks_end_on_sentence_boundaries_and_overlap() -> None:
    sentences = [f"Sentence number {i} talks about topic {i % 7}." for i in range(200)]
    text = " ".join(sentences)
    chunks = chunk_document(_doc(text), size=400, overlap=100)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.text.startswith("Sentence number") and chunk.text.endswith(".")
    overlapping = sum(1 for a, b in zip(chunks, chunks[1:]) if b.start < a.end)
    assert overlapping == len(chunks) - 1


def test_page_span_and_labels() -> None:
    page_texts = ["Preface text is here. " * 30, "Body starts. " * 60, "More body text. " * 40]
    text = ""
    pages = []
    labels = ["iv", "1", "2"]
    for number, (body, label) in enumerate(zip(page_texts, labels), start=1):
        start = len(text)
        text += body + "\n\n"
        pages.append(Page(number, label, start, len(text)))
    chunks = chunk_document(_doc(text, pages), size=600, overlap=0)
    assert chunks[0].page_start == 1 and chunks[0].page_labels[0] == "iv"
    assert chunks[-1].page_end == 3 and chunks[-1].page_labels[-1] == "2"
    for chunk in chunks:
        for number in range(chunk.page_start, chunk.page_end + 1):
            page = pages[number - 1]
            assert page.start < chunk.end and chunk.start < page.end
        assert chunk.page_labels == tuple(labels[chunk.page_start - 1 : chunk.page_end])


def test_heading_path_and_heading_starts_new_chunk() -> None:
    text = (
        "# Guide\n\nIntro sentence here. " * 1
        + "\n\n## Refunds\n\n"
        + "Refunds take time. " * 20
        + "\n\n## Shipping\n\n"
        + "Ships fast. " * 20
    )
    headings = [
        Heading(1, "Guide", 0),
        Heading(2, "Refunds", text.index("## Refunds")),
        Heading(2, "Shipping", text.index("## Shipping")),
    ]
    chunks = chunk_document(_doc(text, headings=headings), size=300, overlap=0)
    shipping = [c for c in chunks if c.text.startswith("## Shipping")]
    assert shipping, [c.text[:20] for c in chunks]
    assert shipping[0].heading_path == ("Guide", "Shipping")
    refunds = [c for c in chunks if "Refunds take time" in c.text]
    # The first starts with the guide's intro and runs into Refunds: its own path is where it starts (this
    # expected Refunds, the section most of it is in, until issue 42); its Refunds text is still under Refunds.
    first = refunds[0]
    assert first.text.startswith("# Guide") and first.heading_path == ("Guide",)
    assert first.heading_path_at(first.text.index("Refunds take time")) == ("Guide", "Refunds")
    assert refunds[1:] and all(c.heading_path == ("Guide", "Refunds") for c in refunds[1:])


POLICY = (
    "# Policy\n\n## Eligibility\n\n"
    + "Refunds are possible within thirty days. " * 6
    + "Gift cards are never refundable.\n\n## How to request\n\n"
    + "Open the order and choose the refund button. " * 6
)


def _policy_headings(text: str) -> list[Heading]:
    return [
        Heading(1, "Policy", 0),
        Heading(2, "Eligibility", text.index("## Eligibility")),
        Heading(2, "How to request", text.index("## How to request")),
    ]


def test_a_passage_that_starts_inside_a_section_is_that_sections_not_the_next() -> None:
    """A passage that begins with the end of one section and runs on into the next (most of it there) takes
    the heading where it starts; its quotes are still located by the heading above each."""
    chunks = chunk_document(_doc(POLICY, headings=_policy_headings(POLICY)), size=300, overlap=120)
    spanning = [c for c in chunks if "Gift cards" in c.text and "## How to request" in c.text]
    assert spanning, [c.text[:30] for c in chunks]
    for chunk in spanning:
        assert not chunk.text.startswith("#")
        body = chunk.text.index("## How to request")
        assert len(chunk.text) - body > body, "most of the passage is in the second section"
        assert chunk.heading_path == ("Policy", "Eligibility")
        assert chunk.heading_path_at(chunk.text.index("Gift cards")) == ("Policy", "Eligibility")
        assert chunk.heading_path_at(chunk.text.index("Open the order")) == ("Policy", "How to request")


def test_headings_that_open_a_passage_are_in_force_for_it() -> None:
    """A passage that opens with its headings ("# Policy", "## Eligibility", then the body) is in the
    innermost of them, not in the bare title the first line is."""
    chunks = chunk_document(_doc(POLICY, headings=_policy_headings(POLICY)), size=2000, overlap=0)
    assert len(chunks) == 1 and chunks[0].heading_path == ("Policy", "Eligibility")
    only_title = "# Policy\n\nRefunds are possible within thirty days.\n\n## Later\n\nLater words here."
    headings = [Heading(1, "Policy", 0), Heading(2, "Later", only_title.index("## Later"))]
    (chunk,) = chunk_document(_doc(only_title, headings=headings), size=2000, overlap=0)
    assert chunk.heading_path == ("Policy",)


def test_empty_and_whitespace_text_gives_no_chunks() -> None:
    assert chunk_document(_doc("   \n\n  ")) == []


def test_a_passage_carries_its_recognised_pages_confidence_weighted_by_their_text() -> None:
    first, second = "Scanned words here. " * 3, "More scanned words. " * 1
    text = first + second
    pages = [
        Page(1, "1", 0, len(first), modality="ocr", confidence=0.9),
        Page(2, "2", len(first), len(text), modality="ocr", confidence=0.5),
    ]
    (chunk,) = chunk_document(_doc(text, pages), size=1000)
    expected = (0.9 * len(first) + 0.5 * (chunk.end - len(first))) / chunk.end  # the passage's own text only
    assert chunk.modality == "ocr" and chunk.confidence == pytest.approx(expected, abs=1e-4)
    mixed = [Page(1, "1", 0, len(first)), Page(2, "2", len(first), len(text), modality="ocr", confidence=0.5)]
    assert chunk_document(_doc(text, mixed), size=1000)[0].confidence == 0.5  # extracted text has no say
    assert chunk_document(_doc(text), size=1000)[0].confidence is None
