"""PDF via pypdfium2: text per physical page, the PDF's own page labels, metadata title; OCR where a page needs it.

A page whose text layer is missing or unusable (``ocr_pages.needs_ocr``: empty, control characters and
private-use glyphs, or a few characters over a scanned image) is rendered at ``ocr_dpi`` and recognised
(``ingest/ocr.py``); its page keeps its number and label, with ``modality="ocr"``. Pages with a text
layer are never rendered, so text PDFs keep their speed.

Page convention: page texts (CRLF -> LF, trailing whitespace stripped) are joined with
"\\n\\n"; each page's span includes the separator that follows it, so pages are contiguous
and ``text[page.start:page.end].rstrip("\\n")`` is that page's text. The last page has no
separator. A page without a text layer owns only its separator.
"""

from __future__ import annotations

import threading

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from calypso.errors import UnprocessableDocument
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits, too_large
from calypso.ingest.ocr import OcrPage
from calypso.ingest.ocr_budget import OcrBudget, check_ocr_pages, ocr_unavailable_for
from calypso.ingest.ocr_pages import needs_ocr, render_for_ocr
from calypso.ingest.ocr_share import collect_pages, share_pages
from calypso.ingest.parsers.bombs import check_flate_streams
from calypso.ingest.titles import plausible_title
from calypso.models import Page, ParsedDocument
from calypso.text.control import clean_text

SEPARATOR = "\n\n"

# PDFium is not thread-safe: one document operation at a time per process.
_LOCK = threading.Lock()

# PDFium markers, not text: U+FFFE / U+0002 flag a soft hyphen at a line break; NUL is padding.
# (Chained str.replace: str.translate takes a slow per-character path on non-ASCII text.)
_DROP = ("\ufffe", "\x02", "\x00")

_METADATA_KEYS = {"Author": "author", "Subject": "subject", "Keywords": "keywords"}


def _load_error(exc: pdfium.PdfiumError, filename: str) -> UnprocessableDocument:
    code = getattr(exc, "err_code", None)
    if code == pdfium_c.FPDF_ERR_PASSWORD:
        message = (
            f"The PDF {filename!r} is encrypted and needs a password; "
            "upload an unencrypted copy (remove the password protection and save it again)."
        )
    elif code == pdfium_c.FPDF_ERR_SECURITY:
        message = f"The PDF {filename!r} uses an unsupported encryption scheme; upload an unencrypted copy."
    elif code in (pdfium_c.FPDF_ERR_FORMAT, pdfium_c.FPDF_ERR_FILE):
        message = (
            f"{filename!r} is not a readable PDF: it is corrupt, truncated or not a PDF at all. "
            "Check that the whole file was uploaded, or re-export it as PDF."
        )
    else:
        message = f"The PDF {filename!r} could not be opened ({exc}); re-export it as PDF and upload it again."
    return UnprocessableDocument(message, param="file")


def _page_text(pdf: pdfium.PdfDocument, index: int, limits: ParseLimits, used: int, filename: str) -> str:
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            # Checked before the text is copied out: ``used`` characters are already extracted.
            limits.check_chars(used + textpage.count_chars(), filename)
            raw = textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()
    text: str = raw.replace("\r\n", "\n").replace("\r", "\n")
    for marker in _DROP:
        text = text.replace(marker, "")
    # Symbol-font glyphs come out as control characters (GeoTopo's \x04, \x12 ...): removed per page,
    # before the trailing whitespace, so a page still ends on text.
    return clean_text(text).rstrip()


def _label(pdf: pdfium.PdfDocument, index: int) -> str:
    try:
        label = pdf.get_page_label(index)  # "" when the PDF has no /PageLabels entry for the page
    except pdfium.PdfiumError:
        label = ""
    return label.strip() or str(index + 1)


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    check_flate_streams(data, filename, limits)  # PDFium inflates a whole stream at once: refuse bombs first
    # What the stream check cannot see (encrypted PDFs, other filters) is bounded by the memory cap of the
    # parsing child this runs in (``ingest/isolation.py``): PDFium aborts there, not in the server.
    return _parse(data, filename, limits)


