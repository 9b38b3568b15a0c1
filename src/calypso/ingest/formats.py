"""The file formats Calypso ingests: one row each, the one place a format is written.

Everything that knows of formats reads this table: detection (``parsers.detect_media_type``: a claimed
type, the file's name, its magic bytes), the parser lookup (``parsers.parse_document``), the list the
error messages give (``describe_supported``), what a crawl accepts (``crawl.py``), how a reader finds a
passage (``calypso/locators.py``) and which uploads may parse in the server (``isolation.parses_in_place``).
The playground's picker (``playground/static/js/formats.js``) is checked against it by a test.

This module imports no parser: a row names its parser as ``"module:function"``, imported on first use
(trafilatura and pypdfium2 are slow to import and only needed per type).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# How a reader finds a passage in a document (``calypso/locators.py``): "p. 4", "slide 3", the page label
# itself ("Segments!A4:F19"), or the heading path above it.
LocatorStyle = Literal["page", "slide", "label", "heading"]

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
HTML = "text/html"
XHTML = "application/xhtml+xml"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
CSV = "text/csv"
TSV = "text/tab-separated-values"
EPUB = "application/epub+zip"
EML = "message/rfc822"
MSG = "application/vnd.ms-outlook"
PNG = "image/png"
JPEG = "image/jpeg"
TIFF = "image/tiff"
WEBP = "image/webp"

# A ZIP member that names its package's media type (EPUB, OpenDocument): it must hold the row's type.
MIMETYPE_MEMBER = "mimetype"


@dataclass(frozen=True)
class Format:
    """One format: what it is called, how it is recognised, parsed and cited."""

    media_type: str  # the canonical type, stored on the document
    label: str  # what people call it (``describe_supported``); rows sharing a label are listed together
    extensions: tuple[str, ...]  # lower case, with the dot
    parser: str  # "module:function" taking (data, filename, limits), imported on first use
    locator: LocatorStyle | None  # None: pages when the parser made several, else the heading path
    aliases: tuple[str, ...] = ()  # other names clients send for the same format
    magic: re.Pattern[bytes] | None = None  # matched at the start of the file's first 2 KiB
    zip_member: str | None = None  # the member whose presence marks the ZIP package (see MIMETYPE_MEMBER)
    ole_stream: str | None = None  # the stream name that marks the OLE compound file
    # A text format: a claim of it yields to unambiguous binary magic (a PDF sent as text/plain), and a name
    # saying which text format refines a text/plain claim ("notes.md").
    textual: bool = False
    in_place: bool = False  # small UTF-8 uploads may parse in the server, without a child process
    sheets: Literal["one", "top headings"] | None = None  # sized in sheets (``locators.extent``): how to count them
    crawled: bool = False  # a web page of this type may be crawled


_PARSERS = "calypso.ingest.parsers"
_IMAGES = "images, read by OCR"

# Every row names media type, label, extensions, parser and locator style, in that order; the rest by keyword.
FORMATS: tuple[Format, ...] = (
    Format(
        PDF,
        "PDF",
        (".pdf",),
        f"{_PARSERS}.pdf:parse",
        "page",
        aliases=("application/x-pdf",),
        magic=re.compile(rb"(?s).{0,1019}%PDF-"),  # readers accept junk before the header: anywhere in the first KiB
    ),
    Format(DOCX, "Word DOCX", (".docx",), f"{_PARSERS}.docx:parse", "heading", zip_member="word/document.xml"),
    Format(
        HTML,
        "HTML",
        (".html", ".htm"),
        f"{_PARSERS}.html:parse",
        "heading",
        # A doctype or <html> after a byte-order mark and blank space, or <html> within 512 bytes of it.
        magic=re.compile(rb"(?is)[\xef\xbb\xbf \t\r\n]*(?:<!doctype html|.{0,507}<html)"),
        textual=True,
        crawled=True,
    ),
    Format(XHTML, "HTML", (".xhtml",), f"{_PARSERS}.html:parse", "heading", textual=True, crawled=True),
    Format(
        MARKDOWN,
        "Markdown",
        (".md", ".markdown"),
        f"{_PARSERS}.markdown:parse",
        "heading",
        aliases=("text/x-markdown", "text/md"),
        textual=True,
        in_place=True,
        crawled=True,
    ),
    Format(
        TEXT,
        "plain text",
        (".txt", ".text", ".log", ".rst"),
        f"{_PARSERS}.text:parse",
        None,
        textual=True,
        in_place=True,
        crawled=True,
    ),
    Format(PPTX, "PowerPoint PPTX", (".pptx",), f"{_PARSERS}.pptx:parse", "slide", zip_member="ppt/presentation.xml"),
    Format(
        XLSX,
        "Excel XLSX",
        (".xlsx",),
        f"{_PARSERS}.xlsx:parse",
        "label",
        zip_member="xl/workbook.xml",
        sheets="top headings",
    ),
    Format(
        CSV,
        "CSV",
        (".csv",),
        f"{_PARSERS}.delimited:parse",
        "label",
        aliases=("application/csv", "text/x-csv", "text/comma-separated-values"),
        textual=True,
        sheets="one",
    ),
    Format(
        TSV,
        "TSV",
        (".tsv",),
        f"{_PARSERS}.delimited:parse_tsv",
        "label",
        aliases=("text/tsv",),
        textual=True,
        sheets="one",
    ),
    Format(EPUB, "EPUB e-book", (".epub",), f"{_PARSERS}.epub:parse", "heading", zip_member=MIMETYPE_MEMBER),
    Format(EML, "EML e-mail", (".eml",), f"{_PARSERS}.eml:parse", "label"),
    Format(
        MSG,
        "Outlook MSG e-mail",
        (".msg",),
        f"{_PARSERS}.msg:parse",
        "label",
        aliases=("application/x-outlook-msg",),
        ole_stream="__properties_version1.0",  # old .doc and .xls files are OLE too
    ),
    Format(
        PNG,
        _IMAGES,
        (".png",),
        f"{_PARSERS}.image:parse",
        "page",
        aliases=("image/x-png",),
        magic=re.compile(rb"\x89PNG\r\n\x1a\n"),
    ),
    Format(
        JPEG,
        _IMAGES,
        (".jpg", ".jpeg"),
        f"{_PARSERS}.image:parse",
        "page",
        aliases=("image/jpg", "image/pjpeg"),
        magic=re.compile(rb"\xff\xd8\xff"),
    ),
    Format(
        TIFF,
        _IMAGES,
        (".tif", ".tiff"),
        f"{_PARSERS}.image:parse",
        "page",
        aliases=("image/tif",),
        magic=re.compile(rb"II\*\x00|MM\x00\*"),  # little- or big-endian
    ),
    Format(WEBP, _IMAGES, (".webp",), f"{_PARSERS}.image:parse", "page", magic=re.compile(rb"(?s)RIFF.{4}WEBP")),
)

_BY_TYPE: dict[str, Format] = {fmt.media_type: fmt for fmt in FORMATS}
_BY_CLAIM: dict[str, Format] = {alias: fmt for fmt in FORMATS for alias in fmt.aliases} | _BY_TYPE
_BY_EXTENSION: dict[str, Format] = {ext: fmt for fmt in FORMATS for ext in fmt.extensions}


def format_of(media_type: str) -> Format | None:
    """The row of a canonical (detected, stored) media type; None for a type Calypso does not parse."""
    return _BY_TYPE.get(media_type)


def base_type(media_type: str | None) -> str:
    """``media_type`` as a bare lower-case type, parameters dropped ("Text/HTML; charset=x" → "text/html")."""
    return (media_type or "").split(";", 1)[0].strip().lower()


def claimed_format(media_type: str | None) -> Format | None:
    """The row a client's claimed type names, under its own name or an alias (parameters and case ignored)."""
    return _BY_CLAIM.get(base_type(media_type))


def named_format(extension: str) -> Format | None:
    """The row of a file name's extension (".PDF" as ".pdf")."""
    return _BY_EXTENSION.get(extension.lower())


def extensions() -> frozenset[str]:
    """Every extension Calypso knows a format by."""
    return frozenset(_BY_EXTENSION)


def crawled_types() -> tuple[str, ...]:
    """The media types (with their aliases) a crawled web page may have."""
    return tuple(t for fmt in FORMATS if fmt.crawled for t in (fmt.media_type, *fmt.aliases))


def describe_supported() -> str:
    """Human list of supported formats with their media types and extensions, for error messages."""
    groups: dict[str, list[Format]] = {}
    for fmt in FORMATS:
        groups.setdefault(fmt.label, []).append(fmt)
    described = []
    for label, rows in groups.items():
        names = [fmt.media_type for fmt in rows] + [ext for fmt in rows for ext in fmt.extensions]
        described.append(f"{label} ({', '.join(names)})")
    return "; ".join(described)
