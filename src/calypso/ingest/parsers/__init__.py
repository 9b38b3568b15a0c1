"""Document parsers: detect a file's type and turn its bytes into a ``ParsedDocument``.

Both read the table of formats (``calypso.ingest.formats``). An upload's type is detected once, at submit
(``detect_media_type``: a claimed type, the name, the magic bytes); the document keeps it, and
``parse_document`` parses as that type without looking at the bytes again.

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

import importlib
import io
import os
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import cast

from calypso.errors import EmptyDocument, UnsupportedMediaType
from calypso.ingest.formats import (
    FORMATS,
    MIMETYPE_MEMBER,
    PDF,
    TEXT,
    Format,
    base_type,
    claimed_format,
    describe_supported,
    format_of,
    named_format,
)
from calypso.ingest.limits import DEFAULT_LIMITS, MAX_ZIP_MEMBERS, ParseLimits
from calypso.locators import locator_style
from calypso.models import ParsedDocument
from calypso.text.control import CONTROL, OffsetShift, clean_text

Parser = Callable[[bytes, str, ParseLimits], ParsedDocument]

# Content types that say nothing about the format: fall through to extension / sniffing.
_GENERIC = {"", "application/octet-stream", "binary/octet-stream", "application/unknown", "application/binary"}
_ZIP_MAGIC = b"PK\x03\x04"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# Starts no text file has: a text label on them is a client's guess (the bytes are looked at).
_UNAMBIGUOUS_STARTS = (b"%PDF", _ZIP_MAGIC)

_BINARY_MAGIC = tuple(fmt for fmt in FORMATS if fmt.magic is not None and not fmt.textual)
_TEXT_MAGIC = tuple(fmt for fmt in FORMATS if fmt.magic is not None and fmt.textual)
_ZIP_PACKAGES = tuple(fmt for fmt in FORMATS if fmt.zip_member is not None)
_OLE_FILES = tuple(fmt for fmt in FORMATS if fmt.ole_stream is not None)


def _zip_package(data: bytes) -> Format | None:
    """The format of a ZIP package by its members (the first row whose marking member it has)."""
    if data.count(b"PK\x01\x02") > MAX_ZIP_MEMBERS:  # central directory entries: not one of ours
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
            for fmt in _ZIP_PACKAGES:
                if fmt.zip_member not in names:
                    continue
                if fmt.zip_member != MIMETYPE_MEMBER:
                    return fmt
                with zf.open(MIMETYPE_MEMBER) as member:  # 64 bytes at most
                    if member.read(64).strip() == fmt.media_type.encode():
                        return fmt
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError):
        return None
    return None


def _sniff(data: bytes) -> Format | None:
    """The format ``data``'s bytes show: binary magic, a ZIP or OLE package, text magic, else text without NULs."""
    head = data[:2048]
    for fmt in _BINARY_MAGIC:
        if fmt.magic is not None and fmt.magic.match(head):
            return fmt
    if head.startswith(_ZIP_MAGIC):
        return _zip_package(data)
    if head.startswith(_OLE_MAGIC):  # among OLE files (old .doc and .xls too): by its stream names
        return next((fmt for fmt in _OLE_FILES if (fmt.ole_stream or "").encode("utf-16-le") in data), None)
    for fmt in _TEXT_MAGIC:
        if fmt.magic is not None and fmt.magic.match(head):
            return fmt
    return format_of(TEXT) if b"\x00" not in head else None


