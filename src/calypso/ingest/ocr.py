"""OCR: the text, word boxes and confidence of one page image, by RapidOCR's PP-OCRv4 models on CPU.

The engine is ``rapidocr-onnxruntime``: its wheel ships the detection, orientation and recognition ONNX
models (Chinese and English), run by the onnxruntime the embeddings use, so nothing downloads at run time.
It was chosen over Tesseract by word recall on the ground truth (``docs/benchmarks/ocr.md``). It is
loaded once per process (a parse child keeps it between documents), on first use.

Orientation: the orientation model turns each upside-down line; a page whose lines mostly read upside
down, or sideways, is read again in the frame where its text stands upright, so the lines come in
reading order. Word boxes are fractions of the image as given (the page as a viewer shows it).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from calypso.errors import UnprocessableDocument
from calypso.ingest import ocr_threads
from calypso.ingest.ocr_spaces import restore_spaces
from calypso.models import WordBox

# Lines the recogniser is less sure of than this are noise (specks, ruling, photos), not text.
MIN_LINE_CONFIDENCE = 0.5
# RapidOCR shrinks larger images to this side (max_side_len) before detecting; word boxes are fractions anyway.
MAX_SIDE = 2000
# Recognition runs in slices of this many lines, so a page with thousands of boxes still meets its deadline.
_REC_SLICE = 32

_engine: Any = None
_engine_lock = threading.Lock()


def _load_engine() -> Any:
    """The RapidOCR engine (its models load in about 0.2 s), or UnprocessableDocument when it cannot load."""
    try:
        from rapidocr_onnxruntime import RapidOCR
    except Exception as exc:  # ImportError, or OSError from a missing system library under OpenCV
        raise UnprocessableDocument(
            f"OCR is not available on this server ({type(exc).__name__}: {exc}), so text in images and scanned "
            "pages cannot be read. Install the OCR engine (pip install 'rapidocr-onnxruntime' "
            "'opencv-python-headless'; see docs/formats.md), or upload a file with a text layer.",
            param="file",
            code="ocr_unavailable",
        ) from exc
    threads = ocr_threads.threads
    return RapidOCR(intra_op_num_threads=threads) if threads > 0 else RapidOCR()


def engine() -> Any:
    """The process's OCR engine, loaded on first use."""
    global _engine
    with _engine_lock:
        if _engine is None:
            _engine = _load_engine()
        return _engine


@dataclass(frozen=True)
class OcrPage:
    """The text recognised on one page: lines joined by newlines, words boxed, offsets into ``text``."""

    text: str
    confidence: float | None  # mean word confidence, 0..1; None when nothing was recognised
    words: tuple[WordBox, ...]

    def shifted(self, offset: int) -> tuple[WordBox, ...]:
        """The word boxes with their spans moved ``offset`` characters on (the page's start in the document)."""
        return tuple(WordBox(w.start + offset, w.end + offset, w.x0, w.y0, w.x1, w.y1) for w in self.words)


@dataclass(frozen=True)
class _Line:
    text: str
    char_confidences: tuple[float, ...]
    quad: np.ndarray  # 4 x 2 points in the original image, pixels
    rotated_crop: bool  # the crop stood taller than wide: its text runs up or down the page
    flipped: bool  # the orientation model turned it 180 degrees


class _Deadline:
    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self.end = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise UnprocessableDocument(
                f"OCR of {self.what} took longer than {self.seconds:g} s (setting CALYPSO_OCR_PAGE_TIMEOUT_SECONDS); "
                "the image may be huge or built to be slow. Upload a smaller or cleaner scan, or raise the limit.",
                param="file",
                code="ocr_timeout",
            )


