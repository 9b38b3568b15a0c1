"""A scan's pages OCR'd across the parse children, and counted page by page (issue 40)."""

from __future__ import annotations

import io

import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw, ImageFont

from calypso.errors import UnprocessableDocument
from calypso.ingest.isolation import ParserPool
from calypso.ingest.limits import ParseLimits
from calypso.ingest.ocr_share import local_progress
from calypso.ingest.parsers import detect_and_parse
from calypso.services.ingestion import Upload

CAP = 2 * 1024**3
WORDS = ["granite", "harbour", "meadow", "lantern", "orchard", "compass"]


def scanned_pdf(pages: int) -> bytes:
    """An image-only PDF: page i shows "Page i" and a word of its own, as a 100 dpi scan would."""
    font = ImageFont.load_default(36)
    document = pdfium.PdfDocument.new()
    try:
        for index in range(pages):
            image = Image.new("L", (850, 1100), 255)
            draw = ImageDraw.Draw(image)
            draw.text((80, 120), f"Page {index + 1} of the survey", font=font, fill=0)
            draw.text((80, 200), f"The {WORDS[index % len(WORDS)]} stands here.", font=font, fill=0)
            jpeg = io.BytesIO()
            image.save(jpeg, "JPEG", quality=85)
            page = document.new_page(612, 792)
            picture = pdfium.PdfImage.new(document)
            picture.load_jpeg(io.BytesIO(jpeg.getvalue()), inline=True)
            picture.set_matrix(pdfium.PdfMatrix().scale(612, 792))
            page.insert_obj(picture)
            page.gen_content()
            page.close()
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()
    finally:
        document.close()


def _check_pages(text: str, pages: list, count: int) -> None:
    assert [page.modality for page in pages] == ["ocr"] * count
    for index, page in enumerate(pages):
        own = text[page.start : page.end]
        assert f"Page {index + 1} of the survey" in own and WORDS[index % len(WORDS)] in own


def test_one_scan_is_shared_with_the_idle_child_and_counted_page_by_page() -> None:
    pool = ParserPool(2)
    reports: list[tuple[int, int]] = []
    try:
        parsed, media_type = pool.parse(
            scanned_pdf(5),
            "survey.pdf",
            "application/pdf",
            timeout=120,
            memory_bytes=CAP,
            on_pages=lambda *r: reports.append(r),
        )
        assert media_type == "application/pdf" and parsed.metadata["ocr_pages"] == 5
        _check_pages(parsed.text, parsed.pages, 5)
        # The pool started its second child for this one document: the helper that read pages 2 and 4.
        assert pool._created == 2 and pool._idle.qsize() == 2
        assert reports[-1] == (5, 5) and [read for read, _ in reports] == sorted(read for read, _ in reports)
        assert len({read for read, _ in reports if read}) == 5  # one report per page read
    finally:
        pool.close()


def test_a_failing_share_fails_the_document_and_leaves_the_pool_whole() -> None:
    pool = ParserPool(2)
    try:
        slow = ParseLimits(ocr_page_timeout_seconds=1e-6)
        with pytest.raises(UnprocessableDocument) as info:
            pool.parse(scanned_pdf(4), "survey.pdf", "application/pdf", slow, timeout=120, memory_bytes=CAP)
        assert info.value.code == "ocr_timeout"
        assert pool._idle.qsize() == pool._created  # every child given back, none stuck in a share
        parsed, _ = pool.parse(scanned_pdf(2), "again.pdf", "application/pdf", timeout=120, memory_bytes=CAP)
        _check_pages(parsed.text, parsed.pages, 2)
    finally:
        pool.close()


def test_parsing_in_this_process_reads_every_page_itself_and_reports_them() -> None:
    reports: list[tuple[int, int]] = []
    with local_progress(lambda *r: reports.append(r)):
        parsed, _ = detect_and_parse(scanned_pdf(3), "survey.pdf")
    _check_pages(parsed.text, parsed.pages, 3)
    assert reports == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_an_ingestion_reports_each_page_as_ocr_reads_it(tmp_path) -> None:
    from calypso.config import Settings
    from calypso.services import open_services

    services = open_services(Settings(home=tmp_path / "home", parse_processes=2))
    seen: list[tuple[int, int, int]] = []
    try:
        result = services.ingestion.ingest(Upload(scanned_pdf(3), "survey.pdf"), on_progress=lambda *r: seen.append(r))
    finally:
        services.close()
    assert result.document.status == "completed" and result.document.page_count == 3
    assert [r for r in seen if r[2] == 0 and r[0]] == [(1, 0, 0), (2, 0, 0), (3, 0, 0)]  # while OCR runs
    assert seen[-1][1] == seen[-1][2] > 0  # then the passages
