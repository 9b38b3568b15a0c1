"""Images (PNG, JPEG, TIFF, WebP) via Pillow and OCR: one page per frame (a multi-page TIFF has several).

The size of every frame is read from its header and checked against ``max_image_pixels`` before any
pixel is decoded, so a 20,000 x 20,000 PNG of a few kilobytes is refused, not inflated. The EXIF
orientation is applied, so pages and word boxes are the image as a viewer shows it.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator

from PIL import Image, ImageOps, UnidentifiedImageError

from calypso.errors import EmptyDocument, PayloadTooLarge, UnprocessableDocument
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits, too_large
from calypso.ingest.ocr import OcrPage
from calypso.ingest.ocr_budget import OcrBudget, ocr_unavailable_for
from calypso.models import Page, ParsedDocument

SEPARATOR = "\n\n"


def _open(data: bytes, filename: str, limits: ParseLimits) -> Image.Image:
    # Pillow's own bomb guard (a warning, then an error at twice its limit) gives way to ours, which names the setting.
    Image.MAX_IMAGE_PIXELS = None
    try:
        image = Image.open(io.BytesIO(data))  # reads the header only
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise UnprocessableDocument(
            f"{filename!r} is not a readable image: it is corrupt, truncated or not an image at all ({exc}). "
            "Check that the whole file was uploaded, or save it again as PNG or JPEG.",
            param="file",
        ) from exc
    return image


def _check_size(image: Image.Image, filename: str, limits: ParseLimits, frame: int) -> None:
    width, height = image.size
    if width * height > limits.max_image_pixels:
        where = f"frame {frame} of {filename!r}" if frame > 1 else repr(filename)
        raise too_large(
            f"{where} is {width:,} x {height:,} pixels ({width * height:,})",
            limits,
            "max_image_pixels",
            "image_too_large",
        )


def _frames(image: Image.Image, filename: str, limits: ParseLimits) -> Iterator[Image.Image]:
    """Each frame, decoded (after its size check), upright as its EXIF orientation says."""
    count = int(getattr(image, "n_frames", 1) or 1)
    if count > limits.ocr_max_pages:
        raise too_large(f"{filename!r} has {count:,} image frames", limits, "ocr_max_pages", "too_many_ocr_pages")
    for index in range(count):
        try:
            image.seek(index)
            _check_size(image, filename, limits, index + 1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                frame = ImageOps.exif_transpose(image)
                frame.load()
        except (PayloadTooLarge, UnprocessableDocument):
            raise
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise UnprocessableDocument(
                f"The image {filename!r} is damaged: decoding frame {index + 1} failed ({exc}). "
                "Check that the whole file was uploaded, or save it again and upload it.",
                param="file",
            ) from exc
        yield frame


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    image = _open(data, filename, limits)
    _check_size(image, filename, limits, 1)
    if not limits.ocr_enabled:
        raise ocr_unavailable_for(filename, "is an image", "OCR is switched off (setting CALYPSO_OCR_ENABLED)")
    budget = OcrBudget(limits, filename, int(getattr(image, "n_frames", 1) or 1))
    texts: list[str] = []
    pages: list[Page] = []
    pos = 0
    frames = list(_frames_with_text(image, filename, limits, budget))
    for index, (text, page) in enumerate(frames):
        end = pos + len(text) + (len(SEPARATOR) if index < len(frames) - 1 else 0)
        pages.append(Page(index + 1, str(index + 1), pos, end, "ocr", page.confidence, page.shifted(pos)))
        texts.append(text)
        pos = end
    text = SEPARATOR.join(texts)
    if not text.strip():
        raise EmptyDocument(
            f"No text was recognised in the image {filename!r}. Upload a sharper scan or photo of the text.",
            param="file",
        )
    engines = ", ".join(sorted({page.engine for _, page in frames if page.words}))
    metadata = {"page_count": len(pages), "ocr_pages": len(pages), "format": image.format or "", "ocr_engine": engines}
    return ParsedDocument(text=text, pages=pages, title=filename, metadata=metadata)


def _frames_with_text(
    image: Image.Image, filename: str, limits: ParseLimits, budget: OcrBudget
) -> Iterator[tuple[str, OcrPage]]:
    many = int(getattr(image, "n_frames", 1) or 1) > 1
    for index, frame in enumerate(_frames(image, filename, limits)):
        what = f"frame {index + 1} of {filename!r}" if many else repr(filename)
        page = budget.recognise(frame, what)
        yield page.text, page
