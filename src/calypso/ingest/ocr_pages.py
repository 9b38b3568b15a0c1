"""Which PDF pages need OCR, and their rendering for it (pypdfium2).

A page needs OCR when its text layer is garbage (mostly private-use glyphs or U+FFFD: fonts without a Unicode
map), or when it is empty or a few characters (a page number, a stamp)
over an image: the look of a scan. A blank page (no text, no image) needs none. The image test runs only
for such short pages, so text PDFs pay one string scan per page.
"""

from __future__ import annotations

import math
import re

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from calypso.ingest.limits import ParseLimits

# Below this many visible characters a page with an image is taken for a scan.
SHORT_TEXT_CHARS = 20
# A text layer where less than this share of the visible characters are letters, digits or punctuation is garbage.
MIN_READABLE_SHARE = 0.5


# What fonts without a Unicode map come out as: private-use glyphs, U+FFFD, lone surrogates.
_GARBAGE = re.compile("[\ue000-\uf8ff\ufffd\ud800-\udfff\U000f0000-\U0010ffff]")


def readable_share(text: str) -> float:
    """The share of the visible characters of ``text`` that are not garbage (0 for no visible character)."""
    visible = len("".join(text.split()))
    if not visible:
        return 0.0
    return 1 - len(_GARBAGE.findall(text)) / visible


def _has_image(pdf: pdfium.PdfDocument, index: int) -> bool:
    page = pdf[index]
    try:
        return any(True for _ in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=2))
    finally:
        page.close()


def needs_ocr(pdf: pdfium.PdfDocument, index: int, text: str) -> bool:
    """Whether page ``index``, whose text layer is ``text``, must be recognised to be read."""
    visible = len("".join(text.split()))  # C-speed passes only: text PDFs pay little per page
    if visible and _GARBAGE.search(text) and readable_share(text) < MIN_READABLE_SHARE:
        return True
    # An empty page without an image is blank (the IRS manual has two): nothing to recognise.
    return visible < SHORT_TEXT_CHARS and _has_image(pdf, index)


def render_for_ocr(pdf: pdfium.PdfDocument, index: int, limits: ParseLimits) -> Image.Image:
    """Page ``index`` as a viewer shows it (its /Rotate applied), grayscale, at ``ocr_dpi``, at most
    ``max_image_pixels`` (a poster-sized page is rendered coarser, not larger)."""
    page = pdf[index]
    try:
        width, height = page.get_size()  # points, as displayed
        scale = limits.ocr_dpi / 72
        pixels = width * height * scale * scale
        if pixels > limits.max_image_pixels:
            scale *= math.sqrt(limits.max_image_pixels / pixels)
        bitmap = page.render(scale=scale, grayscale=True)
        try:
            image: Image.Image = bitmap.to_pil().convert("RGB")
        finally:
            bitmap.close()
        return image
    finally:
        page.close()
