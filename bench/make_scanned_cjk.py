"""Scanned Chinese and Japanese documents with their text as ground truth (issue 40).

The text is set in Debian's ``fonts-noto-cjk`` (Noto Serif CJK SC for Chinese, JP for Japanese), 12 pt on
A4 pages at 150 dpi, horizontal, then each page goes through ``make_scanned.scan_page`` (grey, turned within
+-1 degree, noise, JPEG quality 70) into an image-only PDF, as ``make_scanned.py`` does for the Alps PDF.

- Chinese: the first paragraphs of the shared CMRC 2018 corpus (``multilingual/cmrc2018-zh``), whole ones,
  until ``--pages`` pages are full; their ids are kept, so ``bench/ocr_cjk.py`` can ask the corpus's own
  questions of the scan.
- Japanese: the shared data holds no Japanese paragraphs, so public-domain prose is carried here: the
  openings of Natsume Soseki's 吾輩は猫である (1905), Akutagawa Ryunosuke's 羅生門 (1915) and 蜘蛛の糸
  (1918), in modern kana usage.

    .venv/bin/python -m bench.make_scanned_cjk [--out-dir /tmp] [--pages 3] [--seed 29]

writes ``scanned_zh.pdf`` / ``scanned_zh.json`` and ``scanned_ja.pdf`` / ``scanned_ja.json`` (the text of each
page, and for Chinese the paragraph ids on each page).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pypdfium2 as pdfium

from bench.common.scans_cjk import (
    make,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", default="/tmp")
    parser.add_argument("--pages", type=int, default=3, help="most pages of the Chinese scan")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--png", action="store_true", help="also write each scan's first page as a PNG")
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    for language in ("zh", "ja"):
        pdf, truth = make(language, out_dir, args.pages, args.seed)
        pages = json.loads(truth.read_text(encoding="utf-8"))
        chars = sum(len(p["text"].replace("\n", "")) for p in pages)
        print(
            f"{language}: {pdf} ({len(pages)} pages, {chars} characters, {pdf.stat().st_size:,} bytes); truth {truth}"
        )
        if args.png:
            document = pdfium.PdfDocument(pdf.read_bytes())
            document[0].render(scale=1).to_pil().save(out_dir / f"scanned_{language}.png")
            document.close()


if __name__ == "__main__":
    main()
