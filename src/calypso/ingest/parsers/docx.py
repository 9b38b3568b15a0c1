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
import zipfile

import docx
from docx.opc.exceptions import PackageNotFoundError
from lxml import etree

from calypso.errors import UnprocessableDocument
from calypso.models import Heading, Page, ParsedDocument

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
P, TBL, TR, TC, SDT, SDT_CONTENT = (f"{{{_W}}}{t}" for t in ("p", "tbl", "tr", "tc", "sdt", "sdtContent"))
_T, _TAB, _BR, _CR, _NBH = (f"{{{_W}}}{t}" for t in ("t", "tab", "br", "cr", "noBreakHyphen"))
_FALLBACK = f"{{{_MC}}}Fallback"
_HEADING_NAME = re.compile(r"heading\s*([1-9])$", re.I)


def _style_levels(document: docx.document.Document) -> dict[str, int]:
    """style id -> heading level, following ``basedOn`` so custom heading styles count too."""
    levels: dict[str, int] = {}
    for style in document.styles:
        current, depth = style, 0
        while current is not None and depth < 10:
            name = (current.name or "").strip()
            match = _HEADING_NAME.match(name)
            if match or name.lower() == "title":
                levels[style.style_id] = int(match.group(1)) if match else 1
                break
            current, depth = current.base_style, depth + 1
    return levels


def _paragraph_text(p: etree._Element) -> str:
    if p.find(f".//{_FALLBACK}") is not None:
        # Text boxes are stored twice (mc:Choice and mc:Fallback); keep only the Choice copy.
        for fallback in p.iter(_FALLBACK):
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
            pieces.extend(_table_lines(child))  # nested table: its rows inline in the cell
        elif child.tag == SDT:
            content = child.find(SDT_CONTENT)
            if content is not None:
                pieces.append(_cell_text(content))
    return " ".join(" ".join(p.split()) for p in pieces if p.strip())


def _table_lines(tbl: etree._Element) -> list[str]:
    lines = []
    for tr in tbl.iter(TR):
        if tr.getparent() is not tbl:
            continue  # rows of nested tables are rendered inside their cell
        # Iterating w:tc (not python-docx's row.cells) keeps a merged cell once, not once per grid column.
        cells = [_cell_text(tc) for tc in tr.iter(TC) if tc.getparent() is tr]
        if any(cells):
            lines.append(" | ".join(cells))
    return lines


class _Builder:
    def __init__(self, levels: dict[str, int]) -> None:
        self.levels = levels
        self.parts: list[str] = []
        self.pos = 0
        self.headings: list[Heading] = []

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
        text = _paragraph_text(p).rstrip()
        if not text.strip():
            return
        style = p.find(f"{{{_W}}}pPr/{{{_W}}}pStyle")
        level = self.levels.get(style.get(f"{{{_W}}}val", "")) if style is not None else None
        if level is not None:
            self.headings.append(Heading(level=level, title=" ".join(text.split()), start=self.pos + bool(self.parts)))
        self.add(text)


def parse(data: bytes, filename: str) -> ParsedDocument:
    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, PackageNotFoundError, KeyError, ValueError, etree.XMLSyntaxError) as exc:
        raise UnprocessableDocument(
            f"{filename!r} is not a readable DOCX file: it is corrupt, truncated or another format "
            "(old .doc files are not supported). Open it in Word or LibreOffice, save as .docx and upload it again.",
            param="file",
        ) from exc
    builder = _Builder(_style_levels(document))
    builder.walk(document.element.body)
    text = "".join(builder.parts)
    title = (document.core_properties.title or "").strip() or None
    if title is None:
        title = next((h.title for h in builder.headings if h.level == 1), None)
    return ParsedDocument(
        text=text,
        pages=[Page(number=1, label="1", start=0, end=len(text))],
        headings=builder.headings,
        title=title,
        metadata={k: v for k, v in {"author": (document.core_properties.author or "").strip()}.items() if v},
    )
