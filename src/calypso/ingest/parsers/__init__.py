"""Document parsers: detect a file's type and turn its bytes into a ``ParsedDocument``.

Every parser is a pure function ``parse(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument``
that touches neither disk nor network. ``limits`` bounds what a document may expand into (PDF and
DOCX check them before and while expanding; see ``calypso.ingest.limits``).

Page convention (shared by all parsers): ``pages`` cover ``text`` contiguously.
``pages[0].start == 0``, ``pages[-1].end == len(text)`` and each page starts where the
previous one ends; a separator between pages (the PDF parser joins pages with "\\n\\n")
belongs to the page before it. Formats without pages return a single page 1 / label "1".
``Heading.start`` is the offset where the heading's line begins in ``text``.
"""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from calypso.errors import EmptyDocument, UnsupportedMediaType
from calypso.ingest.limits import DEFAULT_LIMITS, MAX_ZIP_MEMBERS, ParseLimits
from calypso.locators import locator_style
from calypso.models import ParsedDocument
from calypso.text.control import CONTROL, OffsetShift, clean_text

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

SUPPORTED_TYPES: dict[str, str] = {
    PDF: "pdf",
    DOCX: "docx",
    HTML: "html",
    XHTML: "html",
    MARKDOWN: "markdown",
    TEXT: "text",
    PPTX: "pptx",
    XLSX: "xlsx",
    CSV: "csv",
    TSV: "tsv",
    EPUB: "epub",
    EML: "eml",
    MSG: "msg",
    PNG: "image",
    JPEG: "image",
    TIFF: "image",
    WEBP: "image",
}

EXTENSIONS: dict[str, str] = {
    ".pdf": PDF,
    ".docx": DOCX,
    ".html": HTML,
    ".htm": HTML,
    ".xhtml": XHTML,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": TEXT,
    ".text": TEXT,
    ".log": TEXT,
    ".pptx": PPTX,
    ".xlsx": XLSX,
    ".csv": CSV,
    ".tsv": TSV,
    ".rst": TEXT,
    ".epub": EPUB,
    ".eml": EML,
    ".msg": MSG,
    ".png": PNG,
    ".jpg": JPEG,
    ".jpeg": JPEG,
    ".tif": TIFF,
    ".tiff": TIFF,
    ".webp": WEBP,
}

# Other names clients send for the same formats.
_ALIASES: dict[str, str] = {
    "application/x-pdf": PDF,
    "text/x-markdown": MARKDOWN,
    "text/md": MARKDOWN,
    "application/csv": CSV,
    "text/x-csv": CSV,
    "text/comma-separated-values": CSV,
    "text/tsv": TSV,
    "application/x-outlook-msg": MSG,
    "image/jpg": JPEG,
    "image/pjpeg": JPEG,
    "image/x-png": PNG,
    "image/tif": TIFF,
}

# Content types that say nothing about the format: fall through to extension / sniffing.
_GENERIC = {"", "application/octet-stream", "binary/octet-stream", "application/unknown", "application/binary"}


def describe_supported() -> str:
    """Human list of supported formats with their media types and extensions, for error messages."""
    groups: dict[str, list[str]] = {}
    for media, short in SUPPORTED_TYPES.items():
        groups.setdefault(short, []).append(media)
    for ext, media in EXTENSIONS.items():
        groups[SUPPORTED_TYPES[media]].append(ext)
    names = {"pdf": "PDF", "docx": "Word DOCX", "html": "HTML", "markdown": "Markdown", "text": "plain text"}
    names |= {"pptx": "PowerPoint PPTX", "xlsx": "Excel XLSX", "csv": "CSV", "tsv": "TSV"}
    names.update(epub="EPUB e-book", eml="EML e-mail", msg="Outlook MSG e-mail")
    names["image"] = "images, read by OCR"
    return "; ".join(f"{names[short]} ({', '.join(items)})" for short, items in groups.items())


def _normalise(media_type: str | None) -> str:
    base = (media_type or "").split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

