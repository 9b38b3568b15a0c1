"""DOCX via python-docx: paragraphs and tables in body order, headings from styles.

Page convention: one page (number 1, label "1") spanning the whole text; DOCX has no
fixed pagination. Blocks (paragraphs, table rows) are separated by "\\n"; a table row is
its cells joined by " | ". ``Heading.start`` is the offset of the heading paragraph.

For speed the body XML is walked directly with lxml: python-docx's ``Paragraph.style``
resolves the style part on every call (about 7 s for an 8,000-paragraph handbook).
"""

from __future__ import annotations

import io
import re

import docx
from lxml import etree

from calypso.errors import UnprocessableDocument
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits
from calypso.ingest.parsers.bombs import check_zip_package
from calypso.ingest.titles import plausible_title
from calypso.models import Heading, Page, ParsedDocument

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
P, TBL, TR, TC, SDT, SDT_CONTENT = (f"{{{_W}}}{t}" for t in ("p", "tbl", "tr", "tc", "sdt", "sdtContent"))
_T, _TAB, _BR, _CR, _NBH = (f"{{{_W}}}{t}" for t in ("t", "tab", "br", "cr", "noBreakHyphen"))
_FALLBACK = f"{{{_MC}}}Fallback"
_VAL = f"{{{_W}}}val"
_GRID_SPAN, _VMERGE = f"{{{_W}}}tcPr/{{{_W}}}gridSpan", f"{{{_W}}}tcPr/{{{_W}}}vMerge"
_PSTYLE = f"{{{_W}}}pPr/{{{_W}}}pStyle"
_HEADING_NAME = re.compile(r"heading\s*([1-9])$", re.I)


def _heading_styles(document: docx.document.Document) -> tuple[dict[str, int], set[str]]:
    """(style id -> heading level, ids of "Title" styles), following ``basedOn`` for custom styles."""
    levels: dict[str, int] = {}
    titles: set[str] = set()
    for style in document.styles:
        current, depth = style, 0
        while current is not None and depth < 10:
            name = (current.name or "").strip()
            match = _HEADING_NAME.match(name)
            if match or name.lower() == "title":
                levels[style.style_id] = int(match.group(1)) if match else 1
                if not match:
                    titles.add(style.style_id)
                break
            current, depth = getattr(current, "base_style", None), depth + 1
    return levels, titles


def _paragraph_text(p: etree._Element) -> str:
    """Text of a paragraph: w:t runs (inside hyperlinks, fields, text boxes too), tabs and breaks."""
    if p.find(f".//{_FALLBACK}") is not None:
        # Text boxes are stored twice (mc:Choice and mc:Fallback); keep only the Choice copy.
        for fallback in list(p.iter(_FALLBACK)):  # list(): removing while iterating skips nodes
            fallback.getparent().remove(fallback)
    parts: list[str] = []
    for el in p.iter(_T, _TAB, _BR, _CR, _NBH):
        tag = el.tag
        if tag == _T:
            parts.append(el.text or "")
        elif tag == _TAB:
            if el.getparent().tag != f"{{{_W}}}tabs":  # tab stops in pPr are layout, not text
                parts.append("\t")
        elif tag == _NBH:
            parts.append("-")
        else:
            parts.append("\n")
    return "".join(parts)


def _cell_text(tc: etree._Element) -> str:
    pieces: list[str] = []
    for child in tc:
        if child.tag == P:
            pieces.append(_paragraph_text(child))
        elif child.tag == TBL:
            pieces.extend(_table_lines(child, nested=True))  # nested table: its rows inline in the cell
        elif child.tag == SDT:
            content = child.find(SDT_CONTENT)
            if content is not None:
                pieces.append(_cell_text(content))
    return " ".join(" ".join(p.split()) for p in pieces if p.strip())


