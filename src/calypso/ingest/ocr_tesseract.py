"""Debian's ``tesseract-ocr`` as an OCR engine (see ``ocr.py``): a subprocess per page, word boxes from its TSV.

It runs where the binary is installed (``apt-get install tesseract-ocr tesseract-ocr-jpn ...``): for the
scripts PP-OCRv6 tiny reads badly, or for every page with ``CALYPSO_OCR_ENGINE=tesseract``. The subprocess
inherits the parse child's memory cap and gets the page's remaining time; it runs on the child's share of
the cores (``OMP_THREAD_LIMIT``).
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import shutil
import subprocess
import unicodedata

from PIL import Image

from calypso.errors import UnprocessableDocument
from calypso.ingest import ocr_threads
from calypso.ingest.ocr_engine import Deadline, Line, OcrEngine

BINARY = "tesseract"


def available() -> bool:
    return shutil.which(BINARY) is not None


@functools.cache
def installed_languages() -> tuple[str, ...]:
    """The language packs Tesseract has here (``eng``, ``jpn`` ...), empty without Tesseract."""
    if not available():
        return ()
    try:
        done = subprocess.run([BINARY, "--list-langs"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(line.strip() for line in done.stdout.splitlines()[1:] if line.strip())


@functools.cache
def describe() -> str:
    """ "Tesseract 5.3.0", or "" when it is not installed."""
    if not available():
        return ""
    try:
        done = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    found = re.search(r"tesseract\s+v?([\d.]+)", done.stdout + done.stderr)
    return f"Tesseract {found.group(1)}" if found else "Tesseract"


def _run(image: Image.Image, args: list[str], deadline: Deadline) -> str:
    png = io.BytesIO()
    image.save(png, "PNG", compress_level=1)
    threads = ocr_threads.threads or os.cpu_count() or 1
    try:
        done = subprocess.run(
            [BINARY, "stdin", "stdout", *args],
            input=png.getvalue(),
            capture_output=True,
            timeout=max(deadline.remaining(), 0.001),
            env={**os.environ, "OMP_THREAD_LIMIT": str(threads)},
            check=False,
        )
    except subprocess.TimeoutExpired:
        deadline.check()
        raise
    except OSError as exc:
        raise _unavailable(f"{type(exc).__name__}: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise RuntimeError(f"tesseract exited with status {done.returncode}: {message[0]}")
    return done.stdout.decode("utf-8", "replace")


def _unavailable(why: str) -> UnprocessableDocument:
    return UnprocessableDocument(
        f"OCR by Tesseract is not available on this server ({why}), so text in images and scanned pages cannot be "
        "read. Install it (apt-get install tesseract-ocr and the language packs, e.g. tesseract-ocr-jpn; see "
        "docs/formats.md), set CALYPSO_OCR_ENGINE=auto, or upload a file with a text layer.",
        param="file",
        code="ocr_unavailable",
    )


def detect_script(image: Image.Image, deadline: Deadline) -> str | None:
    """The script Tesseract's orientation and script detection sees on ``image`` ("Japanese", "Han",
    "Latin" ...), or None when it cannot tell."""
    if "osd" not in installed_languages():
        return None
    for copies in (1, OSD_COPIES):
        try:
            out = _run(_stacked(image, copies), ["--psm", "0", "-l", "osd"], deadline)
        except RuntimeError:  # too little text to tell: OSD exits non-zero
            continue
        found = re.search(r"^Script:\s*(\S+)", out, re.MULTILINE)
        if found:
            return found.group(1)
    return None


# OSD will not name the script of a page with a few lines ("Too few characters"); the same lines stacked this
# many times give it enough (a two-line Korean label: none, then "Hangul").
OSD_COPIES = 4


def _stacked(image: Image.Image, copies: int) -> Image.Image:
    if copies == 1 or image.height * copies > 4 * max(image.width, 1000):
        return image  # a page of text already; and no tall strip of a tall image
    out = Image.new(image.mode, (image.width, image.height * copies), "white")
    for copy in range(copies):
        out.paste(image, (0, copy * image.height))
    return out


class TesseractEngine(OcrEngine):
    """Tesseract in ``languages`` ("eng+deu"), automatic page segmentation (``--psm 3``)."""

    def __init__(self, languages: str) -> None:
        if not available():
            raise _unavailable("the tesseract binary is not on PATH")
        wanted = [lang for lang in (languages or "eng").split("+") if lang]
        missing = [lang for lang in wanted if lang not in installed_languages()]
        if missing:
            packs = " ".join(f"tesseract-ocr-{lang.replace('_', '-')}" for lang in missing)
            raise UnprocessableDocument(
                f"Tesseract has no language pack for {', '.join(missing)} (setting CALYPSO_OCR_LANGUAGES). Install "
                f"it (apt-get install {packs}) or choose among those installed: {', '.join(installed_languages())}.",
                param="file",
                code="ocr_unavailable",
            )
        self.languages = "+".join(wanted)
        self.name = f"Tesseract {self.languages}"

    def read(self, image: Image.Image, deadline: Deadline) -> list[Line]:
        tsv = _run(image, ["-l", self.languages, "--psm", "3", "tsv"], deadline)
        return lines_from_tsv(tsv)


# Tesseract's Korean "words" are often single syllables: two stand in one word unless a gap this share of
# the line's height parts them (a space is about a quarter of an em; syllables touch).
HANGUL_SPACE = 0.25


def is_hangul(char: str) -> bool:
    return "\uac00" <= char <= "\ud7af" or "\u1100" <= char <= "\u11ff" or "\u3130" <= char <= "\u318f"


def is_wide(char: str) -> bool:
    """Whether ``char`` is written without spaces between words: CJK ideographs, kana, full-width punctuation;
    not Hangul (Korean puts spaces between its words)."""
    return not is_hangul(char) and unicodedata.east_asian_width(char) in ("W", "F")


def _spaced(
    before: str, after: str, previous: tuple[int, int, float, float, float, float], left: float, height: float
) -> bool:
    """Whether a space parts two of Tesseract's words: not between CJK characters (written without spaces), between
    Hangul syllables only where the page shows a gap, always elsewhere."""
    if is_wide(before) and is_wide(after):
        return False
    if is_hangul(before) and is_hangul(after):
        return left - previous[4] > HANGUL_SPACE * max(height, previous[5] - previous[3])
    return True


def lines_from_tsv(tsv: str) -> list[Line]:
    """Tesseract's TSV (one row per word) as lines: words joined by a space, except between two wide characters
    (CJK is written without spaces; Tesseract boxes its characters one by one)."""
    grouped: dict[tuple[str, str, str, str], list[dict[str, str]]] = {}
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") != "5" or not (row.get("text") or "").strip():
            continue
        grouped.setdefault((row["page_num"], row["block_num"], row["par_num"], row["line_num"]), []).append(row)
    lines = []
    for rows in grouped.values():
        text = ""
        words: list[tuple[int, int, float, float, float, float]] = []
        confidences: list[float] = []
        for row in rows:
            word = row["text"].strip()
            left, top = float(row["left"]), float(row["top"])
            if text and _spaced(text[-1], word[0], words[-1], left, float(row["height"])):
                text += " "
            words.append(
                (len(text), len(text) + len(word), left, top, left + float(row["width"]), top + float(row["height"]))
            )
            text += word
            confidences.append(max(float(row["conf"]), 0.0) / 100)
        box = (min(w[2] for w in words), min(w[3] for w in words), max(w[4] for w in words), max(w[5] for w in words))
        weights = [w[1] - w[0] for w in words]
        confidence = sum(c * n for c, n in zip(confidences, weights, strict=True)) / max(sum(weights), 1)
        lines.append(Line(text, confidence, box, tuple(words)))
    return lines
