"""OCR throughput on this machine's cores at 150 dpi, beside text-layer PDF parsing, in one run (issue 23).

Both go through the real parse children (``ParserPool``, CALYPSO_PARSE_PROCESSES=2, the default memory cap):

- OCR: the scanned Alps PDF (``make_scanned.py``, 25 image-only pages) as one document: its child shares
  its pages with the idle one (``ingest/ocr_share.py``); pages/s over the wall time, each child's peak RSS
  (VmHWM) with the engine loaded, and the per-page progress the pool reported. ``--split`` instead parses
  it as one document per child, at once (the issue-23 measurement). The engine's load is timed apart (a
  warm-up parse) as a server pays it once per child.
- Text layer: the text PDFs of ../shared/data/ingestion-docs parsed in the same pool (pages/s; the
  target is >= 900), to show that pages with a text layer are never rendered or recognised.

    .venv/bin/python -m bench.ocr_throughput [--dpi 150]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image

from bench.common import beir as be
from bench.common.scans import make_scanned
from calypso.config import Settings
from calypso.errors import EmptyDocument
from calypso.ingest.isolation import ParserPool
from calypso.ingest.limits import ParseLimits

TEXT_PDFS = ["irs-irm-2.3.59-400p.pdf", "GeoTopo-komprimiert.pdf", "federal-register-2020-17221.pdf"]


def split(data: bytes, parts: int) -> list[bytes]:
    source = pdfium.PdfDocument(data)
    count = len(source)
    out = []
    for part in range(parts):
        pages = list(range(part * count // parts, (part + 1) * count // parts))
        piece = pdfium.PdfDocument.new()
        piece.import_pages(source, pages)
        buffer = io.BytesIO()
        piece.save(buffer)
        piece.close()
        out.append(buffer.getvalue())
    source.close()
    return out


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (/proc/<pid>/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dpi", type=int, default=150)
    parser.add_argument("--split", action="store_true", help="one document per child instead of one in all")
    args = parser.parse_args()
    settings = Settings()
    limits = replace(ParseLimits.from_settings(settings), ocr_dpi=args.dpi)
    memory = settings.parse_memory_bytes
    processes = 2
    root = be.data_root()
    scan = make_scanned(root / "alps-wiki-qa/alps_wiki.pdf", dpi=150)  # the scan itself: 150 dpi
    pieces = split(scan, processes) if args.split else [scan]
    print(
        f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}; parse children: {processes}, "
        f"memory cap {memory / 2**30:.1f} GiB; OCR at {args.dpi} dpi"
    )
    pool = ParserPool(processes)
    try:
        # Warm-up: start both children and load the engine in each (a blank image: nothing to recognise).
        blank = io.BytesIO()
        Image.new("L", (64, 64), 255).save(blank, "PNG")

        def warm_up() -> None:
            with contextlib.suppress(EmptyDocument):
                pool.parse(blank.getvalue(), "blank.png", None, limits, timeout=600, memory_bytes=memory)

        t = time.perf_counter()
        warm = [threading.Thread(target=warm_up) for _ in range(processes)]
        for thread in warm:
            thread.start()
        for thread in warm:
            thread.join()
        print(f"warm-up (children started, engine loaded): {time.perf_counter() - t:.1f}s")

        results: list[object] = [None] * len(pieces)
        progress: list[tuple[float, int, int]] = []

        def run(index: int) -> None:
            results[index] = pool.parse(
                pieces[index],
                f"scan-{index}.pdf",
                None,
                limits,
                timeout=3600,
                memory_bytes=memory,
                on_pages=lambda read, total: progress.append((time.perf_counter(), read, total)),
            )

        children = [child.process.pid for child in list(pool._idle.queue)]
        cpu_before = sum(cpu_seconds(pid) for pid in children)
        t = time.perf_counter()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(pieces))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ocr_seconds = time.perf_counter() - t
        cpu = sum(cpu_seconds(pid) for pid in children) - cpu_before
        rss = [peak_rss_mb(pid) for pid in children]
        ocr_pages = sum(len(r[0].pages) for r in results if r is not None)  # type: ignore[index]
        print(
            f"OCR: {ocr_pages} pages in {ocr_seconds:.1f}s = {ocr_pages / ocr_seconds:.2f} pages/s "
            f"({ocr_seconds / max(ocr_pages, 1):.1f} s a page); peak RSS per child: "
            + ", ".join(f"{mb:.0f} MB" for mb in rss)
            + f"; the children's CPU: {cpu / max(ocr_pages, 1):.2f} s a page, {cpu / ocr_seconds:.2f} cores busy"
        )
        if progress:
            first = progress[0][0] - t
            print(
                f"progress: {len(progress)} reports, the first at {first:.1f}s, the last {progress[-1][1:]} (read, total)"
            )

        text_pages = 0
        t = time.perf_counter()
        for name in TEXT_PDFS:
            data = (root / "ingestion-docs/pdf" / name).read_bytes()
            parsed, _ = pool.parse(data, name, None, limits, timeout=600, memory_bytes=memory)
            assert all(page.modality == "text" for page in parsed.pages), name
            text_pages += len(parsed.pages)
        text_seconds = time.perf_counter() - t
        print(
            f"text layer: {text_pages} pages of {len(TEXT_PDFS)} PDFs in {text_seconds:.2f}s = "
            f"{text_pages / text_seconds:.0f} pages/s (none rendered or recognised)"
        )
    finally:
        pool.close()


if __name__ == "__main__":
    main()