# Magic bytes of the image formats (WebP: "RIFF" size "WEBP").
_IMAGE_MAGIC = ((b"\x89PNG\r\n\x1a\n", PNG), (b"\xff\xd8\xff", JPEG), (b"II*\x00", TIFF), (b"MM\x00*", TIFF))


def _sniff_image(head: bytes) -> str | None:
    for magic, media in _IMAGE_MAGIC:
        if head.startswith(magic):
            return media
    return WEBP if head[:4] == b"RIFF" and head[8:12] == b"WEBP" else None


def _sniff(data: bytes) -> str | None:
    head = data[:2048]
    image = _sniff_image(head)
    if image is not None:
        return image
    # PDF readers accept junk before the header, so look past offset 0.
    if b"%PDF-" in head[:1024]:
        return PDF
    if head.startswith(b"PK\x03\x04"):
        if data.count(b"PK\x01\x02") > MAX_ZIP_MEMBERS:  # central directory entries: not a Word document
            return None
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                names = set(zf.namelist())
                if "word/document.xml" in names:
                    return DOCX
                if "ppt/presentation.xml" in names:
                    return PPTX
                if "xl/workbook.xml" in names:
                    return XLSX
                if "mimetype" in names:  # an EPUB says so in its first member (read 64 bytes at most)
                    with zf.open("mimetype") as member:
                        if member.read(64).strip() == EPUB.encode():
                            return EPUB
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError):
            return None
        return None
    if head.startswith(_OLE_MAGIC):  # Outlook MSG among OLE files (old .doc and .xls too): its stream names
        return MSG if "__properties_version1.0".encode("utf-16-le") in data else None
    lowered = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if lowered.startswith((b"<!doctype html", b"<html")) or b"<html" in lowered[:512]:
        return HTML
    if b"\x00" not in head:
        return TEXT
    return None


def detect_media_type(data: bytes, filename: str, media_type: str | None = None) -> str:
    """The media type to parse ``data`` as: declared type, else extension, else magic bytes."""
    declared = _normalise(media_type)
    ext_type = EXTENSIONS.get(os.path.splitext(filename or "")[1].lower())
    if declared in SUPPORTED_TYPES:
        if declared in (TEXT, MARKDOWN, HTML, XHTML, CSV, TSV) and data[:4] in (b"%PDF", b"PK\x03\x04"):
            sniffed = _sniff(data)  # PDF/Office magic is unambiguous; a text label on it is a client guess
            if sniffed in (PDF, DOCX, PPTX, XLSX):
                return sniffed
        # Many clients label every text file text/plain; a .md/.html/.csv name is more specific.
        if declared == TEXT and ext_type in (MARKDOWN, HTML, XHTML, CSV, TSV):
            return ext_type
        return declared
    if declared.startswith("text/") and declared not in _GENERIC and ext_type is None:
        return TEXT  # text/csv, text/x-rst, ...: readable as plain text
    if ext_type is not None:
        return ext_type
    sniffed = _sniff(data)
    # PDF, DOCX and HTML are known by their bytes whatever the name. Bytes that merely look like text
    # are read as text only without an extension ("README"): "data.json" or "model.bin" sent as
    # application/octet-stream is a type we do not know, refused rather than indexed as plain text.
    if sniffed is not None and (sniffed != TEXT or not os.path.splitext(filename or "")[1]):
        return sniffed
    shown = media_type or os.path.splitext(filename or "")[1] or "unknown"
    raise UnsupportedMediaType(
        f"Unsupported file type ({shown}) for {filename!r}. Supported types: {describe_supported()}. "
        "Convert the file to one of these formats and upload it again.",
        param="file",
    )


