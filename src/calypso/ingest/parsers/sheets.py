"""Cells to text: find the tables of a sheet and write each as Markdown rows, in blocks of one passage each.

Shared by the XLSX and CSV/TSV parsers, which read cells into a ``Grid``; this module decides what is a
table and how it reads.

- **Regions.** A region is a block of non-empty cells: cells touching (diagonals too) belong together,
  and two blocks one empty row or column apart join when they face each other over at least half of
  the smaller one (a spacer column between figures, a blank row under a header), while two tables
  side by side or two empty rows apart stay apart. Several tables on one sheet are several regions.
- **Rows.** A region's rows read as ``| a | b | c |`` (columns empty in the whole region left out). Its
  leading rows that hold one text (a title, "In millions of CHF") are caption lines above the table,
  its trailing ones notes below it. The header is the first row, or the rows of text above the first
  row with a number (at most three: multi-line headers keep their lines).
- **Blocks.** A region is written as blocks that each fit one passage (``ParseLimits.chunk_size``). Every
  block is a ``Page`` whose label is its cell range ("Segments!A4:F19"); a block after the first
  repeats the captions and header rows and says so in its label ("Segments!A20:F35 (header rows 4–5)").
  The document asks the chunker to start a passage at every block (``ParsedDocument.break_at_pages``),
  so a number is always quoted beside its header.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from calypso.models import Heading, Page, ParsedDocument
from calypso.text.cjk import content_length

# Joining neighbours compares boxes pairwise: past this many boxes (or passes) they stay as found, which
# bounds a hostile sheet of scattered cells to about 5 million comparisons.
_MAX_BOXES_TO_JOIN = 1000
_JOIN_PASSES = 10
_HEADER_ROWS = 3  # most header rows before the first row with a number
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Cell:
    text: str  # as shown: one line, "|" escaped
    numeric: bool = False  # a number or date (what tells a header from the rows below it)
    origin: bool = True  # False: a copy of a merged cell's value over its span


Grid = dict[tuple[int, int], Cell]  # (row, column), both 1-based


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector while a sheet's cells pile up.

    A million cells are millions of objects, none in a cycle; every full collection walks all of them,
    which made reading 750,000 cells take half again as long.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def cell_text(value: str) -> str:
    """A cell's text on one line (line breaks inside a header become spaces), "|" escaped for the row."""
    return _SPACE.sub(" ", value).strip().replace("|", "\\|")


@dataclass(frozen=True, slots=True)
class Box:
    top: int
    left: int
    bottom: int
    right: int

    def union(self, other: Box) -> Box:
        return Box(
            min(self.top, other.top),
            min(self.left, other.left),
            max(self.bottom, other.bottom),
            max(self.right, other.right),
        )


