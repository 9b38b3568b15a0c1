"""Stream an XLSX's sheets a row at a time with lxml: values as Excel cached them, merges, bounded memory.

openpyxl reads the workbook part, the shared strings and the styles (``ExcelReader``, without its
``read_worksheets``: in read-only mode that step reads every sheet once just to find its size). The
sheets themselves are read here with ``lxml.etree.iterparse``, each row dropped once read: several
times faster than openpyxl's own read-only cells, which build an object per cell through the
standard library's parser. A sheet's ``<dimension>`` is never read, so a sheet that claims 17
billion cells costs what its real rows cost.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_ROW, _CELL, _VALUE, _MERGE = f"{_NS}row", f"{_NS}c", f"{_NS}v", f"{_NS}mergeCell"
_INLINE_TEXT = f"{_NS}t"
_DIGITS = "0123456789"


@dataclass
class SheetPart:
    name: str
    path: str  # of its XML in the package
    merges: list[str] = field(default_factory=list)  # "A1:H1", filled once its rows are read


class Workbook:
    """What the cells need: shared strings, number formats by style, the date epoch, the sheets in order."""

    def __init__(self, data: bytes) -> None:
        from openpyxl.reader.excel import ExcelReader
        from openpyxl.styles.stylesheet import apply_stylesheet

        reader = ExcelReader(io.BytesIO(data), read_only=True, data_only=True, keep_links=False)
        reader.read_manifest()
        reader.read_strings()
        reader.read_workbook()
        reader.read_properties()
        apply_stylesheet(reader.archive, reader.wb)
        self.archive = reader.archive
        self.book = reader.wb
        self.shared_strings: list[str] = [str(s) for s in reader.shared_strings]
        self.title: str | None = getattr(self.book.properties, "title", None)
        self.sheets = [
            SheetPart(str(sheet.name), str(rel.target))
            for sheet, rel in reader.parser.find_sheets()
            if rel.target in reader.valid_files and str(rel.Type).endswith("/worksheet")
        ]
        self.date_styles: set[int] = set(self.book._date_formats)
        self.timedelta_styles: set[int] = set(self.book._timedelta_formats)

    def close(self) -> None:
        self.archive.close()

    def number_format(self, style_id: int) -> str:
        from openpyxl.styles.numbers import BUILTIN_FORMATS, BUILTIN_FORMATS_MAX_SIZE

        try:
            format_id = self.book._cell_styles[style_id].numFmtId
            if format_id < BUILTIN_FORMATS_MAX_SIZE:
                return str(BUILTIN_FORMATS.get(format_id, "General"))
            return str(self.book._number_formats[format_id - BUILTIN_FORMATS_MAX_SIZE])
        except (IndexError, KeyError, AttributeError):
            return "General"

    def _value(self, cell: Any, kind: str | None, style: int) -> object:
        if kind == "inlineStr":
            return "".join(t.text or "" for t in cell.iter(_INLINE_TEXT))
        raw = cell.findtext(_VALUE)
        if not raw:
            return None
        if kind is None or kind == "n":
            return self._number(raw, style)
        if kind == "s":
            return self.shared_strings[int(raw)]
        if kind == "b":
            return raw.strip() in ("1", "true")
        if kind == "d":
            from openpyxl.utils.datetime import from_ISO8601

            return from_ISO8601(raw)
        return raw  # "str" (a formula's text), "e" (an error such as #DIV/0!)

    def _number(self, raw: str, style: int) -> object:
        if style in self.date_styles:
            from openpyxl.utils.datetime import from_excel

            try:
                return from_excel(float(raw), self.book.epoch, timedelta=style in self.timedelta_styles)
            except (OverflowError, ValueError):
                pass
        try:
            return int(raw)
        except ValueError:
            return float(raw)

    def rows(self, sheet: SheetPart) -> Iterator[tuple[int, int, list[tuple[int, object, int]]]]:
        """(row number, cells stored in the row, [(column, value, style id)] of the cells with a value);
        ``sheet.merges`` is filled when the rows are exhausted."""
        row_number = 0
        columns: dict[str, int] = {}  # "AB" -> 28, computed once per column
        with self.archive.open(sheet.path) as stream:
            events = etree.iterparse(
                stream, events=("end",), tag=(_ROW, _MERGE), resolve_entities=False, no_network=True
            )
            for _event, element in events:
                if element.tag == _MERGE:
                    sheet.merges.append(str(element.get("ref", "")))
                    element.clear()
                    continue
                number = element.get("r")
                row_number = int(number) if number and number.isdigit() else row_number + 1
                cells: list[tuple[int, object, int]] = []
                column = stored = 0
                for cell in element.iterchildren(_CELL):
                    stored += 1
                    reference = cell.get("r")
                    if reference:
                        letters = reference.rstrip(_DIGITS)
                        column = columns.get(letters) or columns.setdefault(letters, _column(letters))
                    else:
                        column += 1
                    style_text = cell.get("s")
                    style = int(style_text) if style_text else 0
                    value = self._value(cell, cell.get("t"), style)
                    if value is not None:
                        cells.append((column, value, style))
                element.clear()
                while element.getprevious() is not None:  # rows already read: free them
                    del element.getparent()[0]
                yield row_number, stored, cells


def _column(letters: str) -> int:
    number = 0
    for ch in letters.upper():
        if not "A" <= ch <= "Z":
            break
        number = number * 26 + ord(ch) - 64
    return number
