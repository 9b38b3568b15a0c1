"""XLSX, CSV and TSV: tables found per region, rows kept whole, headers repeated, cells shown as the sheet shows them."""

from __future__ import annotations

import re
import time
from pathlib import Path

import office_files
import pytest

from calypso.errors import PayloadTooLarge, UnprocessableDocument
from calypso.ingest.chunking import chunk_document
from calypso.ingest.limits import ParseLimits
from calypso.ingest.parsers import detect_and_parse
from calypso.ingest.parsers.number_format import format_number
from calypso.ingest.parsers.sheets import Box, Cell, find_regions
from calypso.locators import locator_style, page_locator

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
NESTLE = "ingestion-docs-more/xlsx/2023-half-year-analyses-by-segment.xlsx"
SEGMENTS = "'OS-Rev.and results 30 06 2023'"


def _parse(data_dir: Path, name: str, **limits: int):
    path = data_dir / name
    return detect_and_parse(path.read_bytes(), path.name, limits=ParseLimits(**limits))


def _page_text(parsed, page) -> str:
    return parsed.text[page.start : page.end]


def _table_cells(markdown: str) -> list[str]:
    """The cells of the Markdown tables in a ground-truth file (separator rows left out)."""
    cells = []
    for line in markdown.splitlines():
        if line.startswith("|") and not re.fullmatch(r"[|\s:-]+", line):
            cells.extend(cell.strip() for cell in line.strip().strip("|").split("|"))
    return [cell for cell in cells if cell]


# --- real files ---------------------------------------------------------------------------------


def test_nestle_segments_are_located_by_sheet_and_range(data_dir: Path) -> None:
    parsed, media_type = _parse(data_dir, NESTLE)
    assert media_type == XLSX and parsed.break_at_pages
    assert locator_style(media_type, len(parsed.pages)) == "label"
    first = parsed.pages[0]
    assert first.label == f"{SEGMENTS}!A1:J16"
    text = _page_text(parsed, first)
    # The captions above the table, its two header rows (merged, multi-line headers on one line), a row.
    assert "3.1 Operating segments\nRevenue and results\n| In millions of CHF |" in text
    assert "| Sales (a) | Underlying Trading operating profit (b) | Trading operating profit |" in text
    assert "| Zone NA | 12,553 | 2,713 | 2,632 | (81) | (29) | (44) | (337) |" in text
    assert page_locator("label", [first.label]) == first.label
    assert parsed.headings[0].title == "Sheet: OS-Rev.and results 30 06 2023"


def test_each_block_repeats_its_header_and_names_it(data_dir: Path) -> None:
    parsed, _ = _parse(data_dir, NESTLE)
    second = parsed.pages[1]
    assert second.label == f"{SEGMENTS}!A17:J18 (header rows 6–7)"
    text = _page_text(parsed, second)
    assert text.startswith("| In millions of CHF |")
    assert "| Sales (a) |" in text  # the header, again
    assert "| Total | 46,293 | 7,904 | 7,351 | (553) | (110) | (262) | (1,722) |" in text  # a SUM: its cached value
    for page in parsed.pages:  # every block with a "Zone" row carries the header above it
        body = _page_text(parsed, page)
        if "| Zone " in body:
            assert "In millions of CHF" in body


def test_a_block_is_one_passage_and_rows_stay_whole(data_dir: Path) -> None:
    parsed, _ = _parse(data_dir, NESTLE)
    chunks = chunk_document(parsed, 1000, 150)
    assert [c.page_labels for c in chunks] == [(p.label,) for p in parsed.pages]
    for chunk in chunks:
        assert chunk.text == parsed.text[chunk.start : chunk.end]
    # A smaller passage size than the blocks were cut for splits a block, never a row (all rows fit in 400).
    rows = {line for line in parsed.text.splitlines() if line.startswith("|")}
    assert max(len(row) for row in rows) < 400
    for chunk in chunk_document(parsed, 400, 60):
        for line in chunk.text.splitlines():
            if line.startswith("|"):
                assert line in rows, line
        assert len(chunk.page_labels) == 1


def test_titles_far_above_a_table_head_it_and_notes_alone_carry_no_header(data_dir: Path) -> None:
    parsed, _ = _parse(data_dir, NESTLE)
    other = next(p for p in parsed.pages if p.label.startswith("'OS-Other information"))
    assert other.label == "'OS-Other information 30 06 2023'!A1:F23"  # the title two empty rows above, joined
    assert _page_text(parsed, other).startswith(
        "Sheet: OS-Other information 30 06 2023\n3. Analyses by segment\nOther information\n| In millions of CHF |"
    )
    notes = next(p for p in parsed.pages if p.label == f"{SEGMENTS}!A35:J39")
    assert _page_text(parsed, notes).startswith("(a) Inter-segment sales are not significant.")


