"""Slides, workbooks and CSV: parse time, passages, and how much of the ground truth the text holds.

    .venv/bin/python -m bench.office_formats [--repeat 5] [--rows 200000]

For every PPTX, XLSX and CSV file of ../shared/data/ingestion-docs-more (and the two ground-truth CSVs
there): the median parse time (CPU), pages (slides, table blocks) and passages at the default chunk size,
and three checks of the text:

- ground truth found: the share of the ground truth's table cells (and, for slides, its text lines)
  that stand in the text, a cell between " | " marks. The ground truths are docling's regression
  outputs (see SOURCE.md); for pptx_chart.pptx the data of chart 2 (Q1–Q3 = 10/20/30), which docling
  leaves out, is added. The Nestlé workbook has none: its truth is every non-empty cell openpyxl reads
  (cached values), found as the number it shows (12,553 or (81) or — for 0) or its text;
- rows whole: the share of passages whose every table line is a whole row of the document;
- headed: the share of passages holding table rows that also hold their table's first header row.

Then a generated workbook of ``--rows`` rows x 5 columns (streamed, in a child process: its peak RSS is
the parse's own) to show that time and memory grow with the cells, not the file.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from bench.common.paths import REPO, data_dir
from bench.common.proc import peak_rss_mb
from calypso.errors import CalypsoError
from calypso.ingest.chunking import chunk_document
from calypso.ingest.parsers import detect_and_parse
from calypso.models import ParsedDocument

_SEPARATOR = re.compile(r"[|\s:-]+")


def _markdown_cells(markdown: str) -> list[str]:
    cells = []
    for line in markdown.splitlines():
        if line.strip().startswith("|") and not _SEPARATOR.fullmatch(line):
            cells.extend(cell.strip() for cell in line.strip().strip("|").split("|"))
    return [cell for cell in cells if cell]


def _text_cells(text: str) -> set[str]:
    cells: set[str] = set()
    for line in text.splitlines():
        if line.startswith("|"):
            cells.update(cell.strip() for cell in line.strip().strip("|").split(" | "))
    return cells


def _truth(path: Path, more: Path) -> tuple[list[str], list[str]]:
    """(table cells, other text lines) the ground truth of ``path`` holds."""
    truths = more / "groundtruth"
    name = path.name
    if name.endswith(".csv") and path.parent == truths:
        import csv

        with path.open(newline="") as handle:
            return [cell.strip() for row in csv.reader(handle) for cell in row if cell.strip()], []
    if name == "2023-half-year-analyses-by-segment.xlsx":
        return _workbook_cells(path), []
    markdown_path = truths / f"{name}.md"
    if not markdown_path.exists():
        return [], []
    markdown = markdown_path.read_text()
    cells = _markdown_cells(markdown)
    lines = []
    if name.endswith(".pptx"):
        lines = [
            line.strip().lstrip("#").strip()
            for line in markdown.splitlines()
            if line.strip()
            and not line.strip().startswith(("|", "<!--"))
            and line.strip() not in ("Bar chart", "Other chart")
        ]
    if name == "pptx_chart.pptx":
        cells += ["Q1", "10", "Q2", "20", "Q3", "30"]  # chart 2, which docling's output leaves out
    return cells, lines


def _workbook_cells(path: Path) -> list[str]:
    """Every non-empty cell of a workbook as openpyxl reads it (cached values), as "forms|forms|..."."""
    import openpyxl

    book = openpyxl.load_workbook(path, data_only=True)
    cells = []
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                value = cell.value
                if value is None or not str(value).strip():
                    continue
                if isinstance(value, int | float):
                    number = round(value)
                    forms = {f"{number:,}", f"({abs(number):,})", str(number)} | ({"—"} if number == 0 else set())
                else:
                    forms = {" ".join(str(value).split())}
                cells.append("|".join(sorted(forms)))
    return cells


def _found(parsed: ParsedDocument, cells: list[str], lines: list[str]) -> tuple[int, int]:
    shown = _text_cells(parsed.text)
    text_lines = {line.strip() for line in parsed.text.splitlines()}
    hits = sum(1 for cell in cells if any(form in shown or form in text_lines for form in cell.split("|")))
    hits += sum(1 for line in lines if line in text_lines or line in parsed.text)
    return hits, len(cells) + len(lines)


def _passage_checks(parsed: ParsedDocument, chunks: list) -> tuple[float, float]:
    rows = {line for line in parsed.text.splitlines() if line.startswith("|")}
    tabled = [c for c in chunks if any(line.startswith("|") for line in c.text.splitlines())]
    whole = sum(1 for c in tabled if all(line in rows for line in c.text.splitlines() if line.startswith("|")))
    headed = 0
    for chunk in tabled:
        page = next(p for p in parsed.pages if p.start <= chunk.start < max(p.end, p.start + 1))
        first_row = next((line for line in parsed.text[page.start : page.end].splitlines() if line.startswith("|")), "")
        headed += first_row in chunk.text
    return whole / max(len(tabled), 1), headed / max(len(tabled), 1)


def measure(paths: list[Path], more: Path, repeat: int) -> list[dict[str, object]]:
    results = []
    for path in paths:
        data = path.read_bytes()
        times = []
        for _ in range(repeat):
            started = time.process_time()  # CPU time: the machine's other work does not count
            parsed, media_type = detect_and_parse(data, path.name)
            times.append(time.process_time() - started)
        chunks = chunk_document(parsed, 1000, 150)
        cells, lines = _truth(path, more)
        hits, total = _found(parsed, cells, lines)
        whole, headed = _passage_checks(parsed, chunks)
        results.append(
            {
                "file": path.name,
                "parse_cpu_ms": round(statistics.median(times) * 1000, 1),
                "pages": len(parsed.pages),
                "passages": len(chunks),
                "truth_found": f"{hits}/{total}" if total else "-",
                "rows_whole": round(whole, 3),
                "headed": round(headed, 3),
            }
        )
    return results


def _generated(rows: int) -> bytes:
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Orders")
    sheet.append(["Order", "Customer", "Region", "Amount", "Shipped"])
    for i in range(rows):
        sheet.append([i + 1, f"Customer {i % 977}", ("North", "South", "East", "West")[i % 4], i * 1.25, i % 3 == 0])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _formatted_cells(rows: int, columns: int = 100) -> bytes:
    """A workbook whose sheet claims A1:XFD1048576 and stores ``rows`` x ``columns`` empty formatted cells."""
    from openpyxl.utils import get_column_letter

    letters = [get_column_letter(c).encode() for c in range(1, columns + 1)]
    body = b"".join(
        b'<row r="%d">' % r + b"".join(b'<c r="%s%d" s="1"/>' % (letter, r) for letter in letters) + b"</row>"
        for r in range(2, rows + 2)
    )
    sheet = (
        b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><dimension ref="A1:XFD1048576"/>'
        b'<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>Total 42</t></is></c></row>'
        + body
        + b"</sheetData></worksheet>"
    )
    source = zipfile.ZipFile(io.BytesIO(_generated(1)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            target.writestr(name, sheet if name == "xl/worksheets/sheet1.xml" else source.read(name))
    return out.getvalue()


def _child(path: str) -> None:
    """Parse one file and print its figures as JSON (run in a fresh process: its VmHWM is this parse's; ru_maxrss
    would not be, Linux keeps it across exec from the parent's)."""
    data = Path(path).read_bytes()
    started, cpu = time.perf_counter(), time.process_time()
    try:
        parsed, _ = detect_and_parse(data, Path(path).name)
    except CalypsoError as exc:
        rss = peak_rss_mb(os.getpid())
        seconds, cpu = round(time.perf_counter() - started, 2), round(time.process_time() - cpu, 2)
        print(
            json.dumps({"seconds": seconds, "cpu": cpu, "error": f"{exc.status} {exc.code}", "peak_rss_mb": round(rss)})
        )
        return
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    chunks = chunk_document(parsed, 1000, 150)
    rss = peak_rss_mb(os.getpid())
    print(
        json.dumps(
            {
                "seconds": round(seconds, 2),
                "cpu": round(cpu, 2),
                "pages": len(parsed.pages),
                "passages": len(chunks),
                "peak_rss_mb": round(rss),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=150_000, help="rows of the generated workbook (x 5 columns)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    more = data_dir() / "ingestion-docs-more"
    paths = sorted(p for folder in ("pptx", "xlsx", "csv") for p in (more / folder).iterdir())
    paths += sorted((more / "groundtruth").glob("*.csv"))
    results = measure(paths, more, args.repeat)
    header = ["file", "parse_cpu_ms", "pages", "passages", "truth_found", "rows_whole", "headed"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in results:
        print("| " + " | ".join(str(row[key]) for key in header) + " |")

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / f"orders-{args.rows}.xlsx"
        started = time.perf_counter()
        generated.write_bytes(_generated(args.rows))
        made = time.perf_counter() - started
        figures = _in_child(generated)
        size = generated.stat().st_size
        print(
            f"\ngenerated workbook: {args.rows:,} rows x 5 columns ({args.rows * 5:,} cells, {size / 1e6:.1f} MB, made in "
            f"{made:.1f} s): parsed in {figures['seconds']} s wall, {figures['cpu']} s CPU "
            f"({args.rows * 5 / float(figures['cpu']):,.0f} cells per CPU second), "
            f"{figures['pages']:,} blocks, {figures['passages']:,} passages, peak RSS {figures['peak_rss_mb']} MB"
        )
        flood = Path(tmp) / "formatted.xlsx"
        flood.write_bytes(_formatted_cells(30_000))
        figures = _in_child(flood)
        print(
            f"3,000,000 empty formatted cells under a dimension of A1:XFD1048576 ({flood.stat().st_size / 1e6:.1f} MB): "
            f"{figures.get('error', 'parsed')} after {figures['seconds']} s wall, {figures['cpu']} s CPU, "
            f"peak RSS {figures['peak_rss_mb']} MB"
        )


def _in_child(path: Path) -> dict[str, object]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(path)]
    output = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO).stdout
    figures: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    return figures


if __name__ == "__main__":
    main()
