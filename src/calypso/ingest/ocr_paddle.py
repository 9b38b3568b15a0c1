"""PP-OCRv6 tiny through ``faster-paddle``: the default OCR engine (see ``ocr.py``).

The wheel (MIT) holds the detection and recognition models and links ONNX Runtime in: nothing downloads at
run time (only the ``medium`` size would, so it is never asked for), and no OpenCV. The engine is given the
page as an uncompressed BMP (no encoding cost) and returns line boxes, axis-aligned, in the image's pixels.
It has no orientation model: ``ocr.py`` turns pages itself.
"""

from __future__ import annotations

import io
import threading
from importlib import metadata
from typing import Any

from PIL import Image

from calypso.errors import UnprocessableDocument
from calypso.ingest import ocr_threads
from calypso.ingest.ocr_engine import Deadline, Line, OcrEngine

# The detector's longest side (faster-paddle's default is 1600; it keeps the short side at least 736, and
# recognition crops come from the full image). At 1024 the scanned Alps PDF took 0.66 CPU-s a page against
# 0.85 at 1600, with the same word recall (0.987), as on the four ground-truth images and the Chinese scan.
DET_MAX_SIDE = 1024
MODEL = "PP-OCRv6 tiny"


def describe() -> str:
    try:
        return f"{MODEL} (faster-paddle {metadata.version('faster-paddle')})"
    except metadata.PackageNotFoundError:
        return f"{MODEL} (not installed: pip install faster-paddle)"


class PaddleEngine(OcrEngine):
    """PP-OCRv6 tiny on ``ocr_threads.threads`` cores (0: every core this process may use)."""

    name = MODEL

    def __init__(self) -> None:
        try:
            import faster_paddle
        except Exception as exc:  # ImportError; OSError from an old glibc (the wheel needs 2.34)
            raise UnprocessableDocument(
                f"OCR is not available on this server ({type(exc).__name__}: {exc}), so text in images and scanned "
                "pages cannot be read. Install the OCR engine (pip install 'faster-paddle'; see docs/formats.md), "
                "set CALYPSO_OCR_ENGINE=tesseract with Debian's tesseract-ocr installed, or upload a file with a "
                "text layer.",
                param="file",
                code="ocr_unavailable",
            ) from exc
        threads = ocr_threads.threads or None
        self._engine: Any = faster_paddle.OcrEngine(model_size="tiny", threads=threads, det_max_side=DET_MAX_SIDE)
        self._lock = threading.Lock()  # one page at a time: the engine already spreads a page over its threads

    def read(self, image: Image.Image, deadline: Deadline) -> list[Line]:
        buffer = io.BytesIO()
        image.save(buffer, "BMP")
        deadline.check()
        with self._lock:
            result = self._engine.ocr(buffer.getvalue())
        deadline.check()
        lines = []
        for bound in result["bounds"].values():
            (x0, y0), (x1, y1) = bound["topLeftCoord"], bound["bottomRightCoord"]
            lines.append(Line(bound["text"], float(bound["confidence"]), (float(x0), float(y0), float(x1), float(y1))))
        return lines
