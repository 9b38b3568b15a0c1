"""One PDF page as an image, and where a quote stands on it (pypdfium2's text page: char boxes).

The quote is found in the page's characters by its letters and digits alone (lower-cased), so what the
parser changed when it extracted the text (line breaks, soft hyphens, control glyphs, spacing) does not
stop the match; of several matches, the one nearest the quote's offset in the page text wins. Its
boxes are PDFium's text rectangles (one per line run) translated to the rendered bitmap, so the page's
rotation and crop box are accounted for, and given as fractions of the image.
"""

from __future__ import annotations

from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

# PDFium is not thread-safe: the parser's lock, so a page rendered here never overlaps a parse in this process.
from calypso.ingest.parsers.pdf import _LOCK as PDFIUM_LOCK
from calypso.viewer.png import encode_png

TARGET_WIDTH = 1100  # pixels: sharp on a laptop screen, a few hundred KB as PNG
MAX_SCALE = 3.0  # a tiny page is not blown up past this
MAX_PIXELS = 6_000_000  # a huge page (a poster) is scaled down to this


@dataclass(frozen=True)
class Box:
    """A rectangle as fractions of the displayed page (origin top left), like ``models.WordBox``."""

    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class PageImage:
    png: bytes
    width: int
    height: int
    boxes: tuple[Box, ...]  # the quote's region; () when it could not be located on the image


def _key(text: str) -> str:
    return "".join(ch.lower() for ch in text if ch.isalnum())


def _page_keys(textpage: pdfium.PdfTextPage) -> tuple[str, list[int]]:
    """The page's letters and digits, lower-cased, with the char index each came from."""
    keys: list[str] = []
    indices: list[int] = []
    for index in range(textpage.count_chars()):
        code = pdfium_c.FPDFText_GetUnicode(textpage, index)
        if not code or code > 0x10FFFF:
            continue
        ch = chr(code)
        if ch.isalnum():
            lowered = ch.lower()
            keys.append(lowered[0])  # one key per char, so positions map back one to one
            indices.append(index)
    return "".join(keys), indices


def find_chars(textpage: pdfium.PdfTextPage, quote: str, expected: float) -> tuple[int, int] | None:
    """(first char index, char count) of ``quote`` on the page; ``expected`` is its position as a share
    of the page text (0..1), used to choose between repeats. None when the page does not contain it."""
    wanted = "".join(ch.lower()[0] for ch in quote if ch.isalnum())
    if not wanted:
        return None
    page, indices = _page_keys(textpage)
    hits: list[int] = []
    at = page.find(wanted)
    while at >= 0 and len(hits) < 50:
        hits.append(at)
        at = page.find(wanted, at + 1)
    if not hits:
        return None
    target = expected * len(page)
    best = min(hits, key=lambda hit: abs(hit - target))
    first, last = indices[best], indices[best + len(wanted) - 1]
    return first, last - first + 1


def _scale(page: pdfium.PdfPage) -> float:
    width, height = (float(side) for side in page.get_size())
    scale = min(TARGET_WIDTH / max(width, 1.0), MAX_SCALE)
    if width * height * scale * scale > MAX_PIXELS:
        scale = (MAX_PIXELS / max(width * height, 1.0)) ** 0.5
    return scale


def render_page(data: bytes, page_number: int, quote: str | None, expected: float) -> PageImage:
    """Page ``page_number`` (1-based) of the PDF ``data`` as PNG, with the boxes of ``quote`` when found."""
    with PDFIUM_LOCK:
        pdf = pdfium.PdfDocument(data)
        try:
            page = pdf[page_number - 1]
            try:
                bitmap = page.render(scale=_scale(page), rev_byteorder=True)
                pixels = bitmap.to_numpy()
                width, height = bitmap.width, bitmap.height
                boxes: tuple[Box, ...] = ()
                if quote:
                    textpage = page.get_textpage()
                    try:
                        found = find_chars(textpage, quote, expected)
                        if found is not None:
                            boxes = _boxes(textpage, bitmap.get_posconv(page), found, width, height)
                    finally:
                        textpage.close()
            finally:
                page.close()
        finally:
            pdf.close()
    if pixels.ndim == 3 and pixels.shape[2] == 4:
        pixels = pixels[:, :, :3]
    return PageImage(encode_png(pixels), width, height, boxes)


def _boxes(
    textpage: pdfium.PdfTextPage, posconv: object, found: tuple[int, int], width: int, height: int
) -> tuple[Box, ...]:
    index, count = found
    out = []
    for i in range(textpage.count_rects(index, count)):
        left, bottom, right, top = textpage.get_rect(i)
        xa, ya = posconv.to_bitmap(left, top)  # type: ignore[attr-defined]
        xb, yb = posconv.to_bitmap(right, bottom)  # type: ignore[attr-defined]
        x0, x1 = sorted((xa / width, xb / width))
        y0, y1 = sorted((ya / height, yb / height))
        if x1 > x0 and y1 > y0:
            out.append(Box(max(0.0, x0), max(0.0, y0), min(1.0, x1), min(1.0, y1)))
    return merge_lines(out)


def merge_lines(boxes: list[Box], gap: float = 0.02) -> tuple[Box, ...]:
    """Boxes of one line that touch (less than ``gap`` of the width apart) merged into one: a marked
    sentence reads as a band per line, not a box per word."""
    out: list[Box] = []
    for box in sorted(boxes, key=lambda b: b.x0):
        for i, line in enumerate(out):
            overlap = min(line.y1, box.y1) - max(line.y0, box.y0)
            if overlap > 0.5 * min(line.y1 - line.y0, box.y1 - box.y0) and box.x0 - line.x1 < gap:
                out[i] = Box(min(line.x0, box.x0), min(line.y0, box.y0), max(line.x1, box.x1), max(line.y1, box.y1))
                break
        else:
            out.append(box)
    return tuple(sorted(out, key=lambda b: (b.y0, b.x0)))


def page_count(data: bytes) -> int:
    with PDFIUM_LOCK:
        pdf = pdfium.PdfDocument(data)
        try:
            return len(pdf)
        finally:
            pdf.close()
