"""Document parsers against the real documents in shared/data/ingestion-docs, plus bad input."""

from __future__ import annotations

import collections
import functools
import hashlib
import io
import os
import re
import struct
import zipfile
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from tests_support import eval_data_dir

from calypso.errors import EmptyDocument, UnprocessableDocument, UnsupportedMediaType
from calypso.ingest.formats import DOCX, HTML, MARKDOWN, PDF, TEXT, XHTML
from calypso.ingest.parsers import detect_and_parse, detect_media_type
from calypso.ingest.parsers.pdf import SEPARATOR
from calypso.models import ParsedDocument
from calypso.text.control import clean_text


def docs() -> Path:
    return eval_data_dir() / "ingestion-docs"


def read(relative: str) -> bytes:
    return (docs() / relative).read_bytes()


@functools.cache  # several tests read the same big documents
def parse_file(relative: str) -> ParsedDocument:
    return detect_and_parse(read(relative), Path(relative).name)[0]


def assert_well_formed(parsed: ParsedDocument) -> None:
    pages = parsed.pages
    assert pages and pages[0].start == 0 and pages[-1].end == len(parsed.text)
    for before, after in zip(pages, pages[1:]):
        assert after.start == before.end and after.number == before.number + 1
    for heading in parsed.headings:
        line = parsed.text[heading.start :].split("\n", 1)[0]
        assert heading.start == 0 or parsed.text[heading.start - 1] == "\n"
        assert heading.title in line, (heading, line)


def _all_documents() -> list[str]:
    default = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
    root = Path(os.environ.get("CALYPSO_EVAL_DATA", default)).resolve() / "ingestion-docs"
    if not root.is_dir():
        return ["<missing>"]  # the test then skips (or fails under CI) via eval_data_dir()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("relative", _all_documents())
def test_every_document_parses(relative: str) -> None:
    eval_data_dir()
    parsed = parse_file(relative)
    assert parsed.text.strip()
    assert_well_formed(parsed)


# --- PDF ---------------------------------------------------------------------------------


def raw_page_texts(data: bytes) -> list[str]:
    pdf = pdfium.PdfDocument(data)
    try:
        texts = []
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return texts
    finally:
        pdf.close()


def test_geotopo_page_labels_and_page_text() -> None:
    data = read("pdf/GeoTopo-komprimiert.pdf")
    parsed, media_type = detect_and_parse(data, "GeoTopo-komprimiert.pdf")
    assert media_type == PDF
    assert parsed.title == "Geometrie und Topologie"
    assert len(parsed.pages) == 117
    labels = [page.label for page in parsed.pages]
    assert labels == ["i", "ii", "iii"] + [str(n) for n in range(1, 115)]
    assert (parsed.pages[3].number, parsed.pages[3].label) == (4, "1")  # physical page 4 is labelled "1"
    for page, raw in zip(parsed.pages, raw_page_texts(data)):
        span = parsed.text[page.start : page.end]
        if page.number < len(parsed.pages):
            assert span.endswith(SEPARATOR)
            span = span[: -len(SEPARATOR)]
        assert span == span.rstrip() and "\r" not in span
        assert span.split() == clean_text(raw.replace("\ufffe", "")).split()


def test_pdf_without_page_labels_numbers_pages() -> None:
    parsed = parse_file("pdf/federal-register-2020-17221.pdf")
    assert [page.label for page in parsed.pages] == [str(n) for n in range(1, 16)]
    assert "Airworthiness" in parsed.text


def test_pdf_400_pages_parse() -> None:
    # Speed against raw pypdfium2 is measured by bench/ingest_speed.py, not asserted here.
    parsed, _ = detect_and_parse(read("pdf/irs-irm-2.3.59-400p.pdf"), "irs.pdf")
    assert len(parsed.pages) == 400
    assert_well_formed(parsed)


def test_truncated_pdf_is_unprocessable() -> None:
    data = read("pdf/ALCE-paper-2305.14627v1.pdf")
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(data[: int(len(data) * 0.3)], "truncated.pdf")
    assert info.value.param == "file" and "truncated" in info.value.message
    assert isinstance(info.value.__cause__, pdfium.PdfiumError)


def test_random_binary_named_pdf_is_unprocessable() -> None:
    noise = bytes(random_bytes(4096))
    with pytest.raises(UnprocessableDocument):
        detect_and_parse(noise, "scan.pdf")


