"""Control characters are removed at ingestion, with pages, headings and chunks still indexing the stored text."""

from __future__ import annotations

import re
from pathlib import Path

from calypso.citations.composer import AnswerComposer
from calypso.ingest.chunking import chunk_document
from calypso.ingest.parsers import detect_and_parse

CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")


def test_geotopo_text_has_no_control_characters(data_dir: Path) -> None:
    path = data_dir / "ingestion-docs/pdf/GeoTopo-komprimiert.pdf"
    parsed, _ = detect_and_parse(path.read_bytes(), path.name)
    assert not CONTROL.search(parsed.text)  # PDFium gives \x04, \x08, \x12 ... for its math glyphs
    assert "abgeschlossen. \nBeispiel 1 (Topologien)" in parsed.text  # the \x04 (end of proof) is gone
    # Pages still cover the text contiguously.
    assert parsed.pages[0].start == 0 and parsed.pages[-1].end == len(parsed.text)
    assert all(a.end == b.start for a, b in zip(parsed.pages, parsed.pages[1:]))
    for chunk in chunk_document(parsed):
        assert parsed.text[chunk.start : chunk.end] == chunk.text and not CONTROL.search(chunk.text)


def test_markdown_offsets_follow_the_removed_characters() -> None:
    data = b"# Intro\x01duction\n\nSome\x04 text \x7fhere.\x0cNext page.\n\n## Fees\x02\n\nThe fee is 5%.\n"
    parsed, _ = detect_and_parse(data, "notes.md")
    assert parsed.text == "# Introduction\n\nSome text here.\nNext page.\n\n## Fees\n\nThe fee is 5%."
    assert [h.title for h in parsed.headings] == ["Introduction", "Fees"]
    for heading in parsed.headings:
        assert parsed.text[heading.start :].lstrip("# ").startswith(heading.title)
    assert parsed.pages[-1].end == len(parsed.text)
    (chunk,) = chunk_document(parsed)
    assert chunk.heading_path in (("Introduction",), ("Introduction", "Fees"))


def test_answers_never_show_control_characters() -> None:
    composer = AnswerComposer([], lambda text, source: None)  # type: ignore[arg-type, return-value]
    text = "".join(e.text for delta in ["Sei U\x04 offen", "\x12 und\x00 fertig."] for e in composer.feed(delta))
    text += "".join(e.text for e in composer.flush())
    assert text == "Sei U offen und fertig."
    assert composer.finish(generator="test").text == "Sei U offen und fertig."
