"""Refuse decompression bombs before a parser expands them.

python-docx reads every zip member whole and PDFium inflates a whole stream before parsing it, so
by the time either notices trouble the memory is spent: a 3 MB DOCX reached 6 GB, a 1 MB PDF 2 GB.
Here the compressed parts are inflated once, a piece at a time and thrown away, counting bytes and
stopping at the first limit, so this check itself needs about one piece of memory.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator

from calypso.errors import UnprocessableDocument
from calypso.ingest.limits import MAX_ZIP_MEMBERS, RATIO_FLOOR_BYTES, ParseLimits, suspicious_ratio, too_large

_PIECE = 1 << 20  # most output bytes per inflate call
_FEED = 1 << 16  # input bytes per inflate call
_XML_PARTS = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx")  # DOCX parts, EPUB chapters
_STREAM = re.compile(rb"stream\r?\n")  # the keyword that opens a PDF stream's data (also ends "endstream")


def _inflate(data: memoryview, start: int, end: int, wbits: int) -> Iterator[tuple[bytes, int]]:
    """Inflate ``data[start:end]`` piece by piece: yields (output piece, input bytes consumed so far).

    Stops at the end of the deflate stream; raises ``zlib.error`` on data that is not one.
    """
    inflater = zlib.decompressobj(wbits)
    pos = start
    while pos < end and not inflater.eof:
        pending: bytes | memoryview = data[pos : min(pos + _FEED, end)]
        pos += len(pending)
        while pending and not inflater.eof:
            piece = inflater.decompress(pending, _PIECE)
            pending = inflater.unconsumed_tail
            yield piece, pos - start - len(pending) - len(inflater.unused_data)


def _start_tags(piece: bytes, after_lt: bool) -> int:
    """Start tags (elements) in a piece of XML; ``after_lt``: the previous piece ended with "<"."""
    count = piece.count(b"<") - piece.count(b"</") - piece.count(b"<?") - piece.count(b"<!")
    if after_lt and piece[:1] in (b"/", b"?", b"!"):
        count -= 1  # "</", "<?" or "<!" split across two pieces: that "<" was counted as a start tag
    return count


def _member_data_offset(data: bytes, info: zipfile.ZipInfo, filename: str, kind: str) -> int:
    header = data[info.header_offset : info.header_offset + 30]
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise UnprocessableDocument(
            f"{filename!r} is not a readable {kind} file: its zip structure is damaged ({info.filename}). "
            "Open it in its application, save it again and upload the new file.",
            param="file",
        )
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return int(info.header_offset) + 30 + int(name_length) + int(extra_length)


def _article(name: str) -> str:
    """ "an" before a name read letter by letter from a vowel sound (an EPUB, an XLSX), else "a" (a PPTX)."""
    return "an" if name[:1].upper() in "AEFHILMNORSX" else "a"


def check_zip_package(data: bytes, filename: str, limits: ParseLimits, kind: str = "DOCX") -> None:
    """Refuse a DOCX (or another zip package: ``kind`` names it, e.g. "EPUB") whose members would expand
    past the limits, before its parser reads them.

    Declared sizes and ratios are checked first (free); then every member is inflated once to
    confirm it expands to no more than it declares (zipfile trusts the declaration and may inflate up
    to 1 GB at once before cutting to it), counting XML elements on the way.
    """
    members = data.count(b"PK\x01\x02")  # central directory entries (an upper bound): before zipfile lists them
    if members > MAX_ZIP_MEMBERS:
        raise UnprocessableDocument(
            f"{filename!r} is a zip of about {members:,} files; "
            + (
                "a Word document has a few dozen"
                if kind == "DOCX"
                else f"{_article(kind)} {kind} file has a few hundred"
            )
            + f" (at most {MAX_ZIP_MEMBERS:,} are read). Upload the {kind.lower()} file as its application saves it.",
            param="file",
        )
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
        return  # not a zip at all: python-docx reports it as an unreadable DOCX
    declared = sum(info.file_size for info in infos)
    if declared > limits.max_uncompressed_bytes:
        raise too_large(
            f"{filename!r} expands to {declared:,} bytes when unzipped",
            limits,
            "max_uncompressed_bytes",
            "uncompressed_too_large",
        )
    for info in infos:
        if info.flag_bits & 0x1:
            raise UnprocessableDocument(
                f"{filename!r} has an encrypted zip member ({info.filename}); upload an unencrypted copy.", param="file"
            )
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UnprocessableDocument(
                f"{filename!r} uses zip compression method {info.compress_type} for {info.filename}, which no {kind} "
                "writer uses. Open it in its application, save it again and upload the new file.",
                param="file",
            )
        if info.file_size > RATIO_FLOOR_BYTES and info.file_size > limits.max_compression_ratio * info.compress_size:
            raise suspicious_ratio(
                filename, info.filename, info.file_size, info.compress_size, limits.max_compression_ratio
            )

    view = memoryview(data)
    elements = 0
    for info in infos:
        start = _member_data_offset(data, info, filename, kind)
        end = start + info.compress_size
        xml = kind != "XLSX" and info.filename.lower().endswith(_XML_PARTS)  # XLSX cells: counted as read
        if info.compress_type == zipfile.ZIP_STORED:
            pieces: Iterator[tuple[bytes, int]] = iter([(bytes(view[start:end]), end - start)])
        else:
            pieces = _inflate(view, start, end, -15)
        produced, after_lt = 0, False
        try:
            for piece, _consumed in pieces:
                produced += len(piece)
                if produced > info.file_size:
                    raise UnprocessableDocument(
                        f"{filename!r} is not a readable {kind} file: {info.filename} expands to more than the "
                        f"{info.file_size:,} bytes it declares. Re-save it in its application and upload it again.",
                        param="file",
                    )
                if xml and piece:
                    elements += _start_tags(piece, after_lt)
                    after_lt = piece.endswith(b"<")
        except zlib.error as exc:
            raise UnprocessableDocument(
                f"{filename!r} is not a readable {kind} file: {info.filename} is corrupt ({exc}). "
                "Check that the whole file was uploaded, or re-save it in its application.",
                param="file",
            ) from exc
        if elements > limits.max_docx_elements:
            raise too_large(
                f"{filename!r} holds at least {elements:,} XML elements (paragraphs, runs, cells...)",
                limits,
                "max_docx_elements",
                "too_many_elements",
            )


def check_flate_streams(data: bytes, filename: str, limits: ParseLimits) -> None:
    """Refuse a PDF with a Flate stream that expands past the limits, before PDFium inflates it.

    Every stream whose data starts with a zlib header is inflated in pieces: it may not pass
    ``max_uncompressed_bytes``, nor expand more than ``max_compression_ratio`` times once past 1 MB.
    Images are skipped: text extraction never decodes them, and blank scans compress 1000:1 too.
    The check itself stops after inflating ``max_uncompressed_bytes`` in all, so that it cannot be
    made to burn CPU on a file of many streams. What it does not see (images mislabelled, encrypted
    PDFs, streams behind other filters such as ASCIIHex or LZW, whatever comes after the budget) is
    bounded by the memory cap of the parsing child PDFs are parsed in (see ``calypso.ingest.isolation``).
    """
    view = memoryview(data)
    budget = limits.max_uncompressed_bytes
    for match in _STREAM.finditer(data):
        start = match.end()
        header = data[start : start + 2]
        if len(header) < 2 or header[0] & 0x0F != 8 or (header[0] << 8 | header[1]) % 31:
            continue  # not zlib data: another filter, an image format, encrypted, or "endstream"
        dictionary_start = data.rfind(b"obj", max(0, match.start() - 4096), match.start())
        if dictionary_start >= 0 and b"/Image" in data[dictionary_start : match.start()]:
            continue
        produced = 0
        try:
            for piece, consumed in _inflate(view, start, len(data), 15):
                produced += len(piece)
                if produced > limits.max_uncompressed_bytes:
                    raise too_large(
                        f"{filename!r} has a compressed stream (at byte {start:,}) that expands to more than "
                        f"{limits.max_uncompressed_bytes:,} bytes",
                        limits,
                        "max_uncompressed_bytes",
                        "uncompressed_too_large",
                    )
                if produced > RATIO_FLOOR_BYTES and produced > limits.max_compression_ratio * consumed:
                    raise suspicious_ratio(
                        filename, f"the stream at byte {start:,}", produced, consumed, limits.max_compression_ratio
                    )
        except zlib.error:
            pass  # PDFium copes with (or reports) a broken stream itself
        budget -= produced
        if budget < 0:
            return