class _ParserModule(Protocol):
    """What every parser module provides (for the type checker)."""

    def parse(self, data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument: ...


def _parser_for(media_type: str) -> Callable[[bytes, str, ParseLimits], ParsedDocument]:
    # Imported lazily: trafilatura and pypdfium2 are slow to import and only needed per type.
    short = SUPPORTED_TYPES[media_type]
    module: _ParserModule
    if short == "pdf":
        from calypso.ingest.parsers import pdf as module
    elif short == "docx":
        from calypso.ingest.parsers import docx as module
    elif short == "html":
        from calypso.ingest.parsers import html as module
    elif short == "markdown":
        from calypso.ingest.parsers import markdown as module
    elif short == "pptx":
        from calypso.ingest.parsers import pptx as module
    elif short == "xlsx":
        from calypso.ingest.parsers import xlsx as module
    elif short in ("csv", "tsv"):
        from calypso.ingest.parsers import delimited

        return delimited.parse_tsv if short == "tsv" else delimited.parse
    elif short == "epub":
        from calypso.ingest.parsers import epub as module
    elif short == "eml":
        from calypso.ingest.parsers import eml as module
    elif short == "msg":
        from calypso.ingest.parsers import msg as module
    elif short == "image":
        from calypso.ingest.parsers import image as module
    else:
        from calypso.ingest.parsers import text as module
    return module.parse


def _without_control_characters(parsed: ParsedDocument) -> ParsedDocument:
    """``parsed`` with control characters removed from its text, its pages and headings moved to match.

    Stored text, chunk offsets, pages and quotes all index the cleaned text, so they stay consistent.
    """
    shift = OffsetShift(parsed.text)
    text = clean_text(parsed.text)
    pages = parsed.pages
    headings = parsed.headings
    if shift:
        pages = [replace(page, start=shift(page.start), end=shift(page.end)) for page in pages]
        headings = [replace(h, start=shift(h.start)) for h in headings]
    headings = [replace(h, title=clean_text(h.title)) if CONTROL.search(h.title) else h for h in headings]
    title = clean_text(parsed.title) if parsed.title else parsed.title
    return replace(parsed, text=text, pages=pages, headings=headings, title=title)


def parse_document(
    data: bytes, filename: str, media_type: str | None = None, limits: ParseLimits | None = None
) -> tuple[ParsedDocument, str]:
    """Detect the type of ``data``, parse it and return ``(parsed, media_type)``.

    Raises ``EmptyDocument`` (no bytes / no text), ``UnsupportedMediaType``,
    ``UnprocessableDocument`` (corrupt, encrypted or undecodable input, decompression bombs) and
    ``PayloadTooLarge`` (past one of ``limits``: pages, characters, uncompressed size, DOCX elements;
    defaults: the settings' defaults).
    """
    limits = limits or DEFAULT_LIMITS
    if not data.strip():
        size = f"{len(data)} bytes" + (" of whitespace" if data else "")
        raise EmptyDocument(f"The file {filename!r} is empty ({size}); upload a file with content.", param="file")
    detected = detect_media_type(data, filename, media_type)
    parsed = _without_control_characters(_parser_for(detected)(data, filename, limits))
    limits.check_chars(len(parsed.text), filename)  # PDF and DOCX stop early; text formats are checked here
    if not parsed.text.strip():
        hint = (
            " Its pages hold neither a text layer nor text that OCR could recognise."
            if detected == PDF
            else " Upload a file that contains text."
        )
        raise EmptyDocument(f"No extractable text in {filename!r}.{hint}", param="file")
    _count_parts(parsed, detected)
    return parsed, detected


def _count_parts(parsed: ParsedDocument, media_type: str) -> None:
    """The counts ``locators.extent`` says a document's size in: a workbook's sheets, the sections of a document
    located by headings ("4 sections", not "1 page")."""
    style = locator_style(media_type, len(parsed.pages))
    # setdefault: a Markdown file's own front matter may say "sections:" already; it is the author's, kept.
    if media_type == XLSX:
        parsed.metadata.setdefault("sheets", sum(1 for heading in parsed.headings if heading.level == 1))
    elif media_type in (CSV, TSV):
        parsed.metadata.setdefault("sheets", 1)  # one table, however many blocks it is cut into
    elif style == "heading" and parsed.headings:
        parsed.metadata.setdefault("sections", len(parsed.headings))


__all__ = [
    "SUPPORTED_TYPES",
    "EXTENSIONS",
    "ParseLimits",
    "describe_supported",
    "detect_media_type",
    "parse_document",
]
