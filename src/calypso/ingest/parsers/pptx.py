"""PPTX via python-pptx: one page per slide (label = slide number, located as "slide 3").

Each slide's text, in reading order:

- the title first, as a level-1 heading at the slide's start;
- then the shapes from top to bottom, those side by side (tops within 5 % of the slide's height)
  from left to right, groups opened in place;
- paragraphs keep their list marks ("- ", "1. ", indented two spaces a level): a bullet or number the
  paragraph sets, or the bullets a body placeholder gives its paragraphs by default;
- tables as Markdown rows (``| a | b |``), a merged cell's text repeated over its span;
- charts as a small table of the values the chart part caches: a row per category, a column per series,
  under "Chart: <its title>";
- pictures by their alternative text ("Image: ..."), when they have one;
- speaker notes last, under a "Notes:" line.

Slides are separated by a blank line, which belongs to the slide before. The document asks the chunker
to start a passage at every slide (``break_at_pages``), so a passage is located by one slide.
SmartArt text and embedded objects (a workbook inside a slide) are not read.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

from lxml import etree

from calypso.errors import CalypsoError
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits, too_large
from calypso.ingest.parsers.number_format import general
from calypso.ingest.parsers.office import check_package, unreadable
from calypso.ingest.parsers.sheets import cell_text
from calypso.ingest.titles import plausible_title
from calypso.models import Heading, Page, ParsedDocument

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_NS = {"a": _A[1:-1], "c": _C[1:-1]}
_CHART_TITLE = etree.XPath("./c:chart/c:title//a:t/text()", namespaces=_NS)
_PLOTS = etree.XPath("./c:chart/c:plotArea/*[c:ser]", namespaces=_NS)
_DESCRIPTION = etree.XPath("./*[1]/*[1]/@descr")
_BODY_PLACEHOLDERS = {2, 7}  # PP_PLACEHOLDER.BODY, OBJECT: their paragraphs are bullets unless they say not
_TITLE_PLACEHOLDERS = {1, 3}  # TITLE, CENTER_TITLE
_SAME_ROW = 0.05  # shapes whose tops differ by less than this share of the slide's height read left to right


def _list_mark(paragraph: Any, bulleted: bool, numbers: dict[int, int]) -> str:
    """The mark a paragraph shows ("- ", "3. ", ""), counting numbered items per level in ``numbers``."""
    level = int(paragraph.level or 0)
    properties = paragraph._p.pPr
    kind = "bullet" if bulleted else ""
    if properties is not None:
        if properties.find(f"{_A}buNone") is not None:
            kind = ""
        elif properties.find(f"{_A}buAutoNum") is not None:
            kind = "number"
        elif properties.find(f"{_A}buChar") is not None or properties.find(f"{_A}buBlip") is not None:
            kind = "bullet"
    for deeper in [key for key in numbers if key > level]:
        del numbers[deeper]  # a numbered sub-list starts again under each item
    if kind != "number":
        numbers.pop(level, None)
    indent = "  " * level
    if kind == "number":
        numbers[level] = numbers.get(level, 0) + 1
        return f"{indent}{numbers[level]}. "
    return f"{indent}- " if kind == "bullet" else indent


def _text_lines(shape: Any) -> list[str]:
    bulleted = shape.is_placeholder and int(shape.placeholder_format.type or 0) in _BODY_PLACEHOLDERS
    numbers: dict[int, int] = {}
    lines = []
    for paragraph in shape.text_frame.paragraphs:
        text = " ".join(paragraph.text.replace("\x0b", "\n").split())
        if not text:
            numbers.clear()
            continue
        lines.append(_list_mark(paragraph, bulleted, numbers) + text)
    return lines


def _table_lines(table: Any) -> list[str]:
    rows = list(table.rows)
    width = len(table.columns)
    grid = [[""] * width for _ in rows]
    for r, row in enumerate(rows):
        for c, cell in enumerate(list(row.cells)[:width]):
            if cell.is_spanned:
                continue  # filled from its merge origin
            text = cell_text(cell.text)
            height, span = (cell.span_height, cell.span_width) if cell.is_merge_origin else (1, 1)
            for dr in range(height):
                for dc in range(span):
                    if r + dr < len(rows) and c + dc < width:
                        grid[r + dr][c + dc] = text
    return ["| " + " | ".join(cells) + " |" for cells in grid if any(cells)]


def _points(element: Any) -> dict[int, str]:
    """The cached points of a series' ``c:cat``/``c:val``/``c:tx``: {index: text}."""
    if element is None:
        return {}
    points = {}
    for point in element.iter(f"{_C}pt"):
        value = point.findtext(f"{_C}v")
        if value is not None and str(point.get("idx", "")).isdigit():
            points[int(point.get("idx"))] = value
    if not points:  # a literal name (c:tx/c:v) rather than a reference
        value = element.findtext(f"{_C}v")
        if value is not None:
            points[0] = value
    return points


def _shown_number(text: str) -> str:
    try:
        return general(float(text))
    except ValueError:
        return cell_text(text)


