"""OCR of scanned Chinese and Japanese pages (issue 40): character recall per engine, and Chinese search on the scan.

Makes the scans (``make_scanned_cjk.py``: Noto Serif CJK, 150 dpi, the degradations of ``make_scanned.py``)
and parses each through ``detect_and_parse`` (PDF rendering at ``ocr_dpi``, orientation, the engine choice)
with CALYPSO_OCR_ENGINE ``auto`` (the default: PP-OCRv6, Tesseract for the scripts it reads badly),
``paddle`` and ``tesseract`` (chi_sim / jpn). Recall: the share of the ground truth's characters (``\\w``,
as a multiset: CJK has no spaces to cut words at; punctuation left out) found in the recognised text.
Targets: Chinese >= 0.90 (auto); Japanese measured.

Then the Chinese scan is searched by its own words: the CMRC 2018 questions whose gold paragraph stands on
the scan are asked of two namespaces of one knowledge base, the scan and its ground truth as one text
document a page; counted: the first result on the gold paragraph's page.

    .venv/bin/python -m bench.ocr_cjk [--pages 6] [--show]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import beir as be
from bench.common.scans_cjk import make
from calypso.config import Settings
from calypso.ingest import ocr_tesseract
from calypso.ingest.limits import ParseLimits
from calypso.ingest.parsers import detect_and_parse
from calypso.services import open_services
from calypso.services.ingestion import Upload

PACKS = {"zh": "chi_sim", "ja": "jpn"}
TARGETS = {"zh": 0.90}


def char_recall(truth: str, recognised: str) -> tuple[float, str]:
    want, got = Counter(re.findall(r"\w", truth)), Counter(re.findall(r"\w", recognised))
    missed = want - got
    return 1 - sum(missed.values()) / max(sum(want.values()), 1), "".join(sorted(missed.elements()))


def measure(language: str, pdf: Path, truth: str, show: bool) -> None:
    engines = ["auto", "paddle"] + (["tesseract"] if PACKS[language] in ocr_tesseract.installed_languages() else [])
    for engine in engines:
        # Limits far above the defaults: Tesseract takes 20-120 s a Chinese page on a shared machine.
        limits = ParseLimits(
            ocr_engine=engine, ocr_languages=PACKS[language], ocr_page_timeout_seconds=1200, ocr_timeout_seconds=7200
        )
        t = time.perf_counter()
        parsed, _ = detect_and_parse(pdf.read_bytes(), pdf.name, limits=limits)
        seconds = time.perf_counter() - t
        recall, missed = char_recall(truth, parsed.text)
        target = TARGETS.get(language) if engine == "auto" else None
        verdict = "" if target is None else f" (target {target:.2f} {'ok' if recall >= target else 'MISSED'})"
        pages = len(parsed.pages)
        print(
            f"{language} {engine:<9} recall {recall:.3f}{verdict}  {pages} pages in {seconds:.1f}s "
            f"({seconds / pages:.2f} s a page)  read by: {parsed.metadata.get('ocr_engine')}"
        )
        if show:
            print(f"    missed: {missed[:120]}")


def search_chinese(pdf: Path, pages: list[dict], show: bool) -> None:
    root = be.data_root() / "multilingual/cmrc2018-zh"
    on_page = {pid: number for number, page in enumerate(pages, 1) for pid in page["ids"]}
    queries = {json.loads(line)["_id"]: json.loads(line)["text"] for line in open(root / "queries.jsonl")}
    asked = []
    for line in open(root / "qrels/test.tsv"):
        qid, pid, *_ = line.rstrip("\n").split("\t")
        if pid in on_page and qid in queries:
            asked.append((queries[qid], on_page[pid]))
    with tempfile.TemporaryDirectory() as home:
        services = open_services(Settings(home=Path(home), ocr_timeout_seconds=7200, ocr_page_timeout_seconds=1200))
        try:
            scan = services.ingestion.ingest(Upload(pdf.read_bytes(), pdf.name, "scan")).document
            by_page = {}
            for number, page in enumerate(pages, 1):
                doc = services.ingestion.ingest(Upload(page["text"].encode(), f"page-{number}.txt", "text")).document
                by_page[doc.id] = number
            counts = {}
            for namespace in ("text", "scan"):
                first = 0
                for question, gold in asked:
                    found = services.search.search(question, services.search.scope(namespace, max_results=1))
                    if not found:
                        continue
                    hit = found[0]
                    got = hit.chunk.page_start if hit.document.id == scan.id else by_page.get(hit.document.id)
                    first += got == gold
                    if show:
                        print(f"  {namespace} {'+' if got == gold else '-'} {question} gold p.{gold} got p.{got}")
                counts[namespace] = first
        finally:
            services.close()
    n = len(asked)
    print(
        f"zh search ({n} CMRC questions whose paragraph is on the scan): first result on the gold page "
        f"text {counts['text']}/{n}, scan {counts['scan']}/{n}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=6, help="pages of the Chinese scan")
    parser.add_argument("--show", action="store_true", help="print the missed characters and each question")
    args = parser.parse_args()
    print(f"tesseract packs installed: {', '.join(ocr_tesseract.installed_languages()) or 'none'}")
    with tempfile.TemporaryDirectory() as folder:
        made = {}
        for language in ("zh", "ja"):
            pdf, truth_file = make(language, Path(folder), args.pages, 29)
            pages = json.loads(truth_file.read_text(encoding="utf-8"))
            made[language] = (pdf, pages)
            measure(language, pdf, "\n".join(page["text"] for page in pages), args.show)
        search_chinese(*made["zh"], args.show)


if __name__ == "__main__":
    main()
