"""How a reader finds a passage or a quote in its document: "p. 4", "slide 3", "Segments!A4:F19", a heading path.

A document's type decides its style (GUIDE, "Where a passage is"), written in its row of
``calypso.ingest.formats``:

- ``page``: PDF pages and images, "p. 4" ("pp. 4–5" over several);
- ``slide``: presentations, one page per slide, "slide 3" ("slides 2–3");
- ``label``: the page label is the whole locator ("Segments!A4:F19", "attachment report.pdf, p. 3");
- ``heading``: formats without pages a reader could find (Word, HTML, Markdown, e-books, text): the
  heading path above the passage or quote ("Chapter 3 › Fees"), never an invented "p. 1".

A type whose row says none (plain text), or that has no row, has pages only when its parser made more than one.
"""

from __future__ import annotations

from collections.abc import Sequence

from calypso.ingest.formats import LocatorStyle, format_of


def locator_style(media_type: str, page_count: int) -> LocatorStyle:
    """The style of a document of ``media_type`` with ``page_count`` pages."""
    fmt = format_of(media_type)
    if fmt is not None and fmt.locator is not None:
        return fmt.locator
    return "page" if page_count > 1 else "heading"


def page_locator(style: LocatorStyle, labels: Sequence[str]) -> str:
    """The locator of the page(s) ``labels`` (in order, usually one); "" for the ``heading`` style."""
    if style == "heading" or not labels:
        return ""
    first, last = labels[0], labels[-1]
    if style == "label":
        return first if len(labels) == 1 else f"{first} – {last}"
    if style == "slide":
        return f"slide {first}" if len(labels) == 1 else f"slides {first}–{last}"
    return f"p. {first}" if len(labels) == 1 else f"pp. {first}–{last}"


def heading_locator(path: Sequence[str]) -> str:
    """A heading path as readers see it: "Chapter 3 › Trustee Compensation"; "" when there is none."""
    return " › ".join(path)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def extent(media_type: str, page_count: int, metadata: dict[str, object] | None = None) -> str:
    """How big a document is in its own units: "15 pages", "12 slides", "3 sheets", "4 sections"; "" when it has
    none a reader could count (a text without headings). ``metadata``: the parser's ``sheets`` and ``sections``
    counts (``parsers.parse_document`` records them)."""
    metadata = metadata or {}
    style = locator_style(media_type, page_count)
    sheets = metadata.get("sheets")
    if isinstance(sheets, int):
        return _count(sheets, "sheet")
    if style == "page":
        return _count(page_count, "page")
    if style == "slide":
        return _count(page_count, "slide")
    if style == "label":
        return _count(page_count, "part")
    sections = metadata.get("sections")
    return _count(sections, "section") if isinstance(sections, int) and sections > 0 else ""
