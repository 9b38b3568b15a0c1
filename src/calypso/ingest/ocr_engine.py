"""What an OCR engine is (``OcrEngine``), what it reads (``Line``) and the time it has (``Deadline``).

Apart from ``ocr.py`` so that the engines (``ocr_paddle.py``, ``ocr_tesseract.py``) and ``ocr.py``, which
chooses among them, import it and not each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from PIL import Image

from calypso.errors import UnprocessableDocument


class Deadline:
    """The time one page's OCR may take; ``check`` raises ``ocr_timeout`` past it."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise UnprocessableDocument(
                f"OCR of {self.what} took longer than {self.seconds:g} s (setting CALYPSO_OCR_PAGE_TIMEOUT_SECONDS); "
                "the image may be huge or built to be slow. Upload a smaller or cleaner scan, or raise the limit.",
                param="file",
                code="ocr_timeout",
            )


@dataclass(frozen=True)
class Line:
    """One line as an engine read it: its text, confidence (0..1), box (x0, y0, x1, y1 in pixels of the image
    it was given), and word spans with their boxes when the engine gives them (else a word's share of the
    line's box follows its characters)."""

    text: str
    confidence: float
    box: tuple[float, float, float, float]
    words: tuple[tuple[int, int, float, float, float, float], ...] = ()


class OcrEngine:
    """An OCR engine: ``read`` returns the lines of an image (any size, RGB), in any order, upright or not.

    It raises UnprocessableDocument (``ocr_unavailable`` when it cannot run here, ``ocr_timeout`` past
    ``deadline``, ``ocr_failed`` when it fails on the image). ``name`` names it in the banner and logs.
    """

    name = "engine"

    def read(self, image: Image.Image, deadline: Deadline) -> list[Line]:
        raise NotImplementedError
