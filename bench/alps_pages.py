"""Alps: does the first source of a search land on the gold PDF page? (issue 12)

Ingests ``alps_wiki.pdf`` through ``DocumentService`` with the default settings (chunking, analyzer,
BM25 parameters), asks the 39 SQuAD questions with ``DocumentService.search`` and counts how often the
first passage's page range holds the question's gold page (``gold_pdf_pages``; also: its first page is
the gold page), and how often one of the top five does. ``--raw`` searches the questions as written (no query analysis), for comparison.

    PYTHONPATH=src .venv/bin/python bench/alps_pages.py [--raw]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import beir_eval as be  # bench/ is sys.path[0] when run as a script

try:
    import calypso  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from calypso.config import Settings
from calypso.services import open_services


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw", action="store_true", help="search the questions as written (no query analysis)")
    parser.add_argument("--show", action="store_true", help="print each question's outcome")
    args = parser.parse_args()
    root = be.data_root() / "alps-wiki-qa"
    rows = [json.loads(line) for line in open(root / "alps_qa_with_pdf_pages.jsonl", encoding="utf-8")]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as home:
        services = open_services(Settings(home=Path(home)))
        try:
            docs = services.documents
            docs.ingest((root / "alps_wiki.pdf").read_bytes(), "alps_wiki.pdf")
            patch = mock.patch("calypso.services.documents.keyword_query", lambda q, *a: q) if args.raw else None
            if patch:
                patch.start()
            first = first_start = top5 = 0
            for r in rows:
                gold = set(r["gold_pdf_pages"])
                passages = docs.search(r["question"], max_results=5)
                hits = [bool(gold & set(range(p.chunk.page_start, p.chunk.page_end + 1))) for p in passages]
                first += bool(hits[:1] and hits[0])
                first_start += bool(passages and passages[0].chunk.page_start in gold)
                top5 += any(hits)
                if args.show:
                    page = f"{passages[0].chunk.page_start}" if passages else "-"
                    print(
                        f"{'+' if hits[:1] and hits[0] else '-'} {r['qid']} gold {sorted(gold)} got {page}: {r['question']}"
                    )
            if patch:
                patch.stop()
        finally:
            services.close()
    n = len(rows)
    mode = "questions as written" if args.raw else "query analysis"
    print(
        f"Alps PDF, {mode}: first source on the gold page {first}/{n} (its first page the gold page "
        f"{first_start}/{n}), gold page in the top 5 {top5}/{n}"
    )
    print(f"({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
