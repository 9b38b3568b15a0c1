"""Where a citation points: DOCX and HTML passages by heading path (never "p. 1"), the quote in the viewer."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import httpx
import pytest

from calypso.citations.links import text_fragment
from calypso.generation.prompts import format_sources
from calypso.services.ingestion import Upload

HANDBOOK = "ingestion-docs/docx/doj-ust-chapter13-trustee-handbook-872p.docx"
DUCK = "ingestion-docs/html/wiki_duck.html"


@pytest.fixture
def located_kb(kb, searcher, data_dir: Path):
    """The search service over the handbook, the duck page and a transcript."""
    for name in (HANDBOOK, DUCK, "ingestion-docs/pdf/scotus-transcript-p1.pdf"):
        path = data_dir / name
        kb.ingest(Upload(path.read_bytes(), path.name))
    return searcher


def _message(response):
    return next(item for item in response.output if item.type == "message")


@pytest.mark.parametrize(
    ("query", "filename"),
    [
        ("standing trustee compensation percentage fee", Path(HANDBOOK).name),
        ("mallard ducks dabbling feeding", Path(DUCK).name),
    ],
)
def test_docx_and_html_passages_are_located_by_heading_path(located_kb, query: str, filename: str) -> None:
    passages = [
        p for p in located_kb.search(query, located_kb.scope(max_results=10)) if p.document.filename == filename
    ]
    assert passages
    for passage in passages:
        assert passage.chunk.heading_path, "the real documents have headings above every passage searched here"
        path = " › ".join(passage.chunk.heading_path)
        assert passage.locator_label == path
        assert passage.display_label == f"{filename} ({path})"
        assert "p. 1" not in passage.display_label
    header = format_sources(passages[:1]).splitlines()[1]
    assert header == f"[Source 1] {filename} ({' › '.join(passages[0].chunk.heading_path)})"


def test_pdf_passages_keep_their_page(located_kb) -> None:
    (passage,) = [
        p for p in located_kb.search("Mirzayance oral argument", located_kb.scope(max_results=5)) if p.has_pages
    ][:1]
    assert passage.locator_label == f"p. {passage.chunk.page_labels[0]}"


def test_search_and_responses_show_no_invented_page(located_kb, http, openai_client) -> None:
    hits = http.post("/v1/search", json={"query": "standing trustee compensation percentage fee"}).json()["data"]
    docx_hits = [h for h in hits if h["filename"].endswith(".docx")]
    assert docx_hits
    for hit in docx_hits:
        attributes = hit["attributes"]
        assert "page_number" not in attributes and "page_label" not in attributes
        assert attributes["locator_label"] == " › ".join(attributes["heading_path"])

    response = openai_client.responses.create(
        model="calypso-rag-agent", input="What is the standing trustee compensation?", include=["inline_citations"]
    )
    search = next(item for item in response.output if item.type == "file_search_call")
    for result in search.results:
        if result.filename.endswith((".docx", ".html")):
            assert "p. " not in result.attributes["label"] and "page_number" not in result.attributes
    meta = response.metadata["_aicore"]
    assert all("(p. 1)" not in s["label"] for s in meta["grounded_sources"] if s["filename"].endswith(".docx"))
    annotations = _message(response).content[0].annotations
    assert annotations
    for annotation in annotations:
        aicore = annotation.model_extra["_aicore"]
        if annotation.filename.endswith(".docx"):
            assert aicore["page_number"] is None and aicore["page_label"] is None
            assert aicore["locator_label"] and not aicore["locator_label"].startswith("p.")
    assert "(p. 1)" not in meta["display_text"]


def test_html_citation_links_open_the_quote_in_the_viewer(located_kb, openai_client) -> None:
    response = openai_client.responses.create(
        model="calypso-rag-agent",
        input="What do ducks eat?",
        include=["inline_citations"],
        tools=[{"type": "file_search", "vector_store_ids": ["general"], "max_num_results": 3}],
    )
    search = next(item for item in response.output if item.type == "file_search_call")
    passages = {r.attributes["source_index"]: r.text for r in search.results}
    html = [a for a in _message(response).content[0].annotations if a.filename == Path(DUCK).name]
    assert html
    for annotation in html:
        # An uploaded web page: the passage viewer marks the quote (a crawled page keeps its own URL and
        # a text fragment: tests/citations/test_links.py).
        aicore = annotation.model_extra["_aicore"]
        assert "#" not in annotation.url
        assert f"&quote_start={aicore['quote_start']}&quote_end={aicore['quote_end']}" in annotation.url
        viewer = httpx.get(annotation.url)
        marked = re.search(r'<mark id="quote">(.*?)</mark>', viewer.text, re.S)
        passage = passages[aicore["source_index"]]
        assert marked and unescape(marked.group(1)) == passage[aicore["quote_start"] : aicore["quote_end"]]


def test_text_fragment_encoding_per_spec() -> None:
    assert text_fragment("Ducks, geese & swans") == ":~:text=Ducks%2C%20geese%20%26%20swans"
    assert text_fragment("a well-known duck") == ":~:text=a%20well%2Dknown%20duck"
    long = "The overall body plan of ducks is elongated and broad, and they are also relatively long-necked."
    assert text_fragment(long) == ":~:text=The%20overall%20body%20plan,are%20also%20relatively%20long%2Dnecked."
    assert text_fragment("## Feeding\n\n**Ducks** eat | grass") == ":~:text=Feeding%20Ducks%20eat%20grass"
    assert text_fragment("  ") == ""


SECTIONED = """# Store guide

## Returns

Items may be returned within 30 days of delivery when unused.

## Shipping costs

Standard shipping costs 4.90 euros per order and takes three days.

## Premium members

Premium members get free express delivery on every order.
"""


def test_a_quote_is_located_by_the_heading_above_it_not_the_passage_end(kb, searcher, openai_client) -> None:
    """Three sections in one passage: a quote of each is located by its own heading, not by the section most
    of the passage is in (issue 24)."""
    kb.ingest(Upload(SECTIONED.encode(), "store_guide.md"))
    (passage,) = searcher.search("shipping costs euros per order", searcher.scope(max_results=1))
    assert passage.locator_label == "Store guide › Returns"  # where it starts (issue 42; was the middle section)
    assert [s.heading_path[-1] for s in passage.chunk.sections] == [
        "Store guide",
        "Returns",
        "Shipping costs",
        "Premium members",
    ], "all three sections are in the one passage"
    for question, quoted, heading in [
        ("Within how many days may unused items be returned?", "30 days", "Returns"),
        ("Who gets free express delivery on every order?", "free express", "Premium members"),
    ]:
        response = openai_client.responses.create(model="calypso-rag-agent", input=question)
        annotations = _message(response).content[0].annotations
        assert annotations
        for annotation in annotations:
            fields = annotation.model_extra["_aicore"]
            assert quoted in annotation.model_extra["quote"]
            assert fields["locator_label"] == f"Store guide › {heading}"
            assert fields["page_number"] is None
    # The source list keeps the passage's own range (the section most of it is in).
    results = next(item for item in response.output if item.type == "file_search_call").results
    assert results[0].attributes["locator_label"] == passage.locator_label
