"""Hostile inputs built on the fly: zip bombs, paragraph floods, Flate bombs, heading floods.

Everything is generated in memory and stays small (a few MB at most) however much it expands to,
so no large binary is ever committed. ``bench/hostile_inputs.py`` measures the same files.
"""

from __future__ import annotations

import io
import os
import struct
import subprocess
import sys
import textwrap
import zipfile
import zlib

_CHUNK = 1 << 20


def _repeated_deflate(head: bytes, chunk: bytes, repeats: int) -> tuple[bytes, int, int, int]:
    """Raw deflate of ``head + chunk * repeats`` without compressing every copy.

    After a full flush the compressor starts from scratch, so compressing the same chunk again gives
    the same bytes: one block is compressed and then repeated. Returns (deflate, crc32, adler32, size).
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = compressor.compress(head) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert block == again, "zlib did not repeat itself after a full flush"
    deflate = first + block * repeats + compressor.flush()
    crc, adler = zlib.crc32(head), zlib.adler32(head)
    for _ in range(repeats):
        crc, adler = zlib.crc32(chunk, crc), zlib.adler32(chunk, adler)
    return deflate, crc, adler, len(head) + len(chunk) * repeats


def _zip(members: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A zip from (name, payload, method, crc32, uncompressed size); payload already compressed."""
    out = io.BytesIO()
    central = []
    for name, payload, method, crc, size in members:
        offset = out.tell()
        encoded = name.encode()
        out.write(
            struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(payload), size, len(encoded), 0)
        )
        out.write(encoded + payload)
        central.append(
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                method,
                0,
                0x21,
                crc,
                len(payload),
                size,
                len(encoded),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + encoded
        )
    start = out.tell()
    for entry in central:
        out.write(entry)
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), out.tell() - start, start, 0))
    return out.getvalue()


def _template_docx() -> dict[str, bytes]:
    """The members of a minimal valid DOCX (python-docx's default template)."""
    import docx

    buffer = io.BytesIO()
    docx.Document().save(buffer)
    with zipfile.ZipFile(buffer) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _docx_with(document_xml: tuple[bytes, int, int] | bytes) -> bytes:
    """The template DOCX with its word/document.xml replaced: raw bytes, or (deflate, crc, size)."""
    members = []
    for name, content in _template_docx().items():
        if name == "word/document.xml":
            if isinstance(document_xml, bytes):
                content = document_xml
            else:
                deflate, crc, size = document_xml
                members.append((name, deflate, zipfile.ZIP_DEFLATED, crc, size))
                continue
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        members.append(
            (
                name,
                compressor.compress(content) + compressor.flush(),
                zipfile.ZIP_DEFLATED,
                zlib.crc32(content),
                len(content),
            )
        )
    return _zip(members)


_W = b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'


def docx_zip_bomb(megabytes: int) -> bytes:
    """A DOCX whose word/document.xml is valid XML padded with ``megabytes`` MB of spaces (about 1 KB per MB)."""
    head = _W + b"<w:p><w:r><w:t>Boom</w:t></w:r></w:p></w:body></w:document>"
    deflate, crc, _adler, size = _repeated_deflate(head, b" " * _CHUNK, megabytes)
    return _docx_with((deflate, crc, size))


