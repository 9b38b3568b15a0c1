"""CSV and TSV via the standard library's csv module: the file is one sheet, written as ``sheets`` writes tables.

The text is decoded as plain text is (``text.decode_text``: BOM, UTF-8, legacy encodings). The
delimiter is sniffed from the first lines among ``, ; TAB |`` (a .tsv file, or one sent as
``text/tab-separated-values``, is tab-separated whatever the sniffer thinks). Values are kept as the
file writes them. Page labels are cell ranges without a sheet name ("A1:L6", "A40:L80 (header row 1)"):
the range a spreadsheet shows when it opens the file, the document's name standing beside it in a citation.
"""

from __future__ import annotations

import csv
import io
import os
import re

from calypso.errors import UnprocessableDocument
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits, too_large
from calypso.ingest.parsers.sheets import Cell, Grid, SheetWriter, cell_text, gc_paused
from calypso.ingest.parsers.text import decode_text
from calypso.models import ParsedDocument

_DELIMITERS = ",;\t|"
_SAMPLE = 64 * 1024
# A number as CSV files write them: "1,234.5", "-3", "(81)", "12%", "1.5e3", "$5"; what tells rows from a header.
_NUMBER = re.compile(r"[-+(]?[$€£¥]?\d[\d,.' ]*(?:[eE][-+]?\d+)?%?\)?")


def _dialect(text: str, tab: bool) -> type[csv.Dialect] | csv.Dialect:
    if tab:
        return csv.excel_tab
    sample = text[:_SAMPLE]
    if "\n" in sample[:-1]:
        sample = sample[: sample.rfind("\n")]  # a cut line would mislead the sniffer
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:
        return csv.excel  # one column, or too irregular to tell: commas


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS, tab: bool | None = None) -> ParsedDocument:
    text = decode_text(data, filename)
    if tab is None:
        tab = os.path.splitext(filename or "")[1].lower() in (".tsv", ".tab")
    csv.field_size_limit(max(limits.max_document_chars, 1))
    with gc_paused():
        grid = _grid(text, filename, limits, tab)
        writer = SheetWriter(limits.chunk_size)
        writer.sheet(grid, None, None)
    return writer.document()


def _grid(text: str, filename: str, limits: ParseLimits, tab: bool) -> Grid:
    grid: Grid = {}
    cells = 0
    try:
        for row, record in enumerate(csv.reader(io.StringIO(text), _dialect(text, tab)), start=1):
            cells += len(record)
            if cells > limits.max_sheet_cells:
                raise too_large(
                    f"{filename!r} holds more than {limits.max_sheet_cells:,} cells",
                    limits,
                    "max_sheet_cells",
                    "too_many_cells",
                )
            for column, value in enumerate(record, start=1):
                shown = cell_text(value)
                if shown:
                    grid[(row, column)] = Cell(shown, _NUMBER.fullmatch(shown) is not None)
    except csv.Error as exc:
        raise UnprocessableDocument(
            f"{filename!r} is not readable as CSV ({exc}). Check its quoting, or upload it as .txt to index it as "
            "plain text.",
            param="file",
        ) from exc
    return grid


def parse_tsv(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """A file declared tab-separated (``text/tab-separated-values``)."""
    return parse(data, filename, limits, tab=True)