def _table_lines(tbl: etree._Element, nested: bool = False) -> list[str]:
    lines = []
    above: dict[int, str] = {}  # grid column -> text of the cell above, for vertical merges
    for tr in tbl.iter(TR):
        if tr.getparent() is not tbl:
            continue  # rows of nested tables are rendered inside their cell
        # Walking w:tc (not python-docx's row.cells) keeps a horizontally merged cell once.
        cells: list[str] = []
        column = 0
        for tc in tr.iter(TC):
            if tc.getparent() is not tr:
                continue
            span = tc.find(_GRID_SPAN)
            width = int(span.get(_VAL, "1")) if span is not None and span.get(_VAL, "1").isdigit() else 1
            vmerge = tc.find(_VMERGE)
            if vmerge is not None and vmerge.get(_VAL, "continue") == "continue":
                text = above.get(column, "")  # repeat the merged value so each row reads on its own
            else:
                text = _cell_text(tc)
            above[column] = text
            cells.append(text)
            column += width
        if any(cells):
            # A Markdown row, as the other parsers write them: the chunker keeps it whole, and a passage
            # begun inside the table carries its first row as the header (ingest/table_headers.py). A nested
            # table's rows sit inside their parent's cell without the outer bars.
            row = " | ".join(cells)
            lines.append(row if nested else f"| {row} |")
    return lines


class _Builder:
    def __init__(self, levels: dict[str, int], title_styles: set[str]) -> None:
        self.levels = levels
        self.title_styles = title_styles
        self.parts: list[str] = []
        self.pos = 0
        self.headings: list[Heading] = []
        self.title: str | None = None

    def add(self, line: str) -> None:
        if self.parts:
            self.parts.append("\n")
            self.pos += 1
        self.parts.append(line)
        self.pos += len(line)

    def walk(self, container: etree._Element) -> None:
        for el in container:
            if el.tag == P:
                self.paragraph(el)
            elif el.tag == TBL:
                for line in _table_lines(el):
                    self.add(line)
            elif el.tag == SDT:  # content controls (e.g. a table of contents) wrap ordinary blocks
                content = el.find(SDT_CONTENT)
                if content is not None:
                    self.walk(content)

    def paragraph(self, p: etree._Element) -> None:
        # Leading tabs/spaces are layout; stripping them also makes Heading.start hit the title.
        text = _paragraph_text(p).strip()
        if not text:
            return
        style = p.find(_PSTYLE)
        style_id = style.get(_VAL, "") if style is not None else ""
        level = self.levels.get(style_id)
        if level is not None:
            # Tabs after heading numbers ("A.\tPURPOSE") are layout: text and title read "A. PURPOSE".
            text = title = " ".join(text.split())
            self.headings.append(Heading(level=level, title=title, start=self.pos + bool(self.parts)))
            if self.title is None and style_id in self.title_styles:
                self.title = title
        self.add(text)


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    check_zip_package(data, filename, limits)  # python-docx reads and parses every part whole: refuse bombs first
    try:
        document = docx.Document(io.BytesIO(data))
    # python-docx raises many exception types for broken packages (BadZipFile, KeyError,
    # PackageNotFoundError, XMLSyntaxError, ValueError for a non-Word OOXML file, ...).
    except Exception as exc:
        raise UnprocessableDocument(
            f"{filename!r} is not a readable DOCX file: it is corrupt, truncated or another format "
            "(old .doc files are not supported). Open it in Word or LibreOffice, save as .docx and upload it again.",
            param="file",
        ) from exc
    builder = _Builder(*_heading_styles(document))
    builder.walk(document.element.body)
    text = "".join(builder.parts)
    # Not the first "Heading 1": in long documents that is a chapter name, not the title.
    title = plausible_title(document.core_properties.title) or builder.title
    author = (document.core_properties.author or "").strip()
    return ParsedDocument(
        text=text,
        pages=[Page(number=1, label="1", start=0, end=len(text))],
        headings=builder.headings,
        title=title,
        metadata={"author": author} if author else {},
    )