def docx_paragraph_flood(paragraphs: int) -> bytes:
    """A DOCX of ``paragraphs`` one-word paragraphs (7 M of them fit in well under 1 MB)."""
    paragraph = b"<w:p><w:r><w:t>x</w:t></w:r></w:p>"
    per_chunk = _CHUNK // len(paragraph)
    chunks, rest = divmod(paragraphs, per_chunk)
    head = _W + paragraph * rest
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail = b"</w:body></w:document>"
    first = compressor.compress(head) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(paragraph * per_chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    deflate = first + block * chunks + compressor.compress(tail) + compressor.flush()
    crc = zlib.crc32(head)
    body = paragraph * per_chunk
    for _ in range(chunks):
        crc = zlib.crc32(body, crc)
    crc = zlib.crc32(tail, crc)
    return _docx_with((deflate, crc, len(head) + len(body) * chunks + len(tail)))


def pdf_flate_bomb(megabytes: int, text: str = "Hello bomb") -> bytes:
    """A one-page PDF with a little text whose content stream inflates to about ``megabytes`` MB of spaces."""
    head = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET\n".encode()
    deflate, _crc, adler, _size = _repeated_deflate(head, b" " * _CHUNK, megabytes)
    stream = b"\x78\xda" + deflate + struct.pack(">I", adler)  # zlib wrapper: header, raw deflate, Adler-32
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return pdf_from_objects(objects)


def pdf_hex_flate_bomb(megabytes: int) -> bytes:
    """``pdf_flate_bomb`` with its stream hex-encoded first (/Filter [/ASCIIHexDecode /FlateDecode]).

    No zlib header shows in the file, so only a memory cap around PDFium stops this one.
    """
    head = b"BT /F1 12 Tf 72 720 Td (Hello hex bomb) Tj ET\n"
    deflate, _crc, adler, _size = _repeated_deflate(head, b" " * _CHUNK, megabytes)
    stream = (b"\x78\xda" + deflate + struct.pack(">I", adler)).hex().encode() + b">"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter [/ASCIIHexDecode /FlateDecode] >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return pdf_from_objects(objects)


def pdf_many_pages(pages: int) -> bytes:
    """A PDF of ``pages`` pages that all share one tiny content stream (about 40 bytes per page)."""
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
        b"<< /Length 37 >>\nstream\nBT /F1 12 Tf 72 720 Td (Page) Tj ET\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources << /Font << /F1 4 0 R >> >> >>"
    objects.extend([page] * pages)
    return pdf_from_objects(objects)


def pdf_blank_image(megabytes: int) -> bytes:
    """A one-page PDF with a line of text over a blank grey image of ``megabytes`` MB (it compresses 1000:1).

    Scans with blank pages look like this: a legitimate image that must not be taken for a bomb.
    """
    side = 1024 * int(megabytes**0.5)  # rows of 1 KB: side x side bytes is about ``megabytes`` MB
    deflate, _crc, adler, _size = _repeated_deflate(b"", b"\xff" * (side * 1024), side // 1024)
    image = b"\x78\xda" + deflate + struct.pack(">I", adler)
    content = b"q 612 0 0 792 0 0 cm /Im1 Do Q BT /F1 12 Tf 72 720 Td (Scanned page) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> /XObject << /Im1 6 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 "
        b"/Filter /FlateDecode /Length %d >>\nstream\n" % (side, side, len(image)) + image + b"\nendstream",
    ]
    return pdf_from_objects(objects)


def pdf_image_only_pages(pages: int) -> bytes:
    """A PDF of ``pages`` pages without text, each showing the same small grey image: a huge "scan" in a few
    hundred bytes a page: 10,000 pages in 1.6 MB)."""
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    pixels = zlib.compress(b"\x80" * (64 * 64))
    content = b"q 612 0 0 792 0 0 cm /Im1 Do Q"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /XObject /Subtype /Image /Width 64 /Height 64 /ColorSpace /DeviceGray /BitsPerComponent 8 "
        b"/Filter /FlateDecode /Length %d >>\nstream\n" % len(pixels) + pixels + b"\nendstream",
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources << /XObject << /Im1 4 0 R >> >> >>"
    objects.extend([page] * pages)
    return pdf_from_objects(objects)


def png_bomb(side: int) -> bytes:
    """A ``side`` x ``side`` 1-bit PNG of blank rows: a few KB that decode to side^2 pixels (20,000: 400 million)."""
    row = b"\x00" + b"\x00" * ((side + 7) // 8)  # filter byte, then the row's bits
    deflate, _crc, adler, _size = _repeated_deflate(b"", row * 1000, side // 1000)
    idat = b"\x78\xda" + deflate + struct.pack(">I", adler)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def docx_lying_member(megabytes: int) -> bytes:
    """A DOCX whose word/document.xml declares 100 bytes but inflates to ``megabytes`` MB.

    Its CRC matches the first 100 bytes, so zipfile, which stops at the declared size, sees nothing wrong.
    """
    head = _W + b"<w:p><w:r><w:t>Liar</w:t></w:r></w:p></w:body></w:document>"
    deflate, _crc, _adler, _size = _repeated_deflate(head, b" " * _CHUNK, megabytes)
    return _docx_with((deflate, zlib.crc32(head[:100]), 100))


def docx_many_members(count: int) -> bytes:
    """The template DOCX plus ``count`` empty extra zip members."""
    members = [
        (name, content, zipfile.ZIP_STORED, zlib.crc32(content), len(content))
        for name, content in _template_docx().items()
    ]
    members += [(f"customXml/extra{i}.bin", b"", zipfile.ZIP_STORED, 0, 0) for i in range(count)]
    return _zip(members)


def pdf_from_objects(objects: list[bytes]) -> bytes:
    """A PDF of these numbered objects (object 1 the catalog), with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def markdown_heading_flood(headings: int) -> bytes:
    return "".join(f"## Heading {i}\nBody of section {i}.\n\n" for i in range(headings)).encode()


def html_crowded_tag(attributes: int) -> bytes:
    """One <div> carrying ``attributes`` attributes (200,000: 2.3 MB), around one sentence of text."""
    crowd = b" ".join(b'data-a%d="1"' % i for i in range(attributes))
    return (
        b"<html><body><article><div "
        + crowd
        + b"><p>The only sentence of this crowded page.</p></div></article></body></html>"
    )


def run_isolated(code: str, *, memory_bytes: int | None = None, cpu_seconds: int | None = None) -> str:
    """Run ``code`` in a fresh Python with an address-space and/or CPU-time cap; return its stdout.

    The caps turn "uses gigabytes" and "takes hours" into a failed test instead of a stalled or
    swapping test run: the child dies (or raises MemoryError) at the cap. They are far above what
    the fixed code needs, so they never decide a passing run.
    """
    prelude = "import resource\n"
    if memory_bytes is not None:
        prelude += f"resource.setrlimit(resource.RLIMIT_AS, ({memory_bytes}, {memory_bytes}))\n"
    if cpu_seconds is not None:
        prelude += f"resource.setrlimit(resource.RLIMIT_CPU, ({cpu_seconds}, {cpu_seconds + 5}))\n"  # SIGXCPU first
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True, env=env
    )
    if result.returncode != 0:
        raise AssertionError(
            f"isolated run failed (exit {result.returncode}; -24 is SIGXCPU: it ran out of CPU time)\n"
            f"stdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-4000:]}"
        )
    return result.stdout


def epub_zip_bomb(megabytes: int) -> bytes:
    """A valid little EPUB whose one chapter is padded with ``megabytes`` MB of spaces (about 1 KB per MB)."""
    container = (
        b'<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0">'
        b'<rootfiles><rootfile full-path="c.opf" media-type="application/oebps-package+xml"/></rootfiles></container>'
    )
    opf = (
        b'<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>'
        b'<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
        b'<spine><itemref idref="c1"/></spine></package>'
    )
    head = b'<html xmlns="http://www.w3.org/1999/xhtml"><body><h1>Boom</h1><p>Tiny text.</p></body></html>'
    deflate, crc, _adler, size = _repeated_deflate(head, b" " * _CHUNK, megabytes)
    stored = [("mimetype", b"application/epub+zip"), ("META-INF/container.xml", container), ("c.opf", opf)]
    members = [(name, data, zipfile.ZIP_STORED, zlib.crc32(data), len(data)) for name, data in stored]
    members.append(("c1.xhtml", deflate, zipfile.ZIP_DEFLATED, crc, size))
    return _zip(members)
