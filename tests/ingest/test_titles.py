"""Metadata titles are used only when they read like titles; otherwise the file name names the document."""

from __future__ import annotations

from pathlib import Path

import pytest

from calypso.ingest.parsers import detect_and_parse
from calypso.ingest.titles import plausible_title


def test_bogus_pdf_title_gives_way_to_the_file_name(data_dir: Path) -> None:
    path = data_dir / "ingestion-docs/pdf/scotus-transcript-p1.pdf"
    parsed, _ = detect_and_parse(path.read_bytes(), path.name)
    assert parsed.title == "scotus-transcript-p1.pdf"  # its metadata says "10811.exe"


def test_real_pdf_titles_are_kept(data_dir: Path) -> None:
    for name, title in [
        ("ingestion-docs/pdf/GeoTopo-komprimiert.pdf", "Geometrie und Topologie"),
        ("alps-wiki-qa/alps_wiki.pdf", "Alps - Wikipedia"),
    ]:
        path = data_dir / name
        assert detect_and_parse(path.read_bytes(), path.name)[0].title == title


@pytest.mark.parametrize(
    "title",
    [
        "",
        "   ",
        None,
        "10811.exe",
        "report.doc",
        "Microsoft Word - minutes.docx",
        "Untitled",
        "Document1",
        "Title",
        "PowerPoint Presentation",
        "ABC123",
        "C:\\temp\\x.pdf",
        "Adobe Acrobat 9.0",
    ],
)
def test_implausible_titles(title: str | None) -> None:
    assert plausible_title(title) is None


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Geometrie und Topologie", None),
        ("  Handbook for   Chapter 13 Trustees ", "Handbook for Chapter 13 Trustees"),
        ("2.3.59 (Rev 12/22)", None),
        ("Enabling LLMs to Generate Text with Citations", None),
    ],
)
def test_plausible_titles(title: str, expected: str | None) -> None:
    assert plausible_title(title) == (expected or title)
