"""OCR of scans and images on the real files: text recovered, orientation, pages and word boxes; and bad input."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image
from tests_support import eval_data_dir

from calypso.errors import EmptyDocument, PayloadTooLarge, UnprocessableDocument
from calypso.ingest import ocr, ocr_engine
from calypso.ingest.isolation import ParserPool
from calypso.ingest.limits import ParseLimits
from calypso.ingest.ocr_pages import readable_share
from calypso.ingest.parsers import detect_and_parse, detect_media_type
from calypso.models import ParsedDocument
from testkit import hostile_files

MORE = "ingestion-docs-more"


def _read(name: str) -> bytes:
    return (eval_data_dir() / MORE / name).read_bytes()


@pytest.fixture(scope="module")
def phototest() -> bytes:
    return _read("images/phototest-rotated-180.png")


def _word(parsed: ParsedDocument, word: str):
    return next(w for page in parsed.pages for w in page.words if parsed.text[w.start : w.end] == word)


def test_upside_down_image_is_read_in_order_with_boxes_on_the_page_as_shown(phototest: bytes) -> None:
    parsed, media_type = detect_and_parse(phototest, "phototest-rotated-180.png")
    assert media_type == "image/png"
    assert parsed.text.startswith("This is a lot of 12 point text to test the")
    assert "The quick brown dog jumped over the" in parsed.text
    (page,) = parsed.pages
    assert (page.number, page.label, page.modality) == (1, "1", "ocr")
    assert page.confidence is not None and 0.9 < page.confidence <= 1
    assert (page.start, page.end) == (0, len(parsed.text))
    assert all(parsed.text[w.start : w.end].strip() == parsed.text[w.start : w.end] for w in page.words)
    assert all(0 <= w.x0 < w.x1 <= 1 and 0 <= w.y0 < w.y1 <= 1 for w in page.words)
    # The image is upside down: its first line stands at the bottom, read from right to left.
    first, lazy = _word(parsed, "This"), _word(parsed, "lazy")
    assert first.y0 > 0.6 and first.x0 > 0.6
    assert lazy.y0 < first.y0


def test_scanned_pdf_is_recognised_with_its_page_label() -> None:
    parsed, _ = detect_and_parse(_read("scanned_pdf/ocr_test.pdf"), "ocr_test.pdf")
    assert " ".join(parsed.text.split()) == (
        "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"
    )
    (page,) = parsed.pages
    assert (page.label, page.modality) == ("1", "ocr") and parsed.metadata["ocr_pages"] == 1
    assert parsed.title == "ocr_test.pdf"


def test_a_scanned_table_keeps_each_row_on_one_line() -> None:
    parsed, _ = detect_and_parse(_read("scanned_pdf/table-multi-row-column-cells.pdf"), "table.pdf")
    lines = parsed.text.splitlines()
    assert "Blind 5 1 4 34.5%, n=1 1199 sec, n=1" in lines
    assert "Mobility 3 3 0 95.4%, n=3 1416 sec, n=3" in lines


def test_rotated_page_whose_image_is_sideways_is_read_upright() -> None:
    parsed, _ = detect_and_parse(_read("scanned_pdf/sample_with_rotation_mismatch.pdf"), "fax.pdf")
    assert "1972" in parsed.text and "SLEREXE COMPANY" in parsed.text
    year = _word(parsed, "1972.") if "1972." in parsed.text.split() else None
    if year is not None:  # the date line stands in the upper right of the upright page
        assert year.y0 < 0.4


def test_text_pdf_pages_are_not_recognised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ocr._engines, "paddle", _CrashingEngine())  # any recognition would fail the parse
    parsed, _ = detect_and_parse(_read("tables_pdf/health.pdf"), "health.pdf")
    assert [page.modality for page in parsed.pages] == ["text"] and "ocr_pages" not in parsed.metadata
    # The IRS manual's pages 2 and 400 are blank (no text, no image): nothing to recognise there either.
    irs = (eval_data_dir() / "ingestion-docs/pdf/irs-irm-2.3.59-400p.pdf").read_bytes()
    parsed, _ = detect_and_parse(irs, "irs.pdf")
    assert parsed.pages[1].start == parsed.pages[1].end - 2 and "ocr_pages" not in parsed.metadata


def test_multi_page_tiff_and_webp(phototest: bytes) -> None:
    upright = Image.open(io.BytesIO(phototest)).convert("L").rotate(180)
    blank = Image.new("L", (320, 240), 255)
    tiff = io.BytesIO()
    upright.save(tiff, "TIFF", save_all=True, append_images=[blank, upright])
    parsed, media_type = detect_and_parse(tiff.getvalue(), "scan.tiff")
    assert media_type == "image/tiff"
    assert [(p.number, p.label, p.modality) for p in parsed.pages] == [
        (1, "1", "ocr"),
        (2, "2", "ocr"),
        (3, "3", "ocr"),
    ]
    assert parsed.pages[1].confidence is None and not parsed.pages[1].words
    third = parsed.text[parsed.pages[2].start : parsed.pages[2].end]
    assert third.startswith("This is a lot of 12 point text")
    assert all(parsed.pages[2].start <= w.start for w in parsed.pages[2].words)
    webp = io.BytesIO()
    upright.save(webp, "WEBP", lossless=True)
    assert detect_media_type(webp.getvalue(), "upload") == "image/webp"
    parsed, _ = detect_and_parse(webp.getvalue(), "photo.webp")
    assert "quick brown dog" in parsed.text


def test_image_types_are_known_by_name_and_by_bytes(phototest: bytes) -> None:
    assert detect_media_type(phototest, "upload.bin", "application/octet-stream") == "image/png"
    assert detect_media_type(b"\xff\xd8\xff\xe0rest", "x", None) == "image/jpeg"
    assert detect_media_type(b"II*\x00rest", "page.tif", None) == "image/tiff"
    assert detect_media_type(b"", "photo.JPG", "image/jpg") == "image/jpeg"


def test_garbage_text_layer_counts_as_missing() -> None:
    assert readable_share("\ue000\ue001\ue002 \ufffd\ufffd") == 0.0
    assert readable_share("Quarterly report, page 3.") == 1.0


def test_decompression_bomb_png_is_refused_before_decoding() -> None:
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(hostile_files.png_bomb(20_000), "bomb.png")
    assert info.value.code == "image_too_large" and "CALYPSO_MAX_IMAGE_PIXELS" in info.value.message


def test_truncated_jpeg_is_422() -> None:
    data = _read("images/layout-parser-paper-with-table.jpg")
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(data[: len(data) // 2], "cut.jpg")
    assert "truncated" in info.value.message and info.value.param == "file"


def test_huge_image_only_pdf_is_refused_before_any_ocr() -> None:
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(hostile_files.pdf_image_only_pages(10_000), "scan.pdf")
    assert info.value.code == "too_many_ocr_pages" and "CALYPSO_OCR_MAX_PAGES" in info.value.message


def test_blank_image_only_pdf_is_empty() -> None:
    with pytest.raises(EmptyDocument) as info:
        detect_and_parse(hostile_files.pdf_image_only_pages(1), "blank.pdf")
    assert info.value.code == "empty_file" and "OCR" in info.value.message


def test_ocr_switched_off_says_so(phototest: bytes) -> None:
    off = ParseLimits(ocr_enabled=False)
    for data, name in ((phototest, "photo.png"), (_read("scanned_pdf/ocr_test.pdf"), "scan.pdf")):
        with pytest.raises(UnprocessableDocument) as info:
            detect_and_parse(data, name, limits=off)
        assert info.value.code == "ocr_unavailable" and "CALYPSO_OCR_ENABLED" in info.value.message


def test_page_time_limit(phototest: bytes) -> None:
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(phototest, "photo.png", limits=ParseLimits(ocr_page_timeout_seconds=1e-6))
    assert info.value.code == "ocr_timeout" and "CALYPSO_OCR_PAGE_TIMEOUT_SECONDS" in info.value.message


def test_document_time_limit_names_its_own_setting(phototest: bytes) -> None:
    limits = ParseLimits(ocr_timeout_seconds=1e-6, ocr_page_timeout_seconds=60)
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(phototest, "photo.png", limits=limits)
    assert info.value.code == "ocr_timeout" and "CALYPSO_OCR_TIMEOUT_SECONDS" in info.value.message


def test_missing_engine_is_a_clear_error(phototest: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ocr, "_engines", {})
    monkeypatch.setitem(__import__("sys").modules, "faster_paddle", None)  # import fails as if absent
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(phototest, "photo.png")
    assert info.value.code == "ocr_unavailable" and "pip install 'faster-paddle'" in info.value.message


class _CrashingEngine(ocr_engine.OcrEngine):
    name = "crashing"

    def read(self, image: Image.Image, deadline: ocr_engine.Deadline) -> list[ocr_engine.Line]:
        raise RuntimeError("onnxruntime: bad allocation")


def test_crashing_engine_is_a_clear_error(phototest: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ocr._engines, "paddle", _CrashingEngine())
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(phototest, "photo.png")
    assert (
        info.value.code == "ocr_failed" and "bad allocation" in info.value.message and "crashing" in info.value.message
    )


def test_a_scan_gets_the_ocr_time_budget_in_the_parse_child_under_the_memory_cap() -> None:
    pool = ParserPool(1)
    cap = 2 * 1024**3  # the default CALYPSO_PARSE_MEMORY_BYTES: the models and a 150 dpi page fit
    try:
        with pytest.raises(EmptyDocument):  # loads the engine in the child
            pool.parse(
                hostile_files.pdf_image_only_pages(1), "blank.pdf", "application/pdf", timeout=60, memory_bytes=cap
            )
        # Rendering and recognising the page take over a second, past 0.3 s: the child asks for the OCR budget.
        scan = _read("scanned_pdf/ocr_test.pdf")
        parsed, media_type = pool.parse(scan, "ocr_test.pdf", "application/pdf", timeout=0.3, memory_bytes=cap)
        assert media_type == "application/pdf" and "Docling bundles" in parsed.text
        assert parsed.pages[0].modality == "ocr" and parsed.pages[0].words
    finally:
        pool.close()


def test_data_files_exist() -> None:
    assert Path(eval_data_dir() / MORE / "SOURCE.md").is_file()
