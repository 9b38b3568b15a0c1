"""Office files the tests make themselves: small workbooks and decks, and hostile ones (bombs, lies, encryption)."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

from testkit.hostile_files import _CHUNK, _repeated_deflate, _zip

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_SHEET_NS = b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'


def workbook(sheets: dict[str, list[list[object]]], merges: dict[str, list[str]] | None = None) -> bytes:
    """An XLSX with ``sheets`` (title -> rows of values, written from A1), saved by openpyxl."""
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
        for ref in (merges or {}).get(title, []):
            sheet.merge_cells(ref)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _deflated(name: str, content: bytes) -> tuple[str, bytes, int, int, int]:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    payload = compressor.compress(content) + compressor.flush()
    return name, payload, zipfile.ZIP_DEFLATED, zlib.crc32(content), len(content)


def with_sheet_xml(data: bytes, sheet_xml: bytes | tuple[bytes, int, int]) -> bytes:
    """The workbook ``data`` with xl/worksheets/sheet1.xml replaced: raw XML, or (deflate, crc, size)."""
    members = []
    for name, content in _members(data).items():
        if name == "xl/worksheets/sheet1.xml" and not isinstance(sheet_xml, bytes):
            deflate, crc, size = sheet_xml
            members.append((name, deflate, zipfile.ZIP_DEFLATED, crc, size))
        else:
            members.append(_deflated(name, sheet_xml if name == "xl/worksheets/sheet1.xml" else content))
    return _zip(members)


def xlsx_zip_bomb(megabytes: int) -> bytes:
    """An XLSX whose first sheet is valid XML padded with ``megabytes`` MB of spaces (about 1 KB per MB)."""
    head = _SHEET_NS + b'<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>Boom</t></is></c></row></sheetData>'
    deflate, crc, _adler, size = _repeated_deflate(head, b" " * _CHUNK, megabytes)
    return with_sheet_xml(workbook({"Sheet1": [["x"]]}), (deflate, crc, size))


def xlsx_formatted_empty_cells(rows: int, columns: int = 100) -> bytes:
    """A sheet whose dimension claims the whole grid and whose ``rows`` x ``columns`` cells are empty but formatted.

    Real files get this way when someone formats whole rows; one cell holds text.
    """
    letters = [_letters(c).encode() for c in range(1, columns + 1)]
    body = b"".join(
        b'<row r="%d">' % r + b"".join(b'<c r="%s%d" s="1"/>' % (letter, r) for letter in letters) + b"</row>"
        for r in range(2, rows + 2)
    )
    xml = (
        _SHEET_NS + b'<dimension ref="A1:XFD1048576"/><sheetData>'
        b'<row r="1"><c r="A1" t="inlineStr"><is><t>Total 42</t></is></c></row>' + body + b"</sheetData></worksheet>"
    )
    return with_sheet_xml(workbook({"Sheet1": [["x"]]}), xml)


def xlsx_lying_dimension() -> bytes:
    """A two-cell sheet whose ``<dimension>`` claims A1:XFD1048576 (17 billion cells)."""
    xml = (
        _SHEET_NS + b'<dimension ref="A1:XFD1048576"/><sheetData>'
        b'<row r="1"><c r="A1" t="inlineStr"><is><t>Region</t></is></c><c r="B1" t="inlineStr"><is><t>Sales</t></is></c></row>'
        b'<row r="2"><c r="A2" t="inlineStr"><is><t>North</t></is></c><c r="B2"><v>1234.5000000001</v></c></row>'
        b"</sheetData></worksheet>"
    )
    return with_sheet_xml(workbook({"Sheet1": [["x"]]}), xml)


def _letters(column: int) -> str:
    letters = ""
    while column:
        column, rest = divmod(column - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def encrypted_office_file() -> bytes:
    """The start of what Office writes for a password-protected PPTX/XLSX/DOCX: an OLE compound file
    (header, then a directory naming the "EncryptionInfo" and "EncryptedPackage" streams) instead of a zip."""
    header = OLE_MAGIC + bytes(16) + struct.pack("<HHHH", 0x3E, 3, 0xFFFE, 9) + bytes(512 - 32)
    entry = b""
    for name in ("Root Entry", "EncryptionInfo", "EncryptedPackage"):
        encoded = (name + "\0").encode("utf-16-le")
        entry += encoded.ljust(64, b"\0") + struct.pack("<H", len(encoded)) + bytes(128 - 66)
    return header + entry.ljust(512, b"\0") + bytes(4096)


def legacy_ole_file() -> bytes:
    """An OLE compound file without encryption streams: what an old .xls or .ppt is."""
    header = OLE_MAGIC + bytes(16) + struct.pack("<HHHH", 0x3E, 3, 0xFFFE, 9) + bytes(512 - 32)
    encoded = "Workbook\0".encode("utf-16-le")
    return header + encoded.ljust(512, b"\0") + bytes(4096)


def deck(slides: list[tuple[str, list[str], str | None]]) -> bytes:
    """A PPTX of (title, bullet lines, notes) slides, saved by python-pptx."""
    import pptx

    presentation = pptx.Presentation()
    layout = presentation.slide_layouts[1]  # Title and Content
    for title, bullets, notes in slides:
        slide = presentation.slides.add_slide(layout)
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = bullets[0] if bullets else ""
        for line in bullets[1:]:
            body.add_paragraph().text = line
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def pptx_zip_bomb(megabytes: int) -> bytes:
    """A PPTX whose first slide is padded with ``megabytes`` MB of spaces."""
    members = []
    for name, content in _members(deck([("Boom", ["x"], None)])).items():
        if name == "ppt/slides/slide1.xml":
            deflate, crc, _adler, size = _repeated_deflate(content, b" " * _CHUNK, megabytes)
            members.append((name, deflate, zipfile.ZIP_DEFLATED, crc, size))
        else:
            members.append(_deflated(name, content))
    return _zip(members)
