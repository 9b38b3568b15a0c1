"""The OCR engines behind one contract (issue 40): PP-OCRv6 by default, Tesseract by setting or for the scripts
PP-OCRv6 reads badly (a Japanese page), and each engine's failures said plainly."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from calypso.errors import UnprocessableDocument
from calypso.ingest import ocr, ocr_tesseract
from calypso.ingest.limits import ParseLimits
from calypso.ingest.parsers import detect_and_parse

FONT = Path("/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc")
JAPANESE = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所で泣いていた。"
CHINESE = "本作以三大故事为主轴，分别是以武田信玄等人为主的关东三国志，丰富游戏内的剧情。"
LATIN = "The quick brown fox jumps over the lazy dog near the river bank."


def _need(condition: bool, what: str) -> None:
    """Skip without ``what`` installed, but fail under CI, whose script installs it (.ci/run)."""
    if not condition:
        message = f"{what} is not installed (apt-get install tesseract-ocr tesseract-ocr-jpn fonts-noto-cjk)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _tesseract(*languages: str) -> None:
    _need(ocr_tesseract.available(), "tesseract-ocr")
    for language in languages:
        _need(language in ocr_tesseract.installed_languages(), f"Tesseract's {language} pack")


def _page(text: str, per_line: int, size: int = 30) -> bytes:
    """``text`` set in Noto Serif CJK, ``per_line`` characters a line, as a PNG."""
    _need(FONT.is_file(), "fonts-noto-cjk")
    font = ImageFont.truetype(str(FONT), size, index=0)
    lines = [text[i : i + per_line] for i in range(0, len(text), per_line)]
    image = Image.new("L", (size * per_line + 120, len(lines) * size * 2 + 120), 255)
    draw = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        draw.text((60, 60 + index * size * 2), line, font=font, fill=0)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _latin_page() -> bytes:
    image = Image.new("L", (900, 160), 255)
    font = ImageFont.truetype(str(FONT), 28, index=0) if FONT.is_file() else ImageFont.load_default(28)
    ImageDraw.Draw(image).text((40, 60), LATIN, font=font, fill=0)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _chars(text: str) -> set[str]:
    return {char for char in text if not char.isspace()}


def test_a_japanese_page_is_read_by_tesseract_and_a_chinese_one_by_pp_ocrv6() -> None:
    _tesseract("jpn", "osd")
    parsed, _ = detect_and_parse(_page(JAPANESE, 20), "japanese.png")
    assert parsed.metadata["ocr_engine"].startswith("Tesseract jpn")
    # Kana survive (PP-OCRv6 tiny turns them into look-alike ideographs), written without spaces.
    text = parsed.text.replace("\n", "")
    assert "名前はまだ無い" in text and " " not in text
    assert len(_chars(JAPANESE) & _chars(text)) >= 0.9 * len(_chars(JAPANESE))
    (page,) = parsed.pages
    assert page.words and all(0 <= w.x0 < w.x1 <= 1 and 0 <= w.y0 < w.y1 <= 1 for w in page.words)
    parsed, _ = detect_and_parse(_page(CHINESE, 20), "chinese.png")
    assert parsed.metadata["ocr_engine"] == "PP-OCRv6 tiny"
    assert "武田信玄" in parsed.text and "丰富游戏内的剧情" in parsed.text


KOREAN = (
    "대한민국은 동아시아의 한반도 남부에 위치한 민주공화국이다. 수도는 서울특별시이며, 국기는 태극기, "
    "국가는 애국가, 공용어는 한국어이다. 인구는 약 오천만 명이다."
)


def test_a_korean_page_is_read_by_tesseract_with_the_spaces_between_its_words() -> None:
    _tesseract("kor", "osd")
    _need(FONT.is_file(), "fonts-noto-cjk")
    font = ImageFont.truetype(str(FONT), 30, index=1)  # Noto Serif CJK KR
    image = Image.new("L", (1100, 400), 255)
    for row, start in enumerate(range(0, len(KOREAN), 30)):
        ImageDraw.Draw(image).text((40, 40 + 60 * row), KOREAN[start : start + 30], font=font, fill=0)
    data = io.BytesIO()
    image.save(data, "PNG")
    parsed, _ = detect_and_parse(data.getvalue(), "korean.png")
    assert parsed.metadata["ocr_engine"].startswith("Tesseract kor")
    words = parsed.text.split()
    # Hangul syllables of one word stay together; words stay apart (Tesseract boxes syllables one by one).
    expected = ("대한민국은", "동아시아의", "한반도", "남부에", "위치한", "수도는", "태극기,", "공용어는", "인구는")
    assert sum(word in words for word in expected) >= 7, parsed.text


def test_paddle_setting_keeps_pp_ocrv6_for_every_page() -> None:
    _need(FONT.is_file(), "fonts-noto-cjk")
    parsed, _ = detect_and_parse(_page(JAPANESE, 20), "japanese.png", limits=ParseLimits(ocr_engine="paddle"))
    assert parsed.metadata["ocr_engine"] == "PP-OCRv6 tiny"


def test_tesseract_setting_reads_upside_down_pages_with_word_boxes_in_the_languages_set() -> None:
    _tesseract("eng")
    image = Image.open(io.BytesIO(_latin_page())).rotate(180)
    data = io.BytesIO()
    image.save(data, "PNG")
    parsed, _ = detect_and_parse(data.getvalue(), "flipped.png", limits=ParseLimits(ocr_engine="tesseract"))
    assert parsed.metadata["ocr_engine"] == "Tesseract eng"
    assert "quick brown fox jumps over the lazy dog" in parsed.text
    quick = next(w for w in parsed.pages[0].words if parsed.text[w.start : w.end] == "quick")
    fox = next(w for w in parsed.pages[0].words if parsed.text[w.start : w.end] == "fox")
    assert fox.x1 < quick.x0  # upside down: "fox" stands left of "quick" on the page as shown


def test_tesseract_tsv_lines_join_cjk_without_spaces_and_latin_with_them() -> None:
    header = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"
    rows = [
        "5\t1\t1\t1\t1\t1\t10\t10\t20\t20\t90\t名前",
        "5\t1\t1\t1\t1\t2\t30\t10\t20\t20\t80\tは",
        "5\t1\t1\t1\t1\t3\t60\t10\t40\t20\t70\tOK",
        "5\t1\t1\t1\t2\t1\t10\t40\t30\t20\t-1\t ",
        "5\t1\t1\t1\t3\t1\t10\t70\t30\t20\t95\tnext",
    ]
    lines = ocr_tesseract.lines_from_tsv(header + "\n".join(rows) + "\n")
    assert [line.text for line in lines] == ["名前は OK", "next"]  # CJK: no space; Latin: one
    assert lines[0].words[2] == (4, 6, 60.0, 10.0, 100.0, 30.0)
    assert lines[0].box == (10.0, 10.0, 100.0, 30.0)
    assert abs(lines[0].confidence - (0.9 * 2 + 0.8 + 0.7 * 2) / 5) < 1e-9


@pytest.fixture
def no_tesseract(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ocr_tesseract, "BINARY", "/nonexistent/tesseract")
    monkeypatch.setattr(ocr, "_engines", {})
    ocr_tesseract.installed_languages.cache_clear()
    ocr_tesseract.describe.cache_clear()
    yield
    ocr_tesseract.installed_languages.cache_clear()
    ocr_tesseract.describe.cache_clear()


@pytest.mark.usefixtures("no_tesseract")
def test_tesseract_missing_is_a_clear_error_and_auto_goes_on_without_it() -> None:
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(_latin_page(), "page.png", limits=ParseLimits(ocr_engine="tesseract"))
    assert info.value.code == "ocr_unavailable" and "apt-get install tesseract-ocr" in info.value.message
    parsed, _ = detect_and_parse(_latin_page(), "page.png")  # auto: PP-OCRv6 alone
    assert "lazy dog" in parsed.text and parsed.metadata["ocr_engine"] == "PP-OCRv6 tiny"
    assert ocr.describe("auto", "eng").startswith("PP-OCRv6 tiny (faster-paddle 1.")
    assert "not installed" in ocr.describe("tesseract", "eng")


def test_a_missing_language_pack_names_the_debian_package() -> None:
    _tesseract()
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(_latin_page(), "page.png", limits=ParseLimits(ocr_engine="tesseract", ocr_languages="xyz"))
    assert info.value.code == "ocr_unavailable" and "apt-get install tesseract-ocr-xyz" in info.value.message
    assert "CALYPSO_OCR_LANGUAGES" in info.value.message


def test_a_crashing_or_slow_tesseract_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tesseract("eng")
    fake = tmp_path / "tesseract"
    # Answers --list-langs like the real one; crashes (or hangs, with SLOW set) on a page.
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--list-langs" ]; then printf "List of available languages:\\neng\\n"; exit 0; fi\n'
        'if [ -n "$SLOW" ]; then exec sleep 30; fi\n'
        'echo "Error in pixReadMem: corrupt image" >&2; exit 134\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(ocr_tesseract, "BINARY", str(fake))
    monkeypatch.setattr(ocr, "_engines", {})
    ocr_tesseract.installed_languages.cache_clear()
    try:
        limits = ParseLimits(ocr_engine="tesseract", ocr_page_timeout_seconds=1)
        with pytest.raises(UnprocessableDocument) as info:
            detect_and_parse(_latin_page(), "page.png", limits=limits)
        assert info.value.code == "ocr_failed" and "corrupt image" in info.value.message
        monkeypatch.setenv("SLOW", "1")
        with pytest.raises(UnprocessableDocument) as info:
            detect_and_parse(_latin_page(), "page.png", limits=limits)
        assert info.value.code == "ocr_timeout" and "CALYPSO_OCR_PAGE_TIMEOUT_SECONDS" in info.value.message
    finally:
        ocr_tesseract.installed_languages.cache_clear()


def test_the_banner_names_the_engine() -> None:
    from calypso.banner import ocr_line
    from calypso.config import Settings

    assert ocr_line(Settings(ocr_engine="paddle")).startswith("OCR: PP-OCRv6 tiny (faster-paddle")
    assert "off" in ocr_line(Settings(ocr_enabled=False))
    if shutil.which("tesseract") and "jpn" in ocr_tesseract.installed_languages():
        assert "Tesseract" in ocr_line(Settings()) and "jpn" in ocr_line(Settings())


def test_tesseract_reads_in_the_parse_child_under_its_memory_cap() -> None:
    from calypso.ingest.isolation import ParserPool

    _tesseract("eng")
    pool = ParserPool(1)
    try:
        limits = ParseLimits(ocr_engine="tesseract")
        parsed, _ = pool.parse(_latin_page(), "page.png", "image/png", limits, timeout=60, memory_bytes=2 * 1024**3)
        assert "lazy dog" in parsed.text and parsed.metadata["ocr_engine"] == "Tesseract eng"
        assert parsed.pages[0].words  # word boxes cross the process boundary
    finally:
        pool.close()
