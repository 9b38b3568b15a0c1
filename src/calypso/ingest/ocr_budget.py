"""What OCR may cost one document: how many pages, how long each, how long in all; and the errors past it."""

from __future__ import annotations

import time

from PIL import Image

from calypso.errors import UnprocessableDocument
from calypso.ingest.limits import ParseLimits, too_large
from calypso.ingest.ocr import OcrPage, recognise
from calypso.ingest.ocr_share import announce_ocr, page_recognised


def ocr_unavailable_for(filename: str, what: str, why: str) -> UnprocessableDocument:
    """422 for a document that only OCR could read when OCR cannot run (``why``)."""
    return UnprocessableDocument(
        f"{filename!r} {what}, so its text can only be read by OCR, and {why}. Upload a file with a text layer, "
        "or ask the operator to enable OCR.",
        param="file",
        code="ocr_unavailable",
    )


def check_ocr_pages(count: int, filename: str, limits: ParseLimits) -> None:
    """413 before any OCR when ``count`` pages would need it, past ``ocr_max_pages``."""
    if count > limits.ocr_max_pages:
        raise too_large(
            f"{filename!r} has {count:,} pages without a text layer to recognise",
            limits,
            "ocr_max_pages",
            "too_many_ocr_pages",
        )


class OcrBudget:
    """Recognises a document's pages one by one, each within the per-page limit and all within the document's;
    tells the server how many are to come (``pages``) and each one read (its ``progress``)."""

    def __init__(self, limits: ParseLimits, filename: str, pages: int) -> None:
        self.limits = limits
        self.filename = filename
        self.deadline = time.monotonic() + limits.ocr_timeout_seconds
        self.pages = 0
        announce_ocr(limits.ocr_timeout_seconds, pages)

    def _over(self) -> UnprocessableDocument:
        return UnprocessableDocument(
            f"OCR of {self.filename!r} took longer than {self.limits.ocr_timeout_seconds:g} s in all after "
            f"{self.pages} pages (setting CALYPSO_OCR_TIMEOUT_SECONDS). Split the scan into smaller files, or "
            "ask the operator to raise the limit.",
            param="file",
            code="ocr_timeout",
        )

    def recognise(self, image: Image.Image, what: str) -> OcrPage:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self._over()
        page_limit = self.limits.ocr_page_timeout_seconds
        try:
            page = recognise(
                image,
                what=what,
                timeout_seconds=min(page_limit, remaining),
                engine_name=self.limits.ocr_engine,
                languages=self.limits.ocr_languages,
            )
        except UnprocessableDocument as exc:
            if exc.code == "ocr_timeout" and remaining < page_limit:
                raise self._over() from exc  # the document's budget ran out, not the page's
            raise
        self.pages += 1
        page_recognised()
        return page