def _parse(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    with _LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise _load_error(exc, filename) from exc
        texts: list[str] = []
        labels: list[str] = []
        used = 0
        try:
            count = len(pdf)
            if count > limits.max_document_pages:
                raise too_large(f"{filename!r} has {count:,} pages", limits, "max_document_pages", "too_many_pages")
            for index in range(count):
                texts.append(_page_text(pdf, index, limits, used, filename))
                labels.append(_label(pdf, index))
                used += len(texts[-1]) + len(SEPARATOR)
            recognised = _recognise_scanned_pages(pdf, texts, limits, filename)
            meta = pdf.get_metadata_dict(skip_empty=True)
        except pdfium.PdfiumError as exc:
            raise UnprocessableDocument(
                f"The PDF {filename!r} is damaged: reading page {len(texts) + 1} failed ({exc}). "
                "Re-export or repair the PDF and upload it again.",
                param="file",
            ) from exc
        finally:
            pdf.close()

    pages: list[Page] = []
    pos = 0
    for index, page_text in enumerate(texts):
        end = pos + len(page_text) + (len(SEPARATOR) if index < count - 1 else 0)
        ocr = recognised.get(index)
        if ocr is None:
            pages.append(Page(number=index + 1, label=labels[index], start=pos, end=end))
        else:
            pages.append(Page(index + 1, labels[index], pos, end, "ocr", ocr.confidence, ocr.shifted(pos)))
        pos = end
    text = SEPARATOR.join(texts)
    if not pages:  # a PDF with zero pages still gets a page covering the (empty) text
        pages.append(Page(number=1, label="1", start=0, end=0))
    # "10811.exe" is a file name, not a title: such metadata gives way to the name of the uploaded file.
    title = plausible_title(meta.get("Title")) or filename
    metadata: dict[str, object] = {"page_count": count}
    if recognised:
        metadata["ocr_pages"] = len(recognised)
        metadata["ocr_engine"] = ", ".join(sorted({page.engine for page in recognised.values()}))
    metadata.update({ours: meta[key].strip() for key, ours in _METADATA_KEYS.items() if meta.get(key, "").strip()})
    return ParsedDocument(text=text, pages=pages, title=title, metadata=metadata)


def _recognise_scanned_pages(
    pdf: pdfium.PdfDocument, texts: list[str], limits: ParseLimits, filename: str
) -> dict[int, OcrPage]:
    """OCR of the pages without a usable text layer (their ``texts`` replaced), by page index.

    Counted before any is recognised (``ocr_max_pages``). Runs under ``_LOCK``: rendering is PDFium work,
    and the recognition between renders is what a parse child is for.
    """
    scanned = [index for index, text in enumerate(texts) if needs_ocr(pdf, index, text)]
    if not scanned:
        return {}
    check_ocr_pages(len(scanned), filename, limits)
    if not limits.ocr_enabled:
        if any(texts[index].strip() for index in range(len(texts))):
            return {}  # the text layer there is, is kept
        raise ocr_unavailable_for(
            filename, "has no text layer (a scan?)", "OCR is switched off (setting CALYPSO_OCR_ENABLED)"
        )
    recognised = _recognise(pdf, share_pages(scanned), limits, filename, len(scanned))
    # The pages other parse children read meanwhile (``ocr_share.py``): the same PDF, a share of its pages each.
    recognised.update(collect_pages(list(recognised), scanned))
    for index, page in list(recognised.items()):
        if page.text.strip() or not texts[index].strip():
            texts[index] = page.text
        else:
            del recognised[index]  # nothing read over a text layer that has something: the layer is kept
    return recognised


def _recognise(
    pdf: pdfium.PdfDocument, pages: list[int], limits: ParseLimits, filename: str, announced: int
) -> dict[int, OcrPage]:
    budget = OcrBudget(limits, filename, announced)
    recognised: dict[int, OcrPage] = {}
    for index in pages:
        image = render_for_ocr(pdf, index, limits)
        recognised[index] = budget.recognise(image, f"page {index + 1} of {filename!r}")
    return recognised


def recognise_pages(data: bytes, filename: str, pages: tuple[int, ...], limits: ParseLimits) -> dict[int, OcrPage]:
    """OCR of ``pages`` (indexes) of the PDF ``data``: a helper child's share of another child's document."""
    with _LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise _load_error(exc, filename) from exc
        try:
            return _recognise(pdf, list(pages), limits, filename, 0)
        finally:
            pdf.close()