def random_bytes(n: int) -> bytes:
    return hashlib.shake_256(b"calypso").digest(n)  # deterministic "random" binary


_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")


def _rc4(key: bytes, data: bytes) -> bytes:
    s, j = list(range(256)), 0
    for i in range(256):
        j = (j + s[i] + key[i % len(key)]) % 256
        s[i], s[j] = s[j], s[i]
    out, i, j = bytearray(), 0, 0
    for byte in data:
        i = (i + 1) % 256
        j = (j + s[i]) % 256
        s[i], s[j] = s[j], s[i]
        out.append(byte ^ s[(s[i] + s[j]) % 256])
    return bytes(out)


def encrypted_pdf(user_password: bytes = b"secret", text: str = "Top secret") -> bytes:
    """A one-page PDF encrypted with the Standard security handler (RC4 40-bit, R2), by hand:
    no tool in the venv (pypdfium2 included) can write encryption."""
    padded = (user_password + _PAD)[:32]
    owner = _rc4(hashlib.md5((b"owner" + _PAD)[:32]).digest()[:5], padded)
    permissions, file_id = -44, b"calypso-test-id!"
    key = hashlib.md5(padded + owner + struct.pack("<i", permissions) + file_id).digest()[:5]
    user = _rc4(key, _PAD)
    content = f"BT /F1 24 Tf 72 700 Td ({text}) Tj ET".encode()
    stream = _rc4(hashlib.md5(key + (4).to_bytes(3, "little") + b"\0\0").digest()[:10], content)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P %d >>"
        % (owner.hex().encode(), user.hex().encode(), permissions),
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Encrypt 6 0 R /ID [<%s> <%s>] >>\n" % (
        len(objects) + 1,
        file_id.hex().encode(),
        file_id.hex().encode(),
    )
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def test_encrypted_pdf_is_unprocessable_with_a_fix() -> None:
    data = encrypted_pdf()
    # The fixture is a real encrypted PDF: with the password PDFium decrypts the text.
    pdf = pdfium.PdfDocument(data, password="secret")
    try:
        page = pdf[0]
        textpage = page.get_textpage()
        assert "Top secret" in textpage.get_text_range()
        textpage.close()
        page.close()
    finally:
        pdf.close()
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(data, "locked.pdf")
    assert "encrypted" in info.value.message and "unencrypted copy" in info.value.message
    assert info.value.param == "file" and info.value.status == 422
    assert isinstance(info.value.__cause__, pdfium.PdfiumError)


def test_pdf_without_text_is_empty_document() -> None:
    pdf = pdfium.PdfDocument.new()
    pdf.new_page(612, 792)
    buffer = io.BytesIO()
    pdf.save(buffer)
    pdf.close()
    with pytest.raises(EmptyDocument) as info:
        detect_and_parse(buffer.getvalue(), "scan.pdf")
    assert "OCR" in info.value.message and info.value.param == "file"


# --- DOCX --------------------------------------------------------------------------------


def test_docx_tables_in_body_order() -> None:
    parsed = parse_file("docx/docx-tables.docx")
    lines = parsed.text.split("\n")
    assert lines[:3] == ["Simple uniform table", "| Header Col 1 | Header Col 2 |", "| Lorem ipsum | A link example |"]
    assert lines.index("Nested Table") < lines.index("| a | >b< | c |") < lines.index("Table with merged cells")
    assert "| d | e | f g&t | h | i |" in lines  # the nested table's cells sit inside their parent cell
    # Merged cells: a horizontal span appears once, a vertical merge repeats its value.
    assert lines[-3:] == ["| a | b |", "| a | c | d |", "| e | d |"]


def test_docx_headings_and_title() -> None:
    parsed = parse_file("docx/word_sample.docx")
    assert parsed.title == "Swimming in the lake"  # the "Title" style paragraph
    assert [(h.level, h.title) for h in parsed.headings] == [
        (1, "Swimming in the lake"),
        (1, "Let’s swim!"),
        (2, "Let’s eat"),
    ]
    assert "Leaves | Ash, Elm, Maple | 50" in parsed.text
    assert_well_formed(parsed)


