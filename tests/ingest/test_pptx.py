"""PPTX: a page per slide located as "slide N", titles as headings, lists, tables, chart data and speaker notes."""

from __future__ import annotations

import re
from pathlib import Path

import office_files
import pytest

from calypso.errors import PayloadTooLarge, UnprocessableDocument
from calypso.ingest.chunking import chunk_document
from calypso.ingest.parsers import detect_and_parse
from calypso.locators import locator_style, page_locator

PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def _parse(data_dir: Path, name: str):
    path = data_dir / "ingestion-docs-more/pptx" / name
    return detect_and_parse(path.read_bytes(), path.name)


def _slide(parsed, number: int) -> str:
    page = parsed.pages[number - 1]
    return parsed.text[page.start : page.end].strip()


def test_one_page_per_slide_located_as_slide(data_dir: Path) -> None:
    parsed, media_type = _parse(data_dir, "powerpoint_sample.pptx")
    assert media_type == PPTX and parsed.break_at_pages
    assert [(p.number, p.label) for p in parsed.pages] == [(1, "1"), (2, "2"), (3, "3")]
    style = locator_style(media_type, len(parsed.pages))
    assert style == "slide" and page_locator(style, ["3"]) == "slide 3"
    assert [(h.level, h.title) for h in parsed.headings] == [(1, "Test Table Slide"), (1, "Second slide title")]
    assert parsed.text[parsed.headings[1].start :].startswith("Second slide title\n")
    assert parsed.title == "Test Table Slide"
    chunks = chunk_document(parsed, 800, 120)
    assert [c.page_labels for c in chunks] == [("1",), ("2",), ("3",)]


def test_tables_lists_and_reading_order(data_dir: Path) -> None:
    parsed, _ = _parse(data_dir, "powerpoint_sample.pptx")
    first = _slide(parsed, 1)
    # The merged header cells repeated over their span, as in docling's ground truth; the footnote last.
    assert "|  | Class1 | Class1 | Class1 | Class2 | Class2 | Class2 |" in first
    assert "|  | A merged with B | A merged with B | C | A | B | C |" in first
    assert "| R4 | True | False | True | False | True | False |" in first
    assert first.endswith("With footnote")
    second = _slide(parsed, 2)
    assert (
        "A rectangle shape with this text inside.\nLet’s introduce a list\n- With foo\n- Bar\n- And baz things"
        in second
    )
    third = _slide(parsed, 3)
    assert third.startswith("1. List item4\n2. List item5\n3. List item6\n- I1")
    assert "Maybe a list?\n1. List1\n2. List2\n3. List3" in third
    truth = (data_dir / "ingestion-docs-more/groundtruth/powerpoint_sample.pptx.md").read_text()
    lines = [line.strip() for line in truth.splitlines() if line.strip() and not re.fullmatch(r"[|\s-]+", line)]
    found = [line for line in lines if line.lstrip("#").strip() in parsed.text]
    assert len(found) == len(lines), set(lines) - set(found)


def test_speaker_notes_are_kept_and_marked(data_dir: Path) -> None:
    parsed, _ = _parse(data_dir, "powerpoint_sample.pptx")
    assert _slide(parsed, 2).endswith("Notes:\nSome notes on the second slide.")
    assert _slide(parsed, 3).endswith("Notes:\nFinal notes on the third slide.\nSecond line of notes.")
    assert "Notes:" not in _slide(parsed, 1)


def test_chart_data_becomes_a_table(data_dir: Path) -> None:
    parsed, _ = _parse(data_dir, "pptx_chart.pptx")
    first = _slide(parsed, 1)
    assert first.startswith("Quarterly Duck Survey\nChart: Wild Duck Observations by Year\n")
    assert "|  | Freshwater Ducks | Saltwater Ducks |\n| 2019 | 120 | 80 |" in first
    assert "| 2022 | 175 | 130 |" in first
    # A 3-D bar chart python-pptx cannot read: its cached values come from ppt/charts/chart2.xml.
    assert _slide(parsed, 2) == "Quarterly revenue\nChart\n|  | 2026 |\n| Q1 | 10 |\n| Q2 | 20 |\n| Q3 | 30 |"


def test_a_deck_made_here_with_notes_and_bullets() -> None:
    data = office_files.deck(
        [("Budget", ["Travel is capped", "Hotels: 150 a night"], "Ask finance first."), ("Next", [], None)]
    )
    parsed, _ = detect_and_parse(data, "budget.pptx")
    assert _slide(parsed, 1) == "Budget\n- Travel is capped\n- Hotels: 150 a night\nNotes:\nAsk finance first."
    assert _slide(parsed, 2) == "Next"


def test_password_protected_pptx_says_so() -> None:
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(office_files.encrypted_office_file(), "deck.pptx")
    assert info.value.code == "password_protected" and "PowerPoint" in info.value.message
    with pytest.raises(UnprocessableDocument) as legacy:
        detect_and_parse(office_files.legacy_ole_file(), "deck.pptx")
    assert ".ppt" in legacy.value.message


def test_bombs_and_truncated_decks_are_refused(data_dir: Path) -> None:
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(office_files.pptx_zip_bomb(300), "bomb.pptx")
    assert info.value.code == "uncompressed_too_large"
    data = (data_dir / "ingestion-docs-more/pptx/powerpoint_sample.pptx").read_bytes()
    for broken in (data[: len(data) // 2], data[:64]):
        with pytest.raises(UnprocessableDocument) as cut:
            detect_and_parse(broken, "cut.pptx")
        assert "not a readable PPTX file" in cut.value.message
    assert detect_and_parse(data, "upload", "application/octet-stream")[1] == PPTX  # known by its parts
