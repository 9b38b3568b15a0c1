"""Scanned PDFs made from text: pages rendered to noisy JPEGs."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
from PIL import Image


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