def test_xlsx_01_finds_every_table_of_every_sheet(data_dir: Path) -> None:
    parsed, _ = _parse(data_dir, "ingestion-docs-more/xlsx/xlsx_01.xlsx")
    assert [p.label for p in parsed.pages] == [
        "Sheet1!A1:C7",
        "Sheet2!A1:D9",
        "Sheet2!G5:I9",  # beside the first table, two empty columns apart
        "Sheet2!C14:E18",
        "Sheet3!A1:C7",
        "Sheet3!E7:G13",  # one empty column apart, but facing the first table over one row only
        "Sheet4!A1:A2",
    ]
    sheet3 = _page_text(parsed, parsed.pages[4])
    # Merged cells take their value over their span, as docling's ground truth reads them.
    assert "| first | header | header |\n| first | second | third |" in sheet3
    assert "| 8 | 9 | 9 |\n| 10 | 9 | 9 |" in sheet3
    truth = (data_dir / "ingestion-docs-more/groundtruth/xlsx_01.xlsx.md").read_text()
    cells = set(re.findall(r"\| ([^|\n]*?) (?=\|)", parsed.text))
    expected = _table_cells(truth.split("'col-3'")[0]) + _table_cells(truth.split("## Sheet3")[1])
    assert expected and all(cell in cells for cell in expected)


def test_csv_with_quoted_commas(data_dir: Path) -> None:
    parsed, media_type = _parse(data_dir, "ingestion-docs-more/csv/csv-comma.csv")
    assert media_type == "text/csv" and locator_style(media_type, len(parsed.pages)) == "label"
    assert [p.label for p in parsed.pages] == ["A1:L5", "A6:L6 (header row 1)"]
    assert "| 2 | 1Ef7b82A4CAAD10 | Preston | Lozano, Dr | Vega-Gentry |" in parsed.text
    last = _page_text(parsed, parsed.pages[1])
    assert last.startswith("| Index | Customer Id | First Name |") and "| 5 | 053d585Ab6b3159 | Joanna |" in last
    truth = (data_dir / "ingestion-docs-more/groundtruth/csv-comma.csv.md").read_text()
    assert all(cell in parsed.text for cell in _table_cells(truth))


# --- cells as shown ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "number_format", "shown"),
    [
        (0.1 + 0.2, "General", "0.3"),
        (1234.5000000001, "General", "1234.5"),
        (1234567.891, "#,##0.00", "1,234,567.89"),
        (-81, "#,##0\\ ;\\(#,##0\\)", "(81)"),
        (0, '_(* #,##0_);_(* \\(#,##0\\);_(* "—"_);_(@_)', "—"),
        (0.256, "0.0%", "25.6%"),
        (5, '"CHF "0', "CHF 5"),
        (1.5e-7, "General", "1.5E-07"),
        (42, "@", "42"),
    ],
)
def test_numbers_read_as_their_cell_shows_them(value: float, number_format: str, shown: str) -> None:
    assert format_number(value, number_format) == shown


def test_dates_formulas_and_booleans() -> None:
    import datetime as dt

    data = office_files.workbook(
        {
            "Data": [
                ["Day", "Open", "Ratio"],
                [dt.datetime(2023, 6, 30), True, 0.1 + 0.2],
                [dt.date(2024, 1, 2), False, 2],
            ]
        }
    )
    parsed, _ = detect_and_parse(data, "days.xlsx")
    assert "| 2023-06-30 | TRUE | 0.3 |" in parsed.text and "| 2024-01-02 | FALSE | 2 |" in parsed.text


def test_a_region_split_into_blocks_labels_each_with_its_rows() -> None:
    rows = [["Region", "Quarter", "Revenue"]] + [[f"Region {i}", f"Q{i % 4 + 1}", i * 1000 + 0.5] for i in range(200)]
    parsed, _ = detect_and_parse(office_files.workbook({"Sales 2023": rows}), "sales.xlsx")
    labels = [p.label for p in parsed.pages]
    assert labels[0].startswith("'Sales 2023'!A1:C") and len(labels) > 5
    assert all(re.fullmatch(r"'Sales 2023'!A\d+:C\d+ \(header row 1\)", label) for label in labels[1:])
    for page in parsed.pages:
        assert _page_text(parsed, page).count("| Region | Quarter | Revenue |") == 1
        assert len(_page_text(parsed, page)) <= 1000
    last = re.search(r"A(\d+):C(\d+)", labels[-1])
    assert last and last.group(2) == "201"
    assert "| Region 199 | Q4 | 199,000.5 |" not in parsed.text and "| Region 199 | Q4 | 199000.5 |" in parsed.text


