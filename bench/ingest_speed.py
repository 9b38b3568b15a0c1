"""Ingestion speed on ../shared/data/ingestion-docs, beside raw pypdfium2 text extraction.

    .venv/bin/python -m bench.ingest_speed [--repeat 3]

Prints per-format pages/s and passages/s for the full pipeline (parse, chunk,
store in SQLite, index), and for the PDFs the ratio to extracting the same
pages' text with plain pypdfium2 (the issue's budget: under 2x).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pypdfium2 as pdfium

from bench.common.paths import data_dir
from calypso.config import Settings
from calypso.services import open_services
from calypso.services.ingestion import Upload


def raw_pdf_seconds(paths: list[Path]) -> tuple[float, int]:
    start = time.perf_counter()
    pages = 0
    for path in paths:
        pdf = pdfium.PdfDocument(path.read_bytes())
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            textpage.get_text_range()
            textpage.close()
            page.close()
            pages += 1
        pdf.close()
    return time.perf_counter() - start, pages


def pipeline_seconds(paths: list[Path]) -> tuple[float, int, int]:
    with tempfile.TemporaryDirectory() as home:
        services = open_services(Settings(home=Path(home)))
        kb = services.ingestion
        searcher = services.search
        searcher.index("general")  # index loaded, so each ingest also updates it
        start = time.perf_counter()
        pages = passages = 0
        for path in paths:
            doc = kb.ingest(Upload(path.read_bytes(), path.name)).document
            pages += doc.page_count
            passages += doc.chunk_count
        elapsed = time.perf_counter() - start
        services.close()
    return elapsed, pages, passages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is reported")
    args = parser.parse_args()
    docs = data_dir() / "ingestion-docs"
    groups = {fmt: sorted((docs / fmt).glob("*")) for fmt in ("pdf", "docx", "html", "md")}
    groups["html"] = [p for p in groups["html"] if p.suffix == ".html"]

    print(f"python {sys.version.split()[0]}, pypdfium2 {pdfium.PYPDFIUM_INFO}, best of {args.repeat}")
    print(f"{'format':8} {'files':>5} {'pages':>6} {'passages':>8} {'seconds':>8} {'pages/s':>9} {'passages/s':>10}")
    total_t = total_pages = total_passages = 0
    for fmt, paths in groups.items():
        best = min((pipeline_seconds(paths) for _ in range(args.repeat)), key=lambda r: r[0])
        seconds, pages, passages = best
        total_t += seconds
        total_pages += pages
        total_passages += passages
        print(
            f"{fmt:8} {len(paths):5d} {pages:6d} {passages:8d} {seconds:8.2f} {pages / seconds:9.1f} {passages / seconds:10.1f}"
        )
    print(
        f"{'all':8} {sum(map(len, groups.values())):5d} {total_pages:6d} {total_passages:8d} {total_t:8.2f} "
        f"{total_pages / total_t:9.1f} {total_passages / total_t:10.1f}"
    )

    raw_t, raw_pages = min((raw_pdf_seconds(groups["pdf"]) for _ in range(args.repeat)), key=lambda r: r[0])
    ours_t = min(pipeline_seconds(groups["pdf"])[0] for _ in range(args.repeat))
    print()
    print(
        f"PDF only: raw pypdfium2 text extraction {raw_t:.2f} s ({raw_pages / raw_t:.1f} pages/s); "
        f"Calypso full pipeline {ours_t:.2f} s ({raw_pages / ours_t:.1f} pages/s); ratio {ours_t / raw_t:.2f}x"
    )


if __name__ == "__main__":
    main()
