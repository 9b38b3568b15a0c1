"""What the viewer shows for one link: the passage, the quote in it, where it stands, and its page image.

Every document type gets the passage with the quote marked and the heading path above the quote. A
document with pages also gets its page: a PDF page is rendered (``pdf_page``) with the quote's boxes;
an image document is shown as uploaded. Where a page carries OCR word boxes (``Page.words``) the quote
is marked by the boxes of its words, which is also how a scanned page without a text layer is marked.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from calypso.errors import InvalidRequest, NotFound
from calypso.ingest.formats import PDF
from calypso.locators import heading_locator, page_locator
from calypso.models import Chunk, Document, Page, Passage
from calypso.services.documents import DocumentService
from calypso.viewer.pdf_page import Box, merge_lines, render_page

# Images a browser shows as they are (the original bytes become the page image).
_BROWSER_IMAGES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


@dataclass(frozen=True)
class PageView:
    """The page a paged document's passage is shown on."""

    page: Page
    locator: str  # "p. 4", "slide 3", "Segments!A4:F19"
    image_uri: str | None  # a data: URI, None when the type has no page image (slides, sheets)
    width: int
    height: int
    boxes: tuple[Box, ...]  # the quote's region on the image
    quote_on_page: bool  # part of the quote stands on this page


@dataclass(frozen=True)
class PassageView:
    document: Document
    chunk: Chunk
    chunk_count: int
    quote: tuple[int, int] | None  # code-point offsets into chunk.text
    heading_path: tuple[str, ...]  # above the quote (above the passage's start without one)
    page: PageView | None  # None: the document has no pages a reader could find
    page_count: int

    @property
    def locator(self) -> str:
        return self.page.locator if self.page else heading_locator(self.heading_path)


def _chunk(documents: DocumentService, document: Document, index: int) -> Chunk:
    listing = documents.chunks(document.id, 1, index - 1 if index > 0 else None, document.workspace)
    if index < 0 or not listing.items or listing.items[0].chunk.chunk_index != index:
        raise NotFound(
            f"{document.filename!r} has no passage {index} (it has {document.chunk_count}); "
            "open the link of a current answer.",
            param="chunk",
        )
    return listing.items[0].chunk


def _quote(chunk: Chunk, start: int | None, end: int | None) -> tuple[int, int] | None:
    if start is None and end is None:
        return None
    if start is None or end is None or not 0 <= start < end <= len(chunk.text):
        raise InvalidRequest(
            f"quote_start and quote_end must both be given, with 0 <= quote_start < quote_end <= "
            f"{len(chunk.text)} (the passage's length); got {start} and {end}.",
            param="quote_start",
        )
    return start, end


def _page_at(pages: list[Page], offset: int) -> Page | None:
    for page in pages:
        if page.start <= offset < page.end:
            return page
    return pages[-1] if pages else None


def _word_boxes(page: Page, start: int, end: int) -> tuple[Box, ...]:
    """The boxes of the recognised words that overlap the document span start..end."""
    boxes = [Box(w.x0, w.y0, w.x1, w.y1) for w in page.words if w.start < end and w.end > start]
    return merge_lines(boxes)


def _page_view(
    documents: DocumentService, passage: Passage, pages: list[Page], number: int | None, quote: tuple[int, int] | None
) -> PageView:
    document, chunk = passage.document, passage.chunk
    quote_span = (chunk.start + quote[0], chunk.start + quote[1]) if quote else None
    if number is None:
        number = (_page_at(pages, quote_span[0]) or pages[0]).number if quote_span else chunk.page_start
    page = next((p for p in pages if p.number == number), None)
    if page is None:
        raise InvalidRequest(
            f"page must be between 1 and {len(pages)}, the pages of {document.filename!r}; got {number}.",
            param="page",
        )
    # The part of the quote on this page, in document offsets.
    on_page = None
    if quote_span and quote_span[0] < page.end and quote_span[1] > page.start:
        on_page = (max(quote_span[0], page.start), min(quote_span[1], page.end))
    locator = page_locator(passage.locator_style, (page.label,))
    boxes: tuple[Box, ...] = _word_boxes(page, *on_page) if on_page and page.words else ()
    if document.media_type == PDF:
        quote_text = None
        expected = 0.0
        if on_page and not boxes:
            quote_text = chunk.text[on_page[0] - chunk.start : on_page[1] - chunk.start]
            expected = (on_page[0] - page.start) / max(page.end - page.start, 1)
        image = render_page(documents.content(document), page.number, quote_text, expected)
        boxes = boxes or image.boxes
        uri = "data:image/png;base64," + base64.b64encode(image.png).decode("ascii")
        return PageView(page, locator, uri, image.width, image.height, boxes, on_page is not None)
    if document.media_type in _BROWSER_IMAGES:
        data = documents.content(document)
        width, height = _image_size(data)
        uri = f"data:{document.media_type};base64," + base64.b64encode(data).decode("ascii")
        return PageView(page, locator, uri, width, height, boxes, on_page is not None)
    return PageView(page, locator, None, 0, 0, (), on_page is not None)


def _image_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, JPEG, GIF or WebP from its header; (1000, 1000) when unknown (the
    image is then drawn in a square frame, the boxes still placed as fractions)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:2] == b"\xff\xd8":
        at = 2
        while at + 9 < len(data):
            if data[at] != 0xFF:
                break
            marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2):
                return int.from_bytes(data[at + 7 : at + 9], "big"), int.from_bytes(data[at + 5 : at + 7], "big")
            at += 2 + length
    return 1000, 1000


def build_view(
    documents: DocumentService,
    document: Document,
    chunk_index: int,
    quote_start: int | None = None,
    quote_end: int | None = None,
    page: int | None = None,
) -> PassageView:
    """The view of passage ``chunk_index`` of ``document``, the quote marked; NotFound / InvalidRequest
    for a passage, quote or page the document does not have."""
    if document.status != "completed":
        raise NotFound(f"{document.filename!r} has no passages yet (it is {document.status}).", param="file_id")
    chunk = _chunk(documents, document, chunk_index)
    quote = _quote(chunk, quote_start, quote_end)
    passage = Passage(document, chunk, 0.0)
    heading_path = chunk.heading_path_at(quote[0]) if quote else chunk.heading_path
    page_view = None
    pages: list[Page] = []
    if passage.has_pages:
        pages = documents.pages(document.id, document.workspace)
        if pages:
            page_view = _page_view(documents, passage, pages, page, quote)
    return PassageView(document, chunk, document.chunk_count, quote, heading_path, page_view, len(pages))
