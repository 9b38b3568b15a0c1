"""A scanned copy of a text PDF: every page rasterized at 150 dpi, grayscale, turned a little (within +-1 degree),
with light noise, stored as JPEG quality 70 in an image-only PDF (no text layer), page sizes kept.

It is what a photocopier-scanner makes of a printout; ``bench/scanned_retrieval.py`` and
``bench/ocr_throughput.py`` compare it with the text PDF it came from. The same seed gives the same file.

    .venv/bin/python -m bench.make_scanned [SOURCE.pdf] [OUT.pdf] [--dpi 150] [--seed 23]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pypdfium2 as pdfium

from bench.common import beir as be
from bench.common.scans import make_scanned

DEFAULT_SOURCE = "alps-wiki-qa/alps_wiki.pdf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", nargs="?", help=f"the text PDF (default: shared data {DEFAULT_SOURCE})")
    parser.add_argument("out", nargs="?", default="/tmp/alps_wiki_scanned.pdf")
    parser.add_argument("--dpi", type=int, default=150)
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    source = Path(args.source) if args.source else be.data_root() / DEFAULT_SOURCE
    data = make_scanned(source, args.dpi, args.seed)
    Path(args.out).write_bytes(data)
    check = pdfium.PdfDocument(data)
    chars = sum(len(check[i].get_textpage().get_text_range().strip()) for i in range(len(check)))
    print(f"{source.name} -> {args.out}: {len(check)} pages, {len(data):,} bytes, text layer {chars} characters")
    check.close()


if __name__ == "__main__":
    sys.exit(main())
