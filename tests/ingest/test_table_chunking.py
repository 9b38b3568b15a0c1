"""The chunker and tables: a Markdown table row is one unit, and ``break_at_pages`` starts a passage at every page."""

from __future__ import annotations

from calypso.ingest.chunking import chunk_document
from calypso.ingest.table_headers import TableHeaders
from calypso.models import Page, ParsedDocument


def _rows(count: int) -> list[str]:
    # Full stops followed by capitals inside cells: sentence ends, were the row not kept whole.
    return [f"| Dr. Smith {i}. Ward B | 3.5 ml. Twice daily | Note {i}. See chart |" for i in range(count)]


def test_a_table_row_is_never_cut_between_its_sentences() -> None:
    rows = _rows(40)
    text = "Dosage table\n" + "\n".join(rows) + "\nAfter the table. Another sentence."
    doc = ParsedDocument(text=text, pages=[Page(1, "1", 0, len(text))])
    for size in (150, 200, 333):
        chunks = chunk_document(doc, size, size // 5)
        for chunk in chunks:
            for line in chunk.text.splitlines():
                if line.startswith("|"):
                    assert line in rows, (size, line)
        assert {row for chunk in chunks for row in chunk.text.splitlines() if row.startswith("|")} == set(rows)


def test_a_row_longer_than_a_passage_is_still_cut() -> None:
    row = "| " + " | ".join(f"cell {i}" for i in range(100)) + " |"
    doc = ParsedDocument(text=row, pages=[Page(1, "1", 0, len(row))])
    chunks = chunk_document(doc, 200, 20)
    assert len(chunks) > 1 and all(len(c.text) <= 200 for c in chunks)


def test_break_at_pages_starts_a_passage_per_page_and_carries_nothing_over() -> None:
    blocks = ["| h |\n| a |", "| h |\n| b |", "| h |\n| c |"]
    text = "\n\n".join(blocks)
    pages, start = [], 0
    for number, block in enumerate(blocks, start=1):
        end = start + len(block) + (2 if number < len(blocks) else 0)
        pages.append(Page(number, f"A{number}", start, end))
        start = end
    packed = chunk_document(ParsedDocument(text=text, pages=pages), 1000, 150)
    assert len(packed) == 1  # without the flag, small pages share a passage
    apart = chunk_document(ParsedDocument(text=text, pages=pages, break_at_pages=True), 1000, 150)
    assert [c.text for c in apart] == blocks
    assert [c.page_labels for c in apart] == [("A1",), ("A2",), ("A3",)]


def test_a_passage_begun_inside_a_table_carries_its_header() -> None:
    header = "| Patient | Dose | Note |\n| --- | :-: | --- |"
    rows = _rows(40)
    text = "Dosage table\n" + header + "\n" + "\n".join(rows) + "\n\nAfter the table. Another sentence."
    chunks = chunk_document(ParsedDocument(text=text, pages=[Page(1, "1", 0, len(text))]), 300, 60)
    inside = [c for c in chunks if c.text.startswith("| Dr. Smith")]
    assert len(inside) >= 3 and all(c.table_header == header for c in inside)
    assert chunks[0].table_header == "" and header in chunks[0].text  # the first holds the header itself
    assert chunks[-1].text.startswith("After") or chunks[-1].table_header == header
    after = [c for c in chunks if c.text.startswith("After")]
    assert all(c.table_header == "" for c in after)
    # Without a delimiter row the first row is the header (slides, web pages and Word tables write none).
    plain = "\n".join(rows)
    later = chunk_document(ParsedDocument(text=plain, pages=[Page(1, "1", 0, len(plain))]), 300, 60)[1:]
    assert later and all(c.table_header == rows[0] for c in later)
    # Two pipe lines are not taken for a table.
    pair = "| a | b |\n| c | d |"
    assert TableHeaders(pair).above(len("| a | b |\n")) == ""