def _read_lines(ocr: Any, bgr: np.ndarray, deadline: _Deadline) -> list[_Line]:
    """Detect, orient and recognise the lines of ``bgr`` (RapidOCR's own stages, with deadline checks)."""
    raw_h, raw_w = bgr.shape[:2]
    img, ratio_h, ratio_w = ocr.preprocess(bgr)
    img, record = ocr.maybe_add_letterbox(img, {"preprocess": {"ratio_h": ratio_h, "ratio_w": ratio_w}})
    boxes, _ = ocr.auto_text_det(img)
    if boxes is None or len(boxes) == 0:
        return []
    deadline.check()
    crops = ocr.get_crop_img_list(img, boxes)
    rotated = [box_height(box) / max(box_width(box), 1.0) >= 1.5 for box in boxes]
    crops, orientation, _ = ocr.text_cls(crops)
    deadline.check()
    recognised: list[tuple[str, float, list[Any]]] = []
    for begin in range(0, len(crops), _REC_SLICE):
        recognised.extend(ocr.text_rec(crops[begin : begin + _REC_SLICE], True)[0])
        deadline.check()
    quads = ocr._get_origin_points(boxes, record, raw_h, raw_w)
    lines = []
    for quad, turned, crop, (label, _), (text, confidence, info) in zip(quads, rotated, crops, orientation, recognised):
        if float(confidence) < MIN_LINE_CONFIDENCE or not text.strip():
            continue
        columns = [column for word in info[2] for column in word]
        text, confidences = restore_spaces(text, columns, [float(c) for c in info[4]], crop)
        lines.append(_Line(text, tuple(confidences), quad, turned, label == "180"))
    return lines


def box_width(box: np.ndarray) -> float:
    return float(max(np.linalg.norm(box[0] - box[1]), np.linalg.norm(box[2] - box[3])))


def box_height(box: np.ndarray) -> float:
    return float(max(np.linalg.norm(box[0] - box[3]), np.linalg.norm(box[1] - box[2])))


def _to_frame(points: np.ndarray, quarter_turns: int, width: float, height: float) -> np.ndarray:
    """``points`` of the image in the frame of the image turned ``quarter_turns`` x 90 degrees anticlockwise."""
    x, y = points[..., 0], points[..., 1]
    if quarter_turns == 1:
        return np.stack([y, width - x], axis=-1)
    if quarter_turns == 2:
        return np.stack([width - x, height - y], axis=-1)
    if quarter_turns == 3:
        return np.stack([height - y, x], axis=-1)
    return points


def _from_frame(points: np.ndarray, quarter_turns: int, width: float, height: float) -> np.ndarray:
    """The inverse of ``_to_frame``: points of the turned frame back in the image (``width`` x ``height``)."""
    if quarter_turns % 2:  # the turned frame is ``height`` wide
        width, height = height, width
    return _to_frame(points, (4 - quarter_turns) % 4, width, height)


def _reading_frame(lines: list[_Line], bgr: np.ndarray, ocr: Any, deadline: _Deadline) -> tuple[list[_Line], int]:
    """The lines and the quarter turns (anticlockwise) that stand the page's text upright."""
    chars = sum(len(line.text) for line in lines) or 1
    if sum(len(line.text) for line in lines if line.rotated_crop) * 2 > chars:
        # Sideways: the detector boxes each line upright (taller than wide); read the page turned a quarter.
        turned = np.ascontiguousarray(np.rot90(bgr))
        height, width = bgr.shape[:2]
        lines = [
            _Line(line.text, line.char_confidences, _from_frame(line.quad, 1, width, height), False, line.flipped)
            for line in _read_lines(ocr, turned, deadline)
        ]
        chars = sum(len(line.text) for line in lines) or 1
        base = 1
    else:
        base = 0
    upside_down = sum(len(line.text) for line in lines if line.flipped) * 2 > chars
    return lines, (base + 2) % 4 if upside_down else base


