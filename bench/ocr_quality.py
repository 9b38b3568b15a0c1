"""OCR word recall on the ground truth of ``ingestion-docs-more`` (issue 23), and the engine it chose.

For each file: Calypso's parser (the real path: ``detect_and_parse``, so PDF rendering at ``ocr_dpi`` and the
orientation handling count), then the words of the ground truth found in the recognised text (multiset
recall of lower-cased ``\\w+`` tokens) and the time taken. Targets (issue 40): >= 0.95 for
phototest-rotated-180.png, ocr_test.pdf and DA-1p.png, >= 0.85 for layout-parser-paper-with-table.jpg. ``--tesseract`` runs Debian's
tesseract (5.x, eng, ``--psm 1``: page segmentation with orientation detection) on the same page images, for
the comparison that chose the engine. ``--dpi`` sets the PDF rendering resolution.

    .venv/bin/python -m bench.ocr_quality [--tesseract] [--dpi 150] [--show]
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image

from bench.common import beir as be
from calypso.ingest import ocr
from calypso.ingest.limits import ParseLimits
from calypso.ingest.parsers import detect_and_parse

# (file, ground truth, target)
CASES = [
    ("images/phototest-rotated-180.png", "groundtruth/phototest.gold.txt", 0.95),
    ("scanned_pdf/ocr_test.pdf", "groundtruth/ocr_test.tesseract.full_page.md", 0.95),
    ("images/DA-1p.png", "groundtruth/DA-1p.pdf.txt", 0.95),
    ("images/layout-parser-paper-with-table.jpg", "groundtruth/layout-parser-paper-with-table.pdf.txt", 0.85),
]


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.lower()))


def recall(truth: str, recognised: str) -> tuple[float, list[str]]:
    want, got = words(truth), words(recognised)
    missed = want - got
    return 1 - sum(missed.values()) / max(sum(want.values()), 1), sorted(missed.elements())


def page_image(path: Path, dpi: int) -> Image.Image:
    if path.suffix == ".pdf":
        pdf = pdfium.PdfDocument(path.read_bytes())
        image: Image.Image = pdf[0].render(scale=dpi / 72, grayscale=True).to_pil()
        pdf.close()
        return image
    return Image.open(path).convert("RGB")


def tesseract(image: Image.Image) -> str:
    png = io.BytesIO()
    image.save(png, "PNG")
    done = subprocess.run(
        ["tesseract", "stdin", "stdout", "-l", "eng", "--psm", "1"], input=png.getvalue(), capture_output=True
    )
    return done.stdout.decode("utf-8", "replace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tesseract", action="store_true", help="also run Debian's tesseract on the same pages")
    parser.add_argument("--dpi", type=int, default=ParseLimits().ocr_dpi)
    parser.add_argument("--show", action="store_true", help="print the words each engine missed")
    args = parser.parse_args()
    root = be.data_root() / "ingestion-docs-more"
    limits = ParseLimits(ocr_dpi=args.dpi)
    t = time.perf_counter()
    ocr.engine()
    described = ocr.describe(limits.ocr_engine, limits.ocr_languages)
    print(f"{described} loaded in {time.perf_counter() - t:.2f}s; PDF pages at {args.dpi} dpi")
    use_tesseract = args.tesseract and shutil.which("tesseract") is not None
    if args.tesseract and not use_tesseract:
        print("tesseract not found (apt-get install tesseract-ocr): skipped")
    passed = True
    for name, truth_name, target in CASES:
        path, truth = root / name, (root / truth_name).read_text(encoding="utf-8")
        t = time.perf_counter()
        parsed, _ = detect_and_parse(path.read_bytes(), path.name, limits=limits)
        seconds = time.perf_counter() - t
        score, missed = recall(truth, parsed.text)
        ok = score >= target
        passed &= ok
        confidence = parsed.pages[0].confidence or 0.0
        line = f"{path.name:<38} calypso recall {score:.3f} (target {target:.2f} {'ok' if ok else 'MISSED'}) {seconds:5.2f}s conf {confidence:.3f}"
        if use_tesseract:
            image = page_image(path, args.dpi)
            t = time.perf_counter()
            theirs, their_missed = recall(truth, tesseract(image))
            line += f" | tesseract recall {theirs:.3f} {time.perf_counter() - t:5.2f}s"
        print(line)
        if args.show:
            print(f"    calypso missed: {' '.join(missed[:60])}")
            if use_tesseract:
                print(f"    tesseract missed: {' '.join(their_missed[:60])}")
    print("all targets met" if passed else "some targets missed")


if __name__ == "__main__":
    main()