def test_big_docx_handbook() -> None:
    data = read("docx/doj-ust-chapter13-trustee-handbook-872p.docx")
    parsed, media_type = detect_and_parse(data, "handbook.docx")
    assert media_type == DOCX and len(parsed.text) > 700_000
    levels = collections.Counter(h.level for h in parsed.headings)
    assert levels == {1: 14, 2: 90, 3: 190}, levels
    assert parsed.headings[0].title == "CHAPTER 1 – INTRODUCTION"
    assert_well_formed(parsed)


def test_corrupt_docx_is_unprocessable() -> None:
    data = read("docx/word_sample.docx")
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(data[: len(data) // 3], "broken.docx")
    assert "DOCX" in info.value.message and info.value.__cause__ is not None


# --- HTML --------------------------------------------------------------------------------


def _tokens(text: str) -> collections.Counter:
    text = re.sub(r"\]\([^)]*\)", "]", text)  # ignore markdown link targets
    return collections.Counter(re.findall(r"\w+", text.lower()))


def token_f1(candidate: str, reference: str) -> float:
    a, b = _tokens(candidate), _tokens(reference)
    overlap = sum((a & b).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(a.values()), overlap / sum(b.values())
    return 2 * precision * recall / (precision + recall)


def test_html_main_content_close_to_groundtruth() -> None:
    parsed = parse_file("html/wiki_duck.html")
    groundtruth = read("html/wiki_duck.html.groundtruth.md").decode("utf-8")
    # 0.911 measured; the groundtruth also keeps chrome (language list, categories) we drop on purpose.
    assert token_f1(parsed.text, groundtruth) >= 0.88
    assert parsed.title == "Duck - Wikipedia"
    titles = [h.title for h in parsed.headings]
    assert titles[:3] == ["Duck", "Etymology", "Taxonomy"] and "Cultural references" in titles
    assert "| Kingdom: | Animalia |" in parsed.text  # the infobox table
    assert "<sup>" not in parsed.text and "[1]" in parsed.text
    for chrome in ("Jump to content", "Create account", "Personal tools", "Random article", "Privacy policy"):
        assert chrome not in parsed.text


def test_html_10k_filing() -> None:
    parsed = parse_file("html/sec-10k-galaxy-gaming-fy2021.html")
    assert "Galaxy Gaming, Inc." in parsed.text and "ANNUAL REPORT PURSUANT TO SECTION 13" in parsed.text
    assert "| Exhibit Number |" in parsed.text


def test_html_falls_back_to_body_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from calypso.ingest.parsers import html as html_parser

    html = b"<html><head><title> Tiny </title><script>var x=1;</script></head>"
    html += b"<body><div>Hello there</div></body></html>"
    parsed, media_type = detect_and_parse(html, "tiny.html")
    assert media_type == HTML and parsed.title == "Tiny" and parsed.text == "Hello there"
    # When trafilatura finds no main content, the <body> text is used, without scripts.
    monkeypatch.setattr(html_parser.trafilatura, "extract", lambda *args, **kwargs: None)
    page = html.replace(b"</div>", b"</div><p>More  words</p><table><tr><td>a</td><td>b</td></tr></table>")
    parsed, _ = detect_and_parse(page, "tiny.html")
    assert parsed.text == "Hello there\nMore words\na | b" and parsed.headings == []
    for blank in (b"<html><body><script>x()</script></body></html>", b"<!-- only a comment -->"):
        with pytest.raises(EmptyDocument):
            detect_and_parse(blank, "blank.html")


# --- Markdown and plain text -------------------------------------------------------------

FRONT_MATTER_DOC = """---
title: Refund policy
updated: 2024-05-01
tags: [billing, refunds]
---

# Refunds

Intro text.

```
# not a heading
```

## Timing ##
Refunds take 5 days.
"""


def test_markdown_front_matter_and_headings() -> None:
    parsed, media_type = detect_and_parse(FRONT_MATTER_DOC.encode(), "policy.md")
    assert media_type == MARKDOWN
    assert parsed.metadata == {
        "title": "Refund policy",
        "updated": "2024-05-01",
        "tags": ["billing", "refunds"],
        "sections": 2,  # its headings: "2 sections" where a PDF says "6 pages"
    }
    assert parsed.title == "Refund policy"
    assert parsed.text.startswith("# Refunds") and "updated:" not in parsed.text
    assert [(h.level, h.title) for h in parsed.headings] == [(1, "Refunds"), (2, "Timing")]
    assert parsed.text[parsed.headings[1].start :].startswith("## Timing")
    assert_well_formed(parsed)


def test_markdown_bad_front_matter_is_kept() -> None:
    source = "---\ntitle: [unclosed\n---\n# Heading\nbody\n"
    parsed, _ = detect_and_parse(source.encode(), "bad.markdown")
    assert parsed.text.startswith("---\ntitle: [unclosed") and parsed.metadata == {"sections": 1}
    assert parsed.title == "Heading"


def test_front_matter_keeps_its_own_sections_key() -> None:
    parsed, _ = detect_and_parse(b"---\nsections: [intro, fees]\n---\n# Intro\n\nText.\n", "own.md")
    assert parsed.metadata == {"sections": ["intro", "fees"]}  # the author's, not replaced by the heading count


def test_github_terms_front_matter() -> None:
    parsed = parse_file("md/github-terms-of-service.md")
    assert parsed.title == "GitHub Terms of Service" and "/tos" in parsed.metadata["redirect_from"]
    assert not parsed.text.startswith("---")
    assert any(h.title == "A. Definitions" and h.level == 2 for h in parsed.headings)


@pytest.mark.parametrize(
    "data, expected",
    [
        ("naïve café".encode("utf-8-sig"), "naïve café"),
        ("naïve café".encode("utf-16"), "naïve café"),
        ("price 5€ café".encode("cp1252"), "price 5€ café"),
        (b"line one\r\nline two\rthree\n", "line one\nline two\nthree"),
    ],
)
def test_text_decoding(data: bytes, expected: str) -> None:
    parsed, media_type = detect_and_parse(data, "notes.txt")
    assert media_type == TEXT and parsed.text == expected
    assert_well_formed(parsed)


def test_text_with_nul_bytes_is_rejected() -> None:
    with pytest.raises(UnsupportedMediaType):
        detect_and_parse(b"abc\x00\x01\x02def" * 10, "data.txt")


# --- Detection and errors ----------------------------------------------------------------


def test_media_type_detection() -> None:
    pdf_bytes = read("pdf/dpr-paper-multi-column-2p.pdf")
    docx_bytes = read("docx/docx-tables.docx")
    assert detect_media_type(pdf_bytes, "upload", "application/octet-stream") == PDF
    assert detect_media_type(docx_bytes, "upload", None) == DOCX
    assert detect_media_type(docx_bytes, "report.docx", "application/zip") == DOCX
    assert detect_media_type(pdf_bytes, "paper.pdf", "text/plain") == PDF  # magic beats a text label
    assert detect_media_type(b"<p>x</p>", "page.htm") == HTML
    assert detect_media_type(b"<p>x</p>", "page", "application/xhtml+xml; charset=utf-8") == XHTML
    assert detect_media_type(b"# x", "notes.md", "text/plain") == MARKDOWN
    assert detect_media_type(b"a,b", "table.csv", "text/csv") == "text/csv"  # a table, read as one
    assert detect_media_type(b"a\tb", "table.tsv", "text/plain") == "text/tab-separated-values"
    assert detect_media_type(b"<!DOCTYPE html><html></html>", "page") == HTML
    assert detect_media_type(b"just words", "README") == TEXT


def test_empty_file_is_rejected() -> None:
    with pytest.raises(EmptyDocument) as info:
        detect_and_parse(b"", "empty.pdf")
    assert info.value.param == "file" and info.value.code == "empty_file"
    with pytest.raises(EmptyDocument):
        detect_and_parse(b" \n\n\t ", "blank.txt")


@pytest.mark.parametrize("filename", ["setup.exe", "archive.zip"])
def test_unsupported_types_list_what_is_supported(filename: str) -> None:
    if filename.endswith(".zip"):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            zf.writestr("a.bin", random_bytes(100))
        data = buffer.getvalue()
    else:
        data = b"MZ\x90\x00\x03\x00\x00\x00" + random_bytes(200)
    with pytest.raises(UnsupportedMediaType) as info:
        detect_and_parse(data, filename)
    message = info.value.message
    assert info.value.param == "file" and info.value.status == 415
    for item in ("application/pdf", ".docx", "text/html", ".md", "text/plain", ".txt"):
        assert item in message


def test_text_contradicting_its_bom_is_unprocessable() -> None:
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(b"\xef\xbb\xbfcaf\xe9 au lait", "notes.txt")
    assert "UTF-8 byte-order mark" in info.value.message and info.value.__cause__ is not None