def test_spacer_columns_and_rows_keep_one_table() -> None:
    grid = {(r, c): Cell("x", numeric=r > 2) for r in (1, 3, 4, 5) for c in (1, 2, 4)}  # empty row 2, column 3
    grid[(10, 1)] = Cell("far below")
    grid[(1, 8)] = Cell("far right")
    assert find_regions(grid) == [Box(1, 1, 5, 4), Box(1, 8, 1, 8), Box(10, 1, 10, 1)]


@pytest.mark.parametrize("count", [900, 5000])
def test_scattered_cells_cost_bounded_time(count: int) -> None:
    grid = {(3 * (i // 60) + 1, 3 * (i % 60) + 1): Cell(str(i), numeric=True) for i in range(count)}
    started = time.monotonic()
    assert len(find_regions(grid)) == count  # two empty rows and columns apart: each cell its own region
    assert time.monotonic() - started < 5


def test_tsv_and_semicolons() -> None:
    tsv, media_type = detect_and_parse(b"name\tvalue\nalpha\t1,5\nbeta\t2\n", "table.tsv")
    assert media_type == "text/tab-separated-values" and "| alpha | 1,5 |" in tsv.text
    semicolons, _ = detect_and_parse(b"name;value\nalpha;1,5\nbeta;2\n", "table.csv")
    assert "| alpha | 1,5 |" in semicolons.text and semicolons.pages[0].label == "A1:B3"
    declared, media_type = detect_and_parse(b"a\tb\n1\t2\n", "upload", "text/tab-separated-values")
    assert media_type == "text/tab-separated-values" and "| 1 | 2 |" in declared.text


# --- bad input ------------------------------------------------------------------------------------


def test_password_protected_and_legacy_files_say_so() -> None:
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(office_files.encrypted_office_file(), "budget.xlsx")
    assert info.value.code == "password_protected" and "remove the password" in info.value.message
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(office_files.legacy_ole_file(), "old.xlsx")
    assert "Excel 97–2003 (.xls)" in info.value.message


def test_zip_bomb_named_xlsx_is_refused_before_it_expands() -> None:
    started = time.monotonic()
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(office_files.xlsx_zip_bomb(300), "bomb.xlsx")
    assert info.value.code == "uncompressed_too_large" and time.monotonic() - started < 5
    with pytest.raises(UnprocessableDocument) as ratio:
        detect_and_parse(office_files.xlsx_zip_bomb(100), "bomb.xlsx")
    assert ratio.value.code == "compression_ratio"


def test_truncated_and_corrupt_workbooks(data_dir: Path) -> None:
    data = (data_dir / NESTLE).read_bytes()
    for broken in (data[: len(data) // 2], data[:100], b"PK\x03\x04" + b"\x00" * 200):
        with pytest.raises(UnprocessableDocument) as info:
            detect_and_parse(broken, "cut.xlsx")
        assert "not a readable XLSX file" in info.value.message


def test_a_lying_dimension_costs_nothing() -> None:
    started = time.monotonic()
    parsed, _ = detect_and_parse(office_files.xlsx_lying_dimension(), "lie.xlsx")
    assert time.monotonic() - started < 2
    assert parsed.pages[0].label == "Sheet1!A1:B2" and "| North | 1234.5 |" in parsed.text


def test_millions_of_empty_formatted_cells_are_stopped_while_reading() -> None:
    data = office_files.xlsx_formatted_empty_cells(rows=300, columns=100)  # 30,000 cells
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(data, "formatted.xlsx", limits=ParseLimits(max_sheet_cells=20_000))
    assert info.value.code == "too_many_cells" and "CALYPSO_MAX_SHEET_CELLS" in info.value.message
    parsed, _ = detect_and_parse(data, "formatted.xlsx", limits=ParseLimits(max_sheet_cells=40_000))
    assert parsed.text == "Sheet: Sheet1\n| Total 42 |" or "Total 42" in parsed.text
    with pytest.raises(PayloadTooLarge):
        detect_and_parse(b"a,b\n" * 20_000, "big.csv", limits=ParseLimits(max_sheet_cells=30_000))


def test_a_workbook_attached_to_an_email_keeps_one_passage_per_block() -> None:
    from email.message import EmailMessage

    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "Fees"
    message.set_content("The fees are attached.")
    data = office_files.workbook({"Fees": [["Service", "Fee"], ["Audit", 1200]], "Rates": [["Hour", "Rate"], [1, 90]]})
    message.add_attachment(data, maintype="application", subtype="octet-stream", filename="fees.xlsx")
    parsed, _ = detect_and_parse(message.as_bytes(), "fees.eml")
    labels = [p.label for p in parsed.pages]
    assert labels == ["message", "attachment fees.xlsx, Fees!A1:B2", "attachment fees.xlsx, Rates!A1:B2"]
    assert [c.page_labels for c in chunk_document(parsed, 1000, 150)] == [(label,) for label in labels]