def detect_media_type(data: bytes, filename: str, media_type: str | None = None) -> str:
    """The media type to parse ``data`` as: declared type, else extension, else magic bytes.

    Run once per upload, at submit: the document keeps the type, and parsing reads it (``parse_document``).
    """
    claimed = claimed_format(media_type)
    extension = os.path.splitext(filename or "")[1]
    named = named_format(extension)
    if claimed is not None:
        if claimed.textual and data[:4] in _UNAMBIGUOUS_STARTS:
            sniffed = _sniff(data)
            if sniffed is not None and not sniffed.textual:
                return sniffed.media_type
        # Many clients label every text file text/plain; a .md/.html/.csv name is more specific.
        if claimed.media_type == TEXT and named is not None and named.textual:
            return named.media_type
        return claimed.media_type
    declared = base_type(media_type)
    if declared.startswith("text/") and declared not in _GENERIC and named is None:
        return TEXT  # text/x-rst, text/x-python, ...: readable as plain text
    if named is not None:
        return named.media_type
    sniffed = _sniff(data)
    # PDF, DOCX and HTML are known by their bytes whatever the name. Bytes that merely look like text
    # are read as text only without an extension ("README"): "data.json" or "model.bin" sent as
    # application/octet-stream is a type we do not know, refused rather than indexed as plain text.
    if sniffed is not None and (sniffed.media_type != TEXT or not extension):
        return sniffed.media_type
    raise _unsupported(media_type or extension or "unknown", filename)


def _unsupported(shown: str, filename: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        f"Unsupported file type ({shown}) for {filename!r}. Supported types: {describe_supported()}. "
        "Convert the file to one of these formats and upload it again.",
        param="file",
    )


def _parser(fmt: Format) -> Parser:
    module, _, function = fmt.parser.partition(":")
    return cast(Parser, getattr(importlib.import_module(module), function))


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


def _check_not_empty(data: bytes, filename: str) -> None:
    if not data.strip():
        size = f"{len(data)} bytes" + (" of whitespace" if data else "")
        raise EmptyDocument(f"The file {filename!r} is empty ({size}); upload a file with content.", param="file")


def parse_document(
    data: bytes, filename: str, media_type: str, limits: ParseLimits | None = None
) -> tuple[ParsedDocument, str]:
    """Parse ``data`` as ``media_type``, the type ``detect_media_type`` gave at submit (not looked at again);
    return ``(parsed, media_type)``.

    Raises ``EmptyDocument`` (no bytes / no text), ``UnsupportedMediaType`` (a type not in ``formats.FORMATS``),
    ``UnprocessableDocument`` (corrupt, encrypted or undecodable input, decompression bombs) and
    ``PayloadTooLarge`` (past one of ``limits``: pages, characters, uncompressed size, DOCX elements;
    defaults: the settings' defaults).
    """
    limits = limits or DEFAULT_LIMITS
    _check_not_empty(data, filename)
    fmt = format_of(media_type)
    if fmt is None:
        raise _unsupported(media_type, filename)
    parsed = _without_control_characters(_parser(fmt)(data, filename, limits))
    limits.check_chars(len(parsed.text), filename)  # PDF and DOCX stop early; text formats are checked here
    if not parsed.text.strip():
        hint = (
            " Its pages hold neither a text layer nor text that OCR could recognise."
            if media_type == PDF
            else " Upload a file that contains text."
        )
        raise EmptyDocument(f"No extractable text in {filename!r}.{hint}", param="file")
    _count_parts(parsed, fmt)
    return parsed, media_type


def detect_and_parse(
    data: bytes, filename: str, claimed_type: str | None = None, limits: ParseLimits | None = None
) -> tuple[ParsedDocument, str]:
    """``detect_media_type`` then ``parse_document``: for bytes that come with only a claim (an e-mail's
    attachment, a test's or a benchmark's file); an upload's type is detected at submit instead."""
    _check_not_empty(data, filename)
    return parse_document(data, filename, detect_media_type(data, filename, claimed_type), limits)


def _count_parts(parsed: ParsedDocument, fmt: Format) -> None:
    """The counts ``locators.extent`` says a document's size in: a workbook's sheets, the sections of a document
    located by headings ("4 sections", not "1 page")."""
    style = locator_style(fmt.media_type, len(parsed.pages))
    # setdefault: a Markdown file's own front matter may say "sections:" already; it is the author's, kept.
    if fmt.sheets == "top headings":
        parsed.metadata.setdefault("sheets", sum(1 for heading in parsed.headings if heading.level == 1))
    elif fmt.sheets == "one":
        parsed.metadata.setdefault("sheets", 1)  # one table, however many blocks it is cut into
    elif style == "heading" and parsed.headings:
        parsed.metadata.setdefault("sections", len(parsed.headings))


__all__ = [
    "detect_and_parse",
    "detect_media_type",
    "parse_document",
]
