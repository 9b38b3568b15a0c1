"""A PDF page as the viewer shows it: the PNG, and the quote's boxes (rotation included, repeats chosen)."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
import pytest

from calypso.viewer.pdf_page import Box, find_chars, merge_lines, render_page
from calypso.viewer.png import encode_png

QUOTE = "This section of the FEDERAL REGISTER"


@pytest.fixture
def register(data_dir: Path) -> bytes:
    path = data_dir / "ingestion-docs/pdf/federal-register-2020-17221.pdf"
    return path.read_bytes()


def _decode(png: bytes) -> np.ndarray:
    """Our PNGs back to pixels (one IDAT, rows unfiltered), checking the chunk structure on the way."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        assert struct.unpack(">I", png[at + 8 + length : at + 12 + length])[0] == zlib.crc32(kind + data)
        chunks[kind] = data
        at += 12 + length
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), dtype=np.uint8).reshape(height, width * 3 + 1)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(height, width, 3)


def test_png_round_trip() -> None:
    pixels = np.random.default_rng(1).integers(0, 256, size=(7, 5, 3), dtype=np.uint8)
    assert (_decode(encode_png(pixels)) == pixels).all()


def test_the_quote_is_boxed_where_it_stands(register: bytes) -> None:
    image = render_page(register, 1, QUOTE, 0.0)
    assert (image.width, image.height) == (1100, 1424)
    assert _decode(image.png).shape == (1424, 1100, 3)
    (box,) = image.boxes  # one line, top left of the first column
    assert 0.05 < box.x0 < 0.1 and 0.3 < box.x1 < 0.35 and 0.14 < box.y0 < box.y1 < 0.18
    assert render_page(register, 1, "no such words on this page at all", 0.0).boxes == ()


def test_a_rotated_page_gets_its_boxes_rotated(register: bytes) -> None:
    pdf = pdfium.PdfDocument(register)
    pdf[0].set_rotation(90)
    rotated = io.BytesIO()
    pdf.save(rotated)
    pdf.close()
    image = render_page(rotated.getvalue(), 1, QUOTE, 0.0)
    assert image.width > image.height  # landscape now
    (box,) = image.boxes  # the top-left line, turned clockwise: a vertical strip at the top right
    assert box.x0 > 0.8 and box.y1 - box.y0 > 5 * (box.x1 - box.x0)


def test_of_repeats_the_nearest_to_the_expected_position_wins(register: bytes) -> None:
    pdf = pdfium.PdfDocument(register)
    textpage = pdf[0].get_textpage()
    first = find_chars(textpage, "the", 0.0)
    last = find_chars(textpage, "the", 1.0)
    assert first is not None and last is not None and first[0] < last[0]
    assert find_chars(textpage, "  ,, ", 0.5) is None  # nothing to look for
    textpage.close()
    pdf.close()


def test_words_of_a_line_merge_into_one_band() -> None:
    words = [Box(0.1, 0.5, 0.18, 0.55), Box(0.19, 0.51, 0.3, 0.55), Box(0.1, 0.6, 0.2, 0.65)]
    assert merge_lines(words) == (Box(0.1, 0.5, 0.3, 0.55), Box(0.1, 0.6, 0.2, 0.65))
