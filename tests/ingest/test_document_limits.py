"""Documents that expand into gigabytes: zip bombs, paragraph floods, Flate bombs, page floods.

The hostile files are generated (hostile_files.py): a few KB to 3 MB each, however large they expand.
The bombs run in a child process with an address-space cap (``run_isolated``): refused, the child
stays near its start size; without the checks it would need 2-6 GB and dies at the cap instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support import eval_data_dir

from calypso.config import Settings
from calypso.errors import PayloadTooLarge, UnprocessableDocument, UnsupportedMediaType
from calypso.ingest.isolation import ParserPool
from calypso.ingest.limits import ParseLimits
from calypso.ingest.parsers import detect_and_parse, detect_media_type
from testkit import hostile_files
from testkit.hostile_files import run_isolated

MEMORY_CAP = 1536 << 20  # the child's address space: interpreter, lxml, PDFium and a little room

_REFUSAL = """
from calypso.ingest.parsers import detect_and_parse
from testkit import hostile_files
data = hostile_files.{generator}
try:
    detect_and_parse(data, "{name}")
    print("accepted")
except Exception as exc:
    print(type(exc).__name__, getattr(exc, "status", "-"), getattr(exc, "code", "-"))
# VmHWM, not ru_maxrss: Linux carries the parent's high-water mark into ru_maxrss across exec, so a large
# test process (a loaded embedding model, say) would be counted as this child's peak.
print(next(int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def _refusal(generator: str, name: str) -> tuple[str, int]:
    """(error type, status, code) and the child's peak RSS in MB, for parsing a generated file."""
    verdict, peak = run_isolated(_REFUSAL.format(generator=generator, name=name), memory_bytes=MEMORY_CAP).splitlines()
    return verdict, int(peak)


def test_docx_zip_bomb_is_refused_from_its_declared_size() -> None:
    # 3 MB on disk, 3 GB unzipped: python-docx used to read it whole (6 GB peak) before failing.
    verdict, peak = _refusal("docx_zip_bomb(3000)", "bomb.docx")
    assert verdict == "PayloadTooLarge 413 uncompressed_too_large"
    assert peak < 400  # MB; measured figures are in docs/security.md


def test_docx_paragraph_flood_is_refused_before_parsing() -> None:
    # 7 M paragraphs in 740 KB: accepted after 38 s at 3.7 GB before.
    verdict, _peak = _refusal("docx_paragraph_flood(7_000_000)", "flood.docx")
    assert verdict == "UnprocessableDocument 422 compression_ratio"


def test_pdf_flate_bomb_is_refused_before_pdfium_inflates_it() -> None:
    # 1 MB on disk, a 1 GB content stream: PDFium held 2 GB; under this cap it aborted the process.
    verdict, peak = _refusal("pdf_flate_bomb(1000)", "bomb.pdf")
    assert verdict == "UnprocessableDocument 422 compression_ratio"
    assert peak < 400


def test_docx_element_limit() -> None:
    data = hostile_files.docx_paragraph_flood(2_000)  # 6,000 elements (p, r, t) plus the template's 18,000
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(data, "flood.docx", limits=ParseLimits(max_docx_elements=20_000))
    assert info.value.code == "too_many_elements" and info.value.param == "file"
    assert "CALYPSO_MAX_DOCX_ELEMENTS" in info.value.message and "20,000" in info.value.message
    parsed, _ = detect_and_parse(data, "flood.docx", limits=ParseLimits(max_docx_elements=30_000))
    assert parsed.text.count("x") == 2_000


def test_docx_member_expanding_past_its_declared_size_is_refused() -> None:
    # zipfile stops at the declared size, so the CRC matches; it would still inflate up to 1 GB at once.
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(hostile_files.docx_lying_member(20), "liar.docx")
    assert "expands to more than the 100 bytes it declares" in info.value.message


def test_zip_with_thousands_of_members_is_not_a_docx() -> None:
    data = hostile_files.docx_many_members(10_001)
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(data, "many.docx")
    assert "a Word document has a few dozen" in info.value.message
    with pytest.raises(UnsupportedMediaType):  # sniffing does not list the members either
        detect_media_type(data, "many.bin")


def test_uncompressed_total_limit_applies_to_honest_docx_too() -> None:
    data = hostile_files.docx_paragraph_flood(10)
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(data, "small.docx", limits=ParseLimits(max_uncompressed_bytes=100_000))
    assert info.value.code == "uncompressed_too_large" and "CALYPSO_MAX_UNCOMPRESSED_BYTES" in info.value.message


def test_pdf_page_limit_is_checked_before_reading_pages() -> None:
    data = hostile_files.pdf_many_pages(20_000)  # 3 MB; the default limit is 10,000
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(data, "pages.pdf")
    assert info.value.code == "too_many_pages" and "20,000 pages" in info.value.message
    parsed, _ = detect_and_parse(hostile_files.pdf_many_pages(50), "pages.pdf")
    assert len(parsed.pages) == 50


def test_pdf_character_limit_stops_extraction() -> None:
    data = hostile_files.pdf_many_pages(500)  # "Page" on each: 4 characters and a separator
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(data, "pages.pdf", limits=ParseLimits(max_document_chars=1_000))
    assert info.value.code == "too_many_characters" and "CALYPSO_MAX_DOCUMENT_CHARS" in info.value.message


def test_pdf_stream_size_limit() -> None:
    data = hostile_files.pdf_flate_bomb(3)
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(
            data, "big.pdf", limits=ParseLimits(max_uncompressed_bytes=2 << 20, max_compression_ratio=10_000)
        )
    assert info.value.code == "uncompressed_too_large"


def test_blank_scanned_image_is_not_a_bomb() -> None:
    # A blank page image compresses about 1000:1 too, but text extraction never decodes images.
    parsed, _ = detect_and_parse(hostile_files.pdf_blank_image(16), "scan.pdf")
    assert parsed.text == "Scanned page"


def test_text_character_limit() -> None:
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(b"word " * 1_000, "notes.txt", limits=ParseLimits(max_document_chars=4_000))
    assert info.value.status == 413 and info.value.code == "too_many_characters"


def test_limits_come_from_settings_and_default_to_them() -> None:
    settings = Settings(max_document_pages=7, max_docx_elements=9)
    limits = ParseLimits.from_settings(settings)
    assert (limits.max_document_pages, limits.max_docx_elements) == (7, 9)
    assert ParseLimits() == ParseLimits.from_settings(Settings())


@pytest.mark.parametrize(
    "relative",
    ["docx/doj-ust-chapter13-trustee-handbook-872p.docx", "pdf/irs-irm-2.3.59-400p.pdf", "pdf/GeoTopo-komprimiert.pdf"],
)
def test_real_documents_pass_the_default_limits(relative: str) -> None:
    data = (eval_data_dir() / "ingestion-docs" / relative).read_bytes()
    parsed, _ = detect_and_parse(data, relative.rsplit("/", 1)[-1], limits=ParseLimits.from_settings(Settings()))
    assert parsed.text


# -- PDFs the stream check cannot see: the capped parsing child ----------------------------------

_ISOLATED_REFUSAL = """
from calypso.ingest.isolation import parse_isolated
from testkit import hostile_files
data = hostile_files.{generator}
try:
    parse_isolated(data, "{name}", "application/pdf", timeout=120, memory_bytes=1 << 30, processes=1)
    print("accepted")
except Exception as exc:
    print(type(exc).__name__, getattr(exc, "status", "-"), getattr(exc, "code", "-"))
print(next(int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def test_pdf_bomb_behind_another_filter_costs_only_the_parsing_child() -> None:
    # Hex-encoded first, so no zlib header shows: PDFium used to inflate it in the server (2 GB).
    code = _ISOLATED_REFUSAL.format(generator="pdf_hex_flate_bomb(1000)", name="hex.pdf")
    verdict, peak = run_isolated(code, memory_bytes=MEMORY_CAP).splitlines()
    assert verdict == "UnprocessableDocument 422 parse_memory"
    assert int(peak) < 400  # the server process; the parsing child died at its own 1 GB cap


def test_parsing_child_restarts_after_a_crash_and_keeps_error_details() -> None:
    pool = ParserPool(1)
    try:
        with pytest.raises(UnprocessableDocument) as info:
            pool.parse(
                hostile_files.pdf_hex_flate_bomb(400), "hex.pdf", "application/pdf", timeout=120, memory_bytes=512 << 20
            )
        assert info.value.code == "parse_memory" and "CALYPSO_PARSE_MEMORY_BYTES" in info.value.message
        parsed, _ = pool.parse(
            hostile_files.pdf_many_pages(3), "after.pdf", "application/pdf", timeout=120, memory_bytes=512 << 20
        )
        assert len(parsed.pages) == 3
        with pytest.raises(PayloadTooLarge) as info:  # raised in the child, param and code intact
            limits = ParseLimits(max_document_pages=10)
            pool.parse(
                hostile_files.pdf_many_pages(30),
                "pages.pdf",
                "application/pdf",
                limits,
                timeout=120,
                memory_bytes=512 << 20,
            )
        assert (info.value.param, info.value.code) == ("file", "too_many_pages")
    finally:
        pool.close()


def test_no_parse_processes_parses_in_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from calypso.ingest import pipeline

    monkeypatch.setattr(pipeline, "parse_isolated", lambda *a, **k: pytest.fail("no parsing child wanted"))
    options = pipeline.PipelineOptions.from_settings(Settings(home=tmp_path, parse_processes=0))
    parsed, _ = pipeline.parse(hostile_files.pdf_many_pages(2), "two.pdf", "application/pdf", options)
    assert len(parsed.pages) == 2