def _sorted_in_frame(
    lines: list[_Line], turns: int, width: float, height: float
) -> list[tuple[_Line, np.ndarray, bool]]:
    """The lines in reading order (top to bottom, left to right in the upright frame), with their upright quads
    and whether each ends its row (boxes side by side, a table's cells, are one row of text)."""
    framed = [(line, _to_frame(line.quad, turns, width, height)) for line in lines]
    framed.sort(key=lambda item: (float(item[1][:, 1].min()), float(item[1][:, 0].min())))
    # Lines whose tops lie within half a line height are one row: left to right.
    rows: list[list[tuple[_Line, np.ndarray]]] = []
    for item in framed:
        top = float(item[1][:, 1].min())
        if rows:
            last = rows[-1][0][1]
            if abs(top - float(last[:, 1].min())) < 0.5 * (float(last[:, 1].max()) - float(last[:, 1].min())):
                rows[-1].append(item)
                continue
        rows.append([item])
    ordered: list[tuple[_Line, np.ndarray, bool]] = []
    for row in rows:
        row.sort(key=lambda it: float(it[1][:, 0].min()))
        ordered.extend((line, quad, index == len(row) - 1) for index, (line, quad) in enumerate(row))
    return ordered


def _page(lines: list[tuple[_Line, np.ndarray, bool]], turns: int, width: float, height: float) -> OcrPage:
    parts: list[str] = []
    words: list[WordBox] = []
    confidences: list[float] = []
    pos = 0
    for line, upright, row_end in lines:
        text = line.text
        x0, x1 = float(upright[:, 0].min()), float(upright[:, 0].max())
        y0, y1 = float(upright[:, 1].min()), float(upright[:, 1].max())
        span = max(len(text), 1)
        start = 0
        for word in text.split():
            start = text.index(word, start)
            end = start + len(word)
            # The recogniser gives one box per line: a word's share of it follows its characters.
            corners = np.array(
                [[x0 + (x1 - x0) * start / span, y0], [x0 + (x1 - x0) * end / span, y1]], dtype=np.float32
            )
            shown = _from_frame(corners, turns, width, height)
            words.append(
                WordBox(
                    pos + start,
                    pos + end,
                    _fraction(shown[:, 0].min(), width),
                    _fraction(shown[:, 1].min(), height),
                    _fraction(shown[:, 0].max(), width),
                    _fraction(shown[:, 1].max(), height),
                )
            )
            chars = line.char_confidences[start:end] if len(line.char_confidences) >= end else ()
            confidences.append(float(np.mean(chars)) if chars else float(np.mean(line.char_confidences or (0.0,))))
            start = end
        parts.append(text + ("\n" if row_end else " "))
        pos += len(text) + 1
    confidence = round(float(np.mean(confidences)), 4) if confidences else None
    return OcrPage("".join(parts)[:-1], confidence, tuple(words))


def _fraction(value: float, whole: float) -> float:
    return round(min(max(float(value) / whole, 0.0), 1.0), 5)


def recognise(image: Image.Image, *, what: str, timeout_seconds: float) -> OcrPage:
    """The text on ``image`` (any mode), its word boxes and mean word confidence, within ``timeout_seconds``.

    ``what`` names the page in errors ("page 3 of 'scan.pdf'"). Raises UnprocessableDocument: OCR not
    available (``ocr_unavailable``), past the time limit (``ocr_timeout``) or the engine failed (``ocr_failed``).
    """
    ocr = engine()
    deadline = _Deadline(timeout_seconds, what)
    if max(image.size) > MAX_SIDE:  # the detector works at most this large: shrink first, in less memory
        scale = MAX_SIDE / max(image.size)
        image = image.resize(
            (max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.Resampling.BILINEAR
        )
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    bgr = np.ascontiguousarray(np.asarray(rgb)[:, :, ::-1])
    height, width = bgr.shape[:2]
    try:
        lines = _read_lines(ocr, bgr, deadline)
        lines, turns = _reading_frame(lines, bgr, ocr, deadline)
    except UnprocessableDocument:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - an engine failure is the document's failure, said plainly
        raise UnprocessableDocument(
            f"The OCR engine failed on {what} ({type(exc).__name__}: {exc}). Upload a cleaner scan or a file with "
            "a text layer.",
            param="file",
            code="ocr_failed",
        ) from exc
    return _page(_sorted_in_frame(lines, turns, width, height), turns, width, height)
