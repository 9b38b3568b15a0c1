"""A scanned copy of a text PDF: every page rasterized at 150 dpi, grayscale, turned a little (within +-1 degree),
with light noise, stored as JPEG quality 70 in an image-only PDF (no text layer), page sizes kept.

It is what a photocopier-scanner makes of a printout; ``bench/scanned_retrieval.py`` and
``bench/ocr_throughput.py`` compare it with the text PDF it came from. The same seed gives the same file.

    PYTHONPATH=src .venv/bin/python bench/make_scanned.py [SOURCE.pdf] [OUT.pdf] [--dpi 150] [--seed 23]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import beir_eval as be  # bench/ is sys.path[0] when run as a script
import numpy as np
import pypdfium2 as pdfium
from PIL import Image

DEFAULT_SOURCE = "alps-wiki-qa/alps_wiki.pdf"


def scan_page(image: Image.Image, rng: np.random.Generator) -> bytes:
    """One page as a scanner gives it back: grey, slightly skewed, noisy, JPEG quality 70."""
    grey = image.convert("L").rotate(float(rng.uniform(-1.0, 1.0)), resample=Image.BILINEAR, fillcolor=255)
    pixels = np.asarray(grey, dtype=np.float32) + rng.normal(0.0, 8.0, size=(grey.height, grey.width))
    noisy = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), mode="L")
    out = io.BytesIO()
    noisy.save(out, "JPEG", quality=70)
    return out.getvalue()


def make_scanned(source: Path, dpi: int = 150, seed: int = 23) -> bytes:
    rng = np.random.default_rng(seed)
    original = pdfium.PdfDocument(source.read_bytes())
    scanned = pdfium.PdfDocument.new()
    try:
        for index in range(len(original)):
            page = original[index]
            width, height = page.get_size()
            jpeg = scan_page(page.render(scale=dpi / 72, grayscale=True).to_pil(), rng)
            page.close()
            add_image_page(scanned, jpeg, width, height)
        out = io.BytesIO()
        scanned.save(out)
        return out.getvalue()
    finally:
        scanned.close()
        original.close()


def add_image_page(document: pdfium.PdfDocument, jpeg: bytes, width: float, height: float) -> None:
    """A page of ``width`` x ``height`` points holding only the JPEG image: what a scanner writes."""
    target = document.new_page(width, height)
    picture = pdfium.PdfImage.new(document)
    picture.load_jpeg(io.BytesIO(jpeg), inline=True)
    picture.set_matrix(pdfium.PdfMatrix().scale(width, height))
    target.insert_obj(picture)
    target.gen_content()
    target.close()


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
