"""OCR: the text, word boxes and confidence of one page image, by the engine the page needs.

An engine (``OcrEngine``) reads the lines of an image as it stands; this module does the rest for every
engine alike: the page's orientation (a page read upside down or sideways is read again turned), the
choice of engine for the page's script, reading order, and word boxes as fractions of the image as given
(the page as a viewer shows it). The engines, side by side:

- ``ocr_paddle.PaddleEngine``: PP-OCRv6 tiny through ``faster-paddle`` (MIT; the models are inside the wheel,
  ONNX Runtime is linked in, no OpenCV). The default: about 0.7 CPU-seconds a page, and the best word recall on
  the Latin-script ground truth (``docs/benchmarks.md``). Its recogniser knows Chinese and Latin script;
  Japanese kana and Hangul come out garbled, at low confidence.
- ``ocr_tesseract.TesseractEngine``: Debian's ``tesseract-ocr`` (with its language packs), run as a
  subprocess. With ``CALYPSO_OCR_ENGINE=auto`` it reads a page PP-OCRv6 read badly (confidence under
  ``SCRIPT_CHECK_CONFIDENCE``) whose script Tesseract's script detection (OSD) names as one PP-OCRv6 lacks
  (``TESSERACT_SCRIPTS``), when that language pack is installed; ``CALYPSO_OCR_ENGINE=tesseract`` reads every
  page with it, in ``CALYPSO_OCR_LANGUAGES``.

Both are loaded once per process (a parse child keeps them between documents), on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from PIL import Image

from calypso.errors import UnprocessableDocument
from calypso.ingest.ocr_engine import Deadline, Line, OcrEngine
from calypso.models import WordBox

# A page PP-OCRv6 reads at a lower (character-weighted) confidence than this may be upside down: it is read
# again turned half a turn, and the better reading kept. Upright English pages read at 0.94-0.99, upside-down
# ones at 0.60-0.65 (measured on the ground-truth images).
FLIP_CHECK_CONFIDENCE = 0.8
# Under this confidence, ``auto`` asks Tesseract which script the page is in (a Japanese page: 0.67-0.73;
# a Chinese one: 0.96-0.99).
SCRIPT_CHECK_CONFIDENCE = 0.85
# Scripts (as Tesseract's OSD names them) PP-OCRv6 tiny reads badly, and the Tesseract pack that reads them.
TESSERACT_SCRIPTS = {
    "Japanese": "jpn",
    "Katakana": "jpn",
    "Hiragana": "jpn",
    "Hangul": "kor",
    "Korean": "kor",
    "Cyrillic": "rus",
    "Arabic": "ara",
    "Hebrew": "heb",
    "Greek": "ell",
    "Devanagari": "hin",
    "Thai": "tha",
}
# A larger image is shrunk to this longest side first: the detector works at 1600 at most, and an
# uncompressed copy of a 100-megapixel photo for the engine would cost 300 MB.
MAX_SIDE = 3000
# Lines the recogniser is less sure of than this are noise (specks, ruling, photos), not text.
MIN_LINE_CONFIDENCE = 0.5


@dataclass(frozen=True)
class OcrPage:
    """The text recognised on one page: lines joined by newlines, words boxed, offsets into ``text``."""

    text: str
    confidence: float | None  # mean word confidence, 0..1; None when nothing was recognised
    words: tuple[WordBox, ...]
    engine: str = ""  # the engine that read it ("PP-OCRv6 tiny", "Tesseract jpn")

    def shifted(self, offset: int) -> tuple[WordBox, ...]:
        """The word boxes with their spans moved ``offset`` characters on (the page's start in the document)."""
        return tuple(WordBox(w.start + offset, w.end + offset, w.x0, w.y0, w.x1, w.y1) for w in self.words)


# The engines of this process, by key ("paddle", "tesseract:eng"), loaded on first use.
_engines: dict[str, OcrEngine] = {}
_engines_lock = threading.Lock()
# Built-in engines: name -> factory(languages). Tests and extensions register through the same table.
ENGINES: dict[str, Callable[[str], OcrEngine]] = {}


def _builtin() -> None:
    if not ENGINES:
        from calypso.ingest.ocr_paddle import PaddleEngine
        from calypso.ingest.ocr_tesseract import TesseractEngine

        ENGINES.setdefault("paddle", lambda languages: PaddleEngine())
        ENGINES.setdefault("tesseract", TesseractEngine)


def engine(name: str = "paddle", languages: str = "") -> OcrEngine:
    """The process's engine ``name`` (for Tesseract, in ``languages``), loaded on first use."""
    _builtin()
    key = f"{name}:{languages}" if name != "paddle" else name
    with _engines_lock:
        found = _engines.get(key)
        if found is None:
            found = _engines[key] = ENGINES[name](languages)
        return found


def _score(lines: list[Line]) -> float:
    """Character-weighted mean confidence of ``lines`` (0 for none)."""
    chars = sum(len(line.text) for line in lines)
    return sum(line.confidence * len(line.text) for line in lines) / chars if chars else 0.0


def _sideways(lines: list[Line]) -> bool:
    """Whether most text stands in boxes taller than wide: lines running up or down the page."""
    long = [line for line in lines if len(line.text) >= 3]
    tall = sum(len(ln.text) for ln in long if (ln.box[3] - ln.box[1]) >= 1.5 * max(ln.box[2] - ln.box[0], 1.0))
    return tall * 2 > sum(len(line.text) for line in long) > 0


def _turned(image: Image.Image, turns: int) -> Image.Image:
    """``image`` turned ``turns`` quarter turns anticlockwise."""
    return image.rotate(90 * turns, expand=True) if turns % 4 else image


def _read_upright(ocr: OcrEngine, image: Image.Image, deadline: Deadline) -> tuple[list[Line], int]:
    """The lines of ``image`` in the frame where its text stands upright, and that frame's quarter turns."""
    lines = ocr.read(image, deadline)
    turns = 0
    candidates: list[int] = []
    if _sideways(lines):
        candidates = [1, 3]
    elif lines and _score(lines) < FLIP_CHECK_CONFIDENCE:
        candidates = [2]
    best = _score(lines) if not candidates or candidates == [2] else -1.0
    for candidate in candidates:
        deadline.check()
        read = ocr.read(_turned(image, candidate), deadline)
        if _score(read) > best:
            lines, turns, best = read, candidate, _score(read)
    return lines, turns


def _choose_tesseract(image: Image.Image, lines: list[Line], languages: str, deadline: Deadline) -> str | None:
    """The Tesseract languages for a page PP-OCRv6 read badly, when its script needs them; else None."""
    from calypso.ingest import ocr_tesseract

    if not lines or _score(lines) >= SCRIPT_CHECK_CONFIDENCE or not ocr_tesseract.available():
        return None
    script = ocr_tesseract.detect_script(image, deadline)
    pack = TESSERACT_SCRIPTS.get(script or "")
    if pack is None or pack not in ocr_tesseract.installed_languages():
        return None
    extra = [
        lang for lang in languages.split("+") if lang and lang != pack and lang in ocr_tesseract.installed_languages()
    ]
    return "+".join([pack, *extra])


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


def _rows(lines: list[Line]) -> list[tuple[Line, bool]]:
    """The lines in reading order (top to bottom, left to right), each with whether it ends its row (boxes side
    by side, a table's cells, are one row of text)."""
    ordered = sorted(lines, key=lambda line: (line.box[1], line.box[0]))
    rows: list[list[Line]] = []
    for line in ordered:
        if rows:
            last = rows[-1][0].box
            if abs(line.box[1] - last[1]) < 0.5 * (last[3] - last[1]):  # tops within half a line height
                rows[-1].append(line)
                continue
        rows.append([line])
    out: list[tuple[Line, bool]] = []
    for row in rows:
        row.sort(key=lambda line: line.box[0])
        out.extend((line, index == len(row) - 1) for index, line in enumerate(row))
    return out


def _page(lines: list[Line], turns: int, width: float, height: float, engine_name: str) -> OcrPage:
    """The page of ``lines`` (read in the frame turned ``turns``), word boxes in the image as given."""
    parts: list[str] = []
    words: list[WordBox] = []
    confidences: list[float] = []
    pos = 0
    for line, row_end in _rows(lines):
        text = line.text
        spans = line.words or _shares(text, line.box)
        for start, end, wx0, wy0, wx1, wy1 in spans:
            corners = np.array([[wx0, wy0], [wx1, wy1]], dtype=np.float32)
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
            confidences.append(line.confidence)
        parts.append(text + ("\n" if row_end else " "))
        pos += len(text) + 1
    confidence = round(float(np.mean(confidences)), 4) if confidences else None
    return OcrPage("".join(parts)[:-1], confidence, tuple(words), engine_name)


def _shares(
    text: str, box: tuple[float, float, float, float]
) -> tuple[tuple[int, int, float, float, float, float], ...]:
    """Word spans of ``text`` with boxes cut from the line's ``box`` in proportion to their characters."""
    x0, y0, x1, y1 = box
    span = max(len(text), 1)
    out = []
    start = 0
    for word in text.split():
        start = text.index(word, start)
        end = start + len(word)
        out.append((start, end, x0 + (x1 - x0) * start / span, y0, x0 + (x1 - x0) * end / span, y1))
        start = end
    return tuple(out)


def _fraction(value: float, whole: float) -> float:
    return round(min(max(float(value) / whole, 0.0), 1.0), 5)


def recognise(
    image: Image.Image,
    *,
    what: str,
    timeout_seconds: float,
    engine_name: str = "auto",
    languages: str = "eng",
) -> OcrPage:
    """The text on ``image`` (any mode), its word boxes and mean word confidence, within ``timeout_seconds``.

    ``engine_name`` is CALYPSO_OCR_ENGINE (``auto``, ``paddle``, ``tesseract``), ``languages`` Tesseract's
    CALYPSO_OCR_LANGUAGES. ``what`` names the page in errors ("page 3 of 'scan.pdf'"). Raises
    UnprocessableDocument: OCR not available (``ocr_unavailable``), past the time limit (``ocr_timeout``) or the
    engine failed (``ocr_failed``).
    """
    deadline = Deadline(timeout_seconds, what)
    if max(image.size) > MAX_SIDE:
        scale = MAX_SIDE / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.BILINEAR)
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    width, height = rgb.size
    first = "tesseract" if engine_name == "tesseract" else "paddle"
    ocr = engine(first, languages if first == "tesseract" else "")
    try:
        lines, turns = _read_upright(ocr, rgb, deadline)
        if engine_name == "auto":
            packs = _choose_tesseract(_turned(rgb, turns), lines, languages, deadline)
            if packs is not None:
                deadline.check()
                ocr = engine("tesseract", packs)
                lines = ocr.read(_turned(rgb, turns), deadline)
    except (UnprocessableDocument, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - an engine failure is the document's failure, said plainly
        raise UnprocessableDocument(
            f"The OCR engine ({ocr.name}) failed on {what} ({type(exc).__name__}: {exc}). Upload a cleaner scan or "
            "a file with a text layer.",
            param="file",
            code="ocr_failed",
        ) from exc
    lines = [line for line in lines if line.confidence >= MIN_LINE_CONFIDENCE and line.text.strip()]
    return _page(lines, turns, width, height, ocr.name)


def describe(engine_name: str, languages: str) -> str:
    """The OCR engine(s) a server with these settings runs, for the banner and ``/readyz`` (loads no model)."""
    from calypso.ingest import ocr_paddle, ocr_tesseract

    tesseract = ocr_tesseract.describe()
    if engine_name == "tesseract":
        return f"{tesseract} ({languages})" if tesseract else "Tesseract (not installed: apt-get install tesseract-ocr)"
    paddle = ocr_paddle.describe()
    if engine_name == "paddle" or not tesseract:
        return paddle
    packs = sorted(set(TESSERACT_SCRIPTS.values()) & set(ocr_tesseract.installed_languages()))
    return f"{paddle}; {tesseract} for {', '.join(packs)}" if packs else paddle
