"""XLSX via openpyxl, streamed: every sheet's tables as Markdown rows, one page per block of rows.

openpyxl reads in ``read_only`` mode (each sheet's XML is parsed as a stream, a row at a time, so
memory follows the cells kept, not the file) with ``data_only`` (a formula gives the value Excel
cached when it last saved the file). A sheet's stated size (its ``<dimension>``) is ignored: rows are
read as they are, and every cell read counts against ``max_sheet_cells`` (empty formatted cells
too), so a sheet that claims or holds millions of cells is stopped with a 413 while reading.
Merged cells take their value over their whole span (``sheets.Cell.origin`` marks the copies).
Numbers read as their cells show them (``number_format``). What the tables become, and the page
labels ("Segments!A4:F19"), is ``sheets``'s part. Charts and images are left out: a chart's numbers
are cells of the workbook already.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from calypso.errors import CalypsoError
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits, too_large
from calypso.ingest.parsers.number_format import format_value
from calypso.ingest.parsers.office import check_package, unreadable
from calypso.ingest.parsers.sheets import Cell, Grid, SheetWriter, cell_text
from calypso.ingest.titles import plausible_title
from calypso.models import ParsedDocument

_PLAIN_SHEET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_RANGE = re.compile(r"([A-Z]{1,3})(\d+)(?::([A-Z]{1,3})(\d+))?")


def sheet_reference(name: str) -> str:
    """The sheet as a cell reference names it: ``Segments``, or quoted as Excel does (``'Sales 2023'``)."""
    if _PLAIN_SHEET_NAME.fullmatch(name) and not re.fullmatch(r"[A-Za-z]{1,3}\d+", name):
        return name
    return "'" + name.replace("'", "''") + "'"


def _column_number(letters: str) -> int:
    number = 0
    for ch in letters:
        number = number * 26 + ord(ch) - ord("A") + 1
    return number


class _CellBudget:
    """Counts the cells read in a workbook; past ``max_sheet_cells`` the document is refused."""

    def __init__(self, filename: str, limits: ParseLimits) -> None:
        self.filename, self.limits, self.count = filename, limits, 0

    def spend(self, cells: int) -> None:
        self.count += cells
        if self.count > self.limits.max_sheet_cells:
            raise too_large(
                f"{self.filename!r} holds more than {self.limits.max_sheet_cells:,} cells (empty cells that carry "
                "formatting and the spans of merged cells count too; delete unused rows and columns to shrink it)",
                self.limits,
                "max_sheet_cells",
                "too_many_cells",
            )


class _NumberFormats:
    """Number format by style id, looked up once per style (openpyxl's cell objects would do it per cell)."""

    def __init__(self, workbook: Any) -> None:
        from openpyxl.styles.numbers import BUILTIN_FORMATS, BUILTIN_FORMATS_MAX_SIZE

        self.workbook, self.builtin, self.builtin_max = workbook, BUILTIN_FORMATS, BUILTIN_FORMATS_MAX_SIZE
        self.cache: dict[int, str] = {}

    def __call__(self, style_id: int) -> str:
        found = self.cache.get(style_id)
        if found is None:
            try:
                format_id = self.workbook._cell_styles[style_id].numFmtId
                if format_id < self.builtin_max:
                    found = str(self.builtin.get(format_id, "General"))
                else:
                    found = str(self.workbook._number_formats[format_id - self.builtin_max])
            except (IndexError, KeyError, AttributeError):
                found = "General"
            self.cache[style_id] = found
        return found


def _rows(workbook: Any, sheet: Any) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """(row number, cells) of a sheet as openpyxl's streaming parser reads them; its merges after the last row."""
    from openpyxl.worksheet._reader import WorkSheetParser

    with sheet._get_source() as source:
        parser = WorkSheetParser(
            source,
            sheet._shared_strings,
            data_only=True,
            epoch=workbook.epoch,
            date_formats=workbook._date_formats,
            timedelta_formats=workbook._timedelta_formats,
        )
        yield from parser.parse()
        sheet._merges = [str(merge.ref) for merge in parser.merged_cells.mergeCell] if parser.merged_cells else []


def _apply_merges(grid: Grid, merges: list[str], budget: _CellBudget) -> None:
    """Give each merged span its top-left cell's value (marked as copies)."""
    for ref in merges:
        match = _RANGE.fullmatch(ref.upper())
        if match is None or match.group(3) is None:
            continue
        top, left = int(match.group(2)), _column_number(match.group(1))
        bottom, right = int(match.group(4)), _column_number(match.group(3))
        origin = grid.get((top, left))
        if origin is None:
            continue
        budget.spend((bottom - top + 1) * (right - left + 1) - 1)
        copy = Cell(origin.text, origin.numeric, origin=False)
        for row in range(top, bottom + 1):
            for col in range(left, right + 1):
                if (row, col) != (top, left):
                    grid[(row, col)] = copy


def _read_sheet(workbook: Any, sheet: Any, formats: _NumberFormats, budget: _CellBudget) -> Grid:
    grid: Grid = {}
    for row, cells in _rows(workbook, sheet):
        budget.spend(len(cells))
        for cell in cells:
            value = cell["value"]
            if value is None:
                continue
            text, numeric = format_value(value, formats(cell.get("style_id") or 0))
            text = cell_text(text)
            if text:
                grid[(row, cell["column"])] = Cell(text, numeric)
    _apply_merges(grid, getattr(sheet, "_merges", []), budget)
    return grid


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    check_package(data, filename, limits, "XLSX")
    import openpyxl  # imported here: only spreadsheets need it

    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_links=False)
    except MemoryError:
        raise  # the parse child turns it into a 413
    except Exception as exc:  # zip, XML (lxml's XMLSyntaxError), key and value errors of a broken package
        raise unreadable(filename, "XLSX") from exc
    try:
        formats = _NumberFormats(workbook)
        budget = _CellBudget(filename, limits)
        writer = SheetWriter(limits.chunk_size)
        for sheet in workbook.worksheets:
            try:
                grid = _read_sheet(workbook, sheet, formats, budget)
            except (CalypsoError, MemoryError):
                raise
            except Exception as exc:  # a truncated or corrupt sheet: XML, zlib, zip and value errors
                raise unreadable(filename, "XLSX") from exc
            writer.sheet(grid, sheet.title, sheet_reference(sheet.title))
            limits.check_chars(writer.pos, filename)
        title = plausible_title(workbook.properties.title) if workbook.properties else None
    finally:
        workbook.close()
    return writer.document(title)
