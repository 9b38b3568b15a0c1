"""The leftovers of the documents issue (issue 40): a passage listing that says where each passage is, a long
slide table whose header travels with every passage, and a document's size in its own units."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
from pptx import Presentation
from pptx.util import Inches
from tests_support import WAIT

from calypso.cli.progress import extent

MORE = "ingestion-docs-more"
HEADER = "| Zone | Revenue 2023 | Margin |"


def _deck(rows: int = 40) -> bytes:
    """Two slides: a title slide, then a table of ``rows`` rows, far longer than one passage."""
    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[0]).shapes.title.text = "Regional results"
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Revenue by zone"
    table = slide.shapes.add_table(rows + 1, 3, Inches(0.5), Inches(1.5), Inches(9), Inches(5)).table
    for column, name in enumerate(("Zone", "Revenue 2023", "Margin")):
        table.cell(0, column).text = name
    for row in range(1, rows + 1):
        table.cell(row, 0).text = f"Zone number {row} of the northern region"
        table.cell(row, 1).text = f"{row * 1234:,}"
        table.cell(row, 2).text = f"{row % 17}.5%"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def _upload(api: httpx.Client, name: str, data: bytes) -> dict:
    response = api.post("/v1/documents", files={"file": (name, data)}, params=WAIT)
    assert response.status_code == 201, response.text
    return response.json()


def _chunks(api: httpx.Client, document: dict) -> list[dict]:
    return api.get(f"/v1/documents/{document['id']}/chunks", params={"limit": 100}).json()["data"]


def test_a_long_slide_table_repeats_its_header_and_every_passage_says_its_slide(api: httpx.Client) -> None:
    document = _upload(api, "results.pptx", _deck())
    assert document["extent"] == "2 slides" and document["page_count"] == 2
    chunks = _chunks(api, document)
    assert [c["locator_label"] for c in chunks][:1] == ["slide 1"]
    rows = [c for c in chunks if c["text"].startswith("| Zone number")]
    assert len(rows) >= 3 and all(c["locator_label"] == "slide 2" for c in rows)
    assert all(c["table_header"] == HEADER for c in rows)  # the rows' column names, above each passage
    assert all("table_header" not in c for c in chunks if HEADER in c["text"])  # it holds the header itself
    # The listing and a search agree on where a passage is.
    hits = api.post("/v1/search", json={"query": "Revenue by zone", "max_num_results": 10})
    assert hits.status_code == 200, hits.text
    found = hits.json()["data"]
    assert found
    for hit in found:
        listed = next(c for c in chunks if c["chunk_index"] == hit["attributes"]["chunk_index"])
        assert listed["locator_label"] == hit["attributes"]["locator_label"]


def test_documents_are_counted_in_their_own_units(api: httpx.Client, data_dir: Path) -> None:
    sheets = _upload(api, "xlsx_01.xlsx", (data_dir / MORE / "xlsx/xlsx_01.xlsx").read_bytes())
    assert sheets["extent"] == "4 sheets" and sheets["page_count"] == 7  # seven regions on four sheets
    regions = _chunks(api, sheets)
    assert regions[0]["locator_label"].startswith("Sheet1!A1:")
    note = "# Refunds\n\nPaid in fourteen days.\n\n## Cards\n\nTo the card that paid.\n\n## Cash\n\nNever in cash.\n"
    markdown = _upload(api, "refunds.md", note.encode())
    assert markdown["extent"] == "3 sections" and markdown["page_count"] == 1
    # As a search result says: where the passage starts (issue 42; was the section most of it is in, Cards).
    assert [c["locator_label"] for c in _chunks(api, markdown)] == ["Refunds"]
    plain = _upload(api, "plain.txt", b"No headings at all, just a sentence of text.")
    assert plain["extent"] == ""  # nothing a reader could count: not "1 page"
    pdf = _upload(api, "ocr_test.pdf", (data_dir / MORE / "scanned_pdf/ocr_test.pdf").read_bytes())
    assert pdf["extent"] == "1 page" and _chunks(api, pdf)[0]["locator_label"] == "p. 1"
    # The CLI's line says the same.
    assert extent(sheets["media_type"], 7, 9, sheets["metadata"]) == "4 sheets, 9 passages"
    assert extent(markdown["media_type"], 1, 1, markdown["metadata"]) == "3 sections, 1 passage"
    assert extent(plain["media_type"], 1, 1, plain["metadata"]) == "1 passage"
