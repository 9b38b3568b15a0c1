"""The table of formats is the one place a format is written: detection, the parser lookup, the supported list,
the crawl filter, the in-place parse and the locators all read it, and real files are detected as their type."""

from __future__ import annotations

import importlib
import io
from collections import Counter
from typing import get_args

import pytest
from PIL import Image
from tests_support import eval_data_dir

from calypso.errors import UnsupportedMediaType
from calypso.ingest import crawl
from calypso.ingest.formats import (
    CSV,
    DOCX,
    EML,
    EPUB,
    FORMATS,
    HTML,
    JPEG,
    MARKDOWN,
    MSG,
    PDF,
    PNG,
    PPTX,
    TEXT,
    TIFF,
    TSV,
    WEBP,
    XHTML,
    XLSX,
    Format,
    LocatorStyle,
    describe_supported,
    extensions,
)
from calypso.ingest.isolation import parses_in_place
from calypso.ingest.parsers import detect_and_parse, detect_media_type, parse_document
from calypso.locators import extent, locator_style, page_locator

ROWS = [pytest.param(fmt, id=fmt.media_type) for fmt in FORMATS]


def test_each_type_extension_and_alias_names_one_row() -> None:
    named = Counter(ext for fmt in FORMATS for ext in fmt.extensions)
    claimed = Counter(name for fmt in FORMATS for name in (fmt.media_type, *fmt.aliases))
    assert [ext for ext, n in named.items() if n > 1] == [] and [t for t, n in claimed.items() if n > 1] == []
    assert all(ext == ext.lower() and ext.startswith(".") for ext in named)
    assert extensions() == set(named)


@pytest.mark.parametrize("fmt", ROWS)
def test_a_rows_extensions_and_claimed_names_detect_to_its_type(fmt: Format) -> None:
    for ext in fmt.extensions:
        assert detect_media_type(b"x", f"upload{ext.upper()}") == fmt.media_type
        assert detect_media_type(b"x", f"upload{ext}", "application/octet-stream") == fmt.media_type
    for claim in (fmt.media_type, *fmt.aliases):
        assert detect_media_type(b"x", "upload", f"{claim.upper()}; charset=utf-8") == fmt.media_type


@pytest.mark.parametrize("fmt", ROWS)
def test_a_rows_parser_is_a_function_of_its_module(fmt: Format) -> None:
    module, _, function = fmt.parser.partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_the_supported_list_names_every_label_type_and_extension() -> None:
    described = describe_supported()
    for fmt in FORMATS:
        assert fmt.label in described and fmt.media_type in described
        assert all(ext in described for ext in fmt.extensions)
    assert described.count("HTML (") == 1  # rows sharing a label are listed together


@pytest.mark.parametrize("fmt", ROWS)
def test_a_rows_locator_style_is_one_locators_writes(fmt: Format) -> None:
    assert fmt.locator is None or fmt.locator in get_args(LocatorStyle)
    style = locator_style(fmt.media_type, 2)
    assert style == (fmt.locator or "page") and locator_style(fmt.media_type, 1) == (fmt.locator or "heading")
    assert (page_locator(style, ("3",)) == "") == (style == "heading")
    sized = extent(fmt.media_type, 2, {"sheets": 2} if fmt.sheets else {"sections": 2})
    assert sized.startswith("2 ")


def test_crawling_and_parsing_in_place_follow_the_rows() -> None:
    assert set(crawl.TEXT_TYPES) == {t for fmt in FORMATS if fmt.crawled for t in (fmt.media_type, *fmt.aliases)}
    assert {HTML, XHTML, TEXT, MARKDOWN} <= set(crawl.TEXT_TYPES) and PDF not in crawl.TEXT_TYPES
    for fmt in FORMATS:
        assert parses_in_place(b"Plain words.", "upload", fmt.media_type) == fmt.in_place
    assert not parses_in_place(b"Plain words.", "notes.txt", "application/json")  # no row: refused in the child


