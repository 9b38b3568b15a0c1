"""XLSX: every sheet's tables as Markdown rows, one page per block of rows.

The sheets are streamed a row at a time (``xlsx_stream``: memory follows the cells kept, not the
file), each formula giving the value Excel cached when it last saved the file. A sheet's stated size
(its ``<dimension>``) is ignored: rows are read as they are, and every cell read counts against
``max_sheet_cells`` (empty formatted cells too), so a sheet that claims or holds millions of cells
is stopped with a 413 while reading.
Merged cells take their value over their whole span (``sheets.Cell.origin`` marks the copies).
Numbers read as their cells show them (``number_format``). What the tables become, and the page
labels ("Segments!A4:F19"), is ``sheets``'s part. Charts and images are left out: a chart's numbers
are cells of the workbook already.
"""

from __future__ import annotations

import re

from calypso.errors import CalypsoError
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits, too_large
from calypso.ingest.parsers.number_format import format_value
from calypso.ingest.parsers.office import check_package, unreadable
from calypso.ingest.parsers.sheets import Cell, Grid, SheetWriter, cell_text, gc_paused
from calypso.ingest.parsers.xlsx_stream import SheetPart, Workbook
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


def _read_sheet(workbook: Workbook, sheet: SheetPart, budget: _CellBudget) -> Grid:
    grid: Grid = {}
    formats: dict[int, str] = {}  # number format by style id, looked up once per style
    for row, stored, cells in workbook.rows(sheet):
        budget.spend(stored)
        for column, value, style in cells:
            if isinstance(value, str):
                text, numeric = cell_text(value), False
            else:
                number_format = formats.get(style)
                if number_format is None:
                    number_format = formats[style] = workbook.number_format(style)
                text, numeric = format_value(value, number_format)
                text = text.strip() if "|" not in text and "\n" not in text else cell_text(text)
            if text:
                grid[(row, column)] = Cell(text, numeric)
    _apply_merges(grid, sheet.merges, budget)
    return grid


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    check_package(data, filename, limits, "XLSX")
    try:
        workbook = Workbook(data)
    except MemoryError:
        raise  # the parse child turns it into a 413
    except Exception as exc:  # zip, XML, key and value errors of a broken package
        raise unreadable(filename, "XLSX") from exc
    try:
        with gc_paused():
            writer = _read_workbook(workbook, filename, limits)
        title = plausible_title(workbook.title)
    finally:
        workbook.close()
    return writer.document(title)


def _read_workbook(workbook: Workbook, filename: str, limits: ParseLimits) -> SheetWriter:
    budget = _CellBudget(filename, limits)
    writer = SheetWriter(limits.chunk_size)
    for sheet in workbook.sheets:
        try:
            grid = _read_sheet(workbook, sheet, budget)
        except (CalypsoError, MemoryError):
            raise
        except Exception as exc:  # a truncated or corrupt sheet: XML, zlib, zip and value errors
            raise unreadable(filename, "XLSX") from exc
        writer.sheet(grid, sheet.name, sheet_reference(sheet.name))
        limits.check_chars(writer.pos, filename)
    return writer