def column_letters(column: int) -> str:
    letters = ""
    while column > 0:
        column, rest = divmod(column - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def _components(grid: Grid) -> list[Box]:
    """Bounding boxes of the groups of non-empty cells that touch (8 neighbours).

    Each row's cells are cut into runs of adjacent columns, and runs of neighbouring rows that touch
    (diagonals too) are joined: a dense table is one run per row, so this costs a sort per row, not
    nine look-ups per cell.
    """
    columns_by_row: dict[int, list[int]] = {}
    for row, column in grid:
        columns_by_row.setdefault(row, []).append(column)
    runs: list[tuple[int, int, int]] = []  # (row, first column, last column)
    row_runs: dict[int, range] = {}  # row -> indices of its runs
    for row in sorted(columns_by_row):
        columns = sorted(columns_by_row[row])
        first = len(runs)
        start = previous = columns[0]
        for column in columns[1:]:
            if column != previous + 1:
                runs.append((row, start, previous))
                start = column
            previous = column
        runs.append((row, start, previous))
        row_runs[row] = range(first, len(runs))
    parent = list(range(len(runs)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for row, indices in row_runs.items():
        above = row_runs.get(row - 1)
        if above is None:
            continue
        k = above.start
        for index in indices:
            _, left, right = runs[index]
            while k < above.stop and runs[k][2] < left - 1:
                k += 1
            j = k
            while j < above.stop and runs[j][1] <= right + 1:
                parent[root(j)] = root(index)
                j += 1
    boxes: dict[int, Box] = {}
    for index, (row, left, right) in enumerate(runs):
        key = root(index)
        box = boxes.get(key)
        boxes[key] = Box(row, left, row, right) if box is None else box.union(Box(row, left, row, right))
    return list(boxes.values())


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return min(a1, b1) - max(a0, b0) + 1


def _belong_together(a: Box, b: Box) -> bool:
    rows = _overlap(a.top, a.bottom, b.top, b.bottom)
    cols = _overlap(a.left, a.right, b.left, b.right)
    if rows > 0 and cols > 0:
        return True  # overlapping boxes: one region, or cells would be written twice
    if rows >= -1 and cols > 0:  # one above the other, at most one empty row between (overlap -1)
        return 2 * cols >= min(a.right - a.left, b.right - b.left) + 1
    if cols >= -1 and rows > 0:  # side by side, at most one empty column between
        return 2 * rows >= min(a.bottom - a.top, b.bottom - b.top) + 1
    return False


def find_regions(grid: Grid) -> list[Box]:
    """The table regions of a sheet, top to bottom then left to right."""
    boxes = _components(grid)
    if len(boxes) <= _MAX_BOXES_TO_JOIN:
        for _ in range(_JOIN_PASSES):  # a joined box may reach another: again, until nothing joins (or the cap)
            joined = False
            for i in range(len(boxes)):
                for j in range(len(boxes) - 1, i, -1):
                    if _belong_together(boxes[i], boxes[j]):
                        boxes[i] = boxes[i].union(boxes.pop(j))
                        joined = True
            if not joined:
                break
    return sorted(boxes, key=lambda box: (box.top, box.left))


@dataclass
class _Line:
    text: str
    row: int


@dataclass
class _Table:
    """A region as lines: captions above, header rows, body rows, notes below."""

    captions: list[_Line] = field(default_factory=list)
    header: list[_Line] = field(default_factory=list)
    body: list[_Line] = field(default_factory=list)


def _single_text(cells: list[Cell | None], first_column: bool) -> str | None:
    """The text of a row that holds one text only (a title or a note), else None."""
    present = [(index, cell) for index, cell in enumerate(cells) if cell is not None]
    if len({cell.text for _, cell in present}) != 1:
        return None
    origins = [(index, cell) for index, cell in present if cell.origin]
    if len(origins) > 1 or any(cell.numeric for _, cell in present):
        return None
    if not origins:
        return ""  # the lower rows of a title merged over several rows: said once already
    index, cell = origins[0]
    return cell.text if index == 0 and first_column or len(present) > 1 else None


def _table(grid: Grid, box: Box) -> _Table:
    rows: list[tuple[int, list[Cell | None]]] = []
    for r in range(box.top, box.bottom + 1):
        cells = [grid.get((r, c)) for c in range(box.left, box.right + 1)]
        if any(cell is not None for cell in cells):
            rows.append((r, cells))
    table = _Table()
    wide = box.right > box.left or len(rows) == 1  # one text alone is a title too
    start, end = 0, len(rows)
    while wide and start < end and (text := _single_text(rows[start][1], rows[start][1][0] is not None)) is not None:
        if text:
            table.captions.append(_Line(text, rows[start][0]))
        start += 1
    notes: list[_Line] = []
    while (
        wide and end > start and (text := _single_text(rows[end - 1][1], rows[end - 1][1][0] is not None)) is not None
    ):
        if text:
            notes.insert(0, _Line(text, rows[end - 1][0]))
        end -= 1
    body = rows[start:end]
    # Columns empty in every table row (spacers between figures, columns only a wide title spans) are left out.
    used = [i for i in range(box.right - box.left + 1) if any(cells[i] is not None for _, cells in body)]
    lines = [_Line("| " + " | ".join(_shown(cells[i]) for i in used) + " |", r) for r, cells in body]
    first_number = next((i for i, (_, cells) in enumerate(body) if any(c and c.numeric for c in cells)), None)
    header_rows = first_number if first_number is not None and 1 <= first_number <= _HEADER_ROWS else 1
    if len(lines) > 1:
        table.header, table.body = lines[:header_rows], lines[header_rows:]
    else:
        table.body = lines
    table.body.extend(notes)
    return table


def _shown(cell: Cell | None) -> str:
    return cell.text if cell is not None else ""


def _groups(lines: list[_Line], first_budget: int, budget: int) -> list[list[_Line]]:
    """``lines`` cut into groups that fit their budgets (the first group has its own); [[]] for no lines."""
    groups: list[list[_Line]] = [[]]
    room = first_budget
    for line in lines:
        length = content_length(line.text) + 1  # and its line break
        if groups[-1] and length > room:
            groups.append([])
            room = budget
        groups[-1].append(line)
        room -= length
    return groups


def _length(lines: list[_Line]) -> int:
    return content_length("\n".join(line.text for line in lines))


def _rows_label(lines: list[_Line]) -> str:
    first, last = lines[0].row, lines[-1].row
    return f"header row {first}" if first == last else f"header rows {first}–{last}"


class SheetWriter:
    """Writes the regions of one or more sheets as text, one page per block."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.parts: list[str] = []
        self.pos = 0
        self.pages: list[Page] = []
        self.headings: list[Heading] = []

    def _block(self, lines: Iterable[str], label: str) -> None:
        if self.parts:
            self.parts.append("\n\n")
            self.pos += 2
            previous = self.pages[-1]
            self.pages[-1] = Page(previous.number, previous.label, previous.start, self.pos)
        text = "\n".join(lines)
        self.pages.append(Page(len(self.pages) + 1, label, self.pos, self.pos + len(text)))
        self.parts.append(text)
        self.pos += len(text)

    def sheet(self, grid: Grid, name: str | None, reference: str | None) -> None:
        """Write one sheet's regions; ``name`` is its heading line (None: no heading), ``reference`` the
        sheet as a range names it ("Segments", "'Sales 2023'"; None: ranges alone, as for a CSV file)."""
        heading = f"Sheet: {name}" if name is not None else None
        regions = find_regions(grid)
        titles: tuple[_Table, Box] | None = None  # a region of titles only, waiting to head the next region
        for index, box in enumerate(regions):
            table = _table(grid, box)
            if titles is not None:
                table.captions[:0] = titles[0].captions
                box, titles = titles[1].union(box), None
            if not table.header and not table.body and index + 1 < len(regions):
                titles = table, box
                continue
            self._region(table, box, reference, heading)
            heading = None

    def _region(self, table: _Table, box: Box, reference: str | None, heading: str | None) -> None:
        span = f"{reference}!" if reference else ""
        left, right = column_letters(box.left), column_letters(box.right)
        head = table.captions + table.header
        # What a later block repeats: captions and header while short, else the header, else nothing.
        repeated = head
        if _length(repeated) > self.block_size // 3:
            repeated = table.header if _length(table.header) <= self.block_size // 2 else []
        first = [line.text for line in head]
        if heading is not None:
            self.headings.append(Heading(level=1, title=heading, start=self.pos + (2 if self.parts else 0)))
            first.insert(0, heading)
        groups = _groups(
            table.body,
            self.block_size - content_length("\n".join(first)),
            self.block_size - content_length("\n".join(r.text for r in repeated)),
        )
        for index, group in enumerate(groups):
            if index == 0:
                rows = [line.row for line in head + group]
                if not rows:
                    continue
                self._block(first + [line.text for line in group], f"{span}{left}{min(rows)}:{right}{max(rows)}")
            else:
                label = f"{span}{left}{group[0].row}:{right}{group[-1].row}"
                # Notes alone (no table row) read without the header: it would only outweigh them in search.
                prefix = repeated if any(line.text.startswith("|") for line in group) else []
                if prefix:
                    label += f" ({_rows_label(prefix)})"
                self._block([r.text for r in prefix] + [line.text for line in group], label)

    def document(self, title: str | None = None) -> ParsedDocument:
        return ParsedDocument(
            text="".join(self.parts),
            pages=self.pages,
            headings=self.headings,
            title=title,
            break_at_pages=True,
        )