def test_parsing_reads_the_detected_type_and_never_the_bytes_or_name_again() -> None:
    parsed, media_type = parse_document(b"# Title\n\nBody.", "notes.txt", MARKDOWN)
    assert media_type == MARKDOWN and [h.title for h in parsed.headings] == ["Title"]
    parsed, media_type = parse_document(b"# Title\n\nBody.", "notes.md", TEXT)
    assert media_type == TEXT and parsed.headings == []
    with pytest.raises(UnsupportedMediaType):
        parse_document(b"{}", "data.json", "application/json")
    parsed, media_type = detect_and_parse(b"# Title\n\nBody.", "notes.txt", "text/markdown")
    assert media_type == MARKDOWN and [h.title for h in parsed.headings] == ["Title"]


def _image(kind: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 16), "white").save(out, kind)
    return out.getvalue()


@pytest.mark.parametrize(
    ("data", "filename", "by_name", "by_bytes"),
    [
        (_image("TIFF"), "scan.tiff", TIFF, TIFF),
        (_image("WEBP"), "photo.webp", WEBP, WEBP),
        (b"<?xml version='1.0'?><html xmlns='http://www.w3.org/1999/xhtml'></html>", "page.xhtml", XHTML, HTML),
        (b"a\tb\n1\t2\n", "table.tsv", TSV, TEXT),
        (b"Just words.\n", "notes.txt", TEXT, TEXT),
    ],
)
def test_made_files_are_detected_as_their_type(data: bytes, filename: str, by_name: str, by_bytes: str) -> None:
    assert detect_media_type(data, filename) == by_name
    assert detect_media_type(data, "upload", "application/octet-stream") == by_bytes


# Real files: the type their name gives, and the one their bytes alone give (text formats read as plain text).
SAMPLES = [
    ("ingestion-docs/pdf/scotus-transcript-p1.pdf", PDF, PDF),
    ("ingestion-docs/docx/docx-tables.docx", DOCX, DOCX),
    ("ingestion-docs/html/wiki_duck.html", HTML, HTML),
    ("ingestion-docs/md/github-terms-of-service.md", MARKDOWN, TEXT),
    ("ingestion-docs-more/csv/csv-comma.csv", CSV, TEXT),
    ("ingestion-docs-more/email/fake-email-attachment.eml", EML, TEXT),
    ("ingestion-docs-more/email/fake-email-attachment.msg", MSG, MSG),
    ("ingestion-docs-more/epub/epub_purvis_poetry.epub", EPUB, EPUB),
    ("ingestion-docs-more/images/phototest-rotated-180.png", PNG, PNG),
    ("ingestion-docs-more/images/layout-parser-paper-with-table.jpg", JPEG, JPEG),
    ("ingestion-docs-more/pptx/powerpoint_sample.pptx", PPTX, PPTX),
    ("ingestion-docs-more/xlsx/2023-half-year-analyses-by-segment.xlsx", XLSX, XLSX),
    ("ingestion-docs-more/scanned_pdf/ocr_test.pdf", PDF, PDF),
]


@pytest.mark.parametrize(("path", "by_name", "by_bytes"), SAMPLES, ids=[s[0].rsplit("/", 1)[-1] for s in SAMPLES])
def test_real_files_are_detected_as_their_type(path: str, by_name: str, by_bytes: str) -> None:
    data = (eval_data_dir() / path).read_bytes()
    assert detect_media_type(data, path.rsplit("/", 1)[-1]) == by_name
    assert detect_media_type(data, "upload", "application/octet-stream") == by_bytes
    assert detect_media_type(data, "upload", None) == by_bytes
    # A text label yields to PDF and ZIP magic only (an image or an OLE file so labelled is the client's word).
    labelled = by_bytes if by_bytes in (PDF, DOCX, PPTX, XLSX, EPUB) else TEXT
    assert detect_media_type(data, "upload.txt", "text/plain") == labelled