def _chart_lines(chart_space: Any) -> list[str]:
    """A chart's cached data (read from its XML: python-pptx knows only some chart types) as table rows."""
    title = " ".join("".join(_CHART_TITLE(chart_space)).split())
    lines = [f"Chart: {title}" if title else "Chart"]
    for plot in _PLOTS(chart_space):
        series = plot.findall(f"{_C}ser")
        names = [" ".join(_points(s.find(f"{_C}tx")).get(0, "").split()) for s in series]
        categories = [
            _points(s.find(f"{_C}cat") if s.find(f"{_C}cat") is not None else s.find(f"{_C}xVal")) for s in series
        ]
        values = [
            _points(s.find(f"{_C}val") if s.find(f"{_C}val") is not None else s.find(f"{_C}yVal")) for s in series
        ]
        labels = next((c for c in categories if c), {})
        count = max([len(labels)] + [max(v, default=-1) + 1 for v in values])
        lines.append("|  | " + " | ".join(cell_text(name) for name in names) + " |")
        for index in range(count):
            label = cell_text(labels.get(index, str(index + 1)))
            row = [_shown_number(v[index]) if index in v else "" for v in values]
            lines.append(f"| {label} | " + " | ".join(row) + " |")
    return lines


def _reading_order(shapes: Iterable[Any], slide_height: int) -> list[Any]:
    """Shapes top to bottom; shapes side by side (tops close together) left to right."""
    placed = sorted(shapes, key=lambda s: (s.top or 0, s.left or 0))
    ordered: list[Any] = []
    band: list[Any] = []
    band_top = 0
    for shape in placed:
        top = shape.top or 0
        if band and top - band_top > _SAME_ROW * slide_height:
            ordered.extend(sorted(band, key=lambda s: s.left or 0))
            band = []
        if not band:
            band_top = top
        band.append(shape)
    ordered.extend(sorted(band, key=lambda s: s.left or 0))
    return ordered


def _shape_lines(shape: Any, slide_height: int) -> Iterator[str]:
    if shape.shape_type == 6:  # MSO_SHAPE_TYPE.GROUP
        for child in _reading_order(shape.shapes, slide_height):
            yield from _shape_lines(child, slide_height)
    elif getattr(shape, "has_table", False) and shape.has_table:
        yield from _table_lines(shape.table)
    elif getattr(shape, "has_chart", False) and shape.has_chart:
        yield from _chart_lines(shape.chart_part._element)
    elif shape.has_text_frame:
        yield from _text_lines(shape)
    elif shape.shape_type == 13:  # MSO_SHAPE_TYPE.PICTURE: its alternative text, when it has one
        description = " ".join((_DESCRIPTION(shape._element) or [""])[0].split())
        if description:
            yield f"Image: {description}"


def _is_title(shape: Any) -> bool:
    return bool(shape.is_placeholder and int(shape.placeholder_format.type or 0) in _TITLE_PLACEHOLDERS)


def _slide_lines(slide: Any, slide_height: int) -> tuple[str | None, list[str]]:
    """(title, lines) of one slide; the title is the first line when there is one."""
    shapes = list(slide.shapes)
    title_shape = next((s for s in shapes if _is_title(s) and s.has_text_frame and s.text_frame.text.strip()), None)
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else None
    lines = [title] if title else []
    for shape in _reading_order([s for s in shapes if s is not title_shape], slide_height):
        lines.extend(_shape_lines(shape, slide_height))
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = [" ".join(p.text.split()) for p in frame.paragraphs] if frame is not None else []
        notes = [line for line in notes if line]
        if notes:
            lines.append("Notes:")
            lines.extend(notes)
    return title, lines


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    check_package(data, filename, limits, "PPTX")  # python-pptx reads every part whole: refuse bombs first
    import pptx  # imported here: only presentations need it

    try:
        presentation = pptx.Presentation(io.BytesIO(data))
        slides = list(presentation.slides)
    except MemoryError:
        raise
    except Exception as exc:  # zip, XML, KeyError of a missing part, python-pptx's own errors
        raise unreadable(filename, "PPTX") from exc
    if len(slides) > limits.max_document_pages:
        raise too_large(f"{filename!r} has {len(slides):,} slides", limits, "max_document_pages", "too_many_pages")
    slide_height = int(presentation.slide_height or 6858000)
    parts: list[str] = []
    pages: list[Page] = []
    headings: list[Heading] = []
    pos = 0
    for number, slide in enumerate(slides, start=1):
        try:
            title, lines = _slide_lines(slide, slide_height)
        except (CalypsoError, MemoryError):
            raise
        except Exception as exc:  # a broken chart or notes part
            raise unreadable(filename, "PPTX") from exc
        if parts:
            parts.append("\n\n")
            pos += 2
            pages[-1] = Page(pages[-1].number, pages[-1].label, pages[-1].start, pos)
        if title:
            headings.append(Heading(level=1, title=title, start=pos))
        text = "\n".join(lines)
        pages.append(Page(number, str(number), pos, pos + len(text)))
        parts.append(text)
        pos += len(text)
        limits.check_chars(pos, filename)
    core_title = plausible_title(presentation.core_properties.title)
    first_title = headings[0].title if headings and headings[0].start == 0 else None
    author = (presentation.core_properties.author or "").strip()
    return ParsedDocument(
        text="".join(parts),
        pages=pages,
        headings=headings,
        title=core_title or first_title,
        metadata={"author": author} if author else {},
        break_at_pages=True,
    )
