"""Listing a vector store's files at scale: one page, as the API reads it, from a store of N files.

Fills one namespace with N one-passage documents (``add_document``, no parsing), every tenth one
attached under a second file id too, then times ``VectorStoreService.list_files`` pages (first page,
``after`` a cursor in the middle, ``before``, with ``filter=completed``) and ``get_file`` on each
backend. Paging is in SQL, so a page costs about the same whatever N is.

``--batches B`` instead times file batches as a store grows (issue 26): B batches of ``--batch-size``
files each, every file uploaded first (``DocumentService.submit``, not timed; no ingestion workers, so the
copies stay ``in_progress``), then one ``create_batch`` timed per batch, and ``get_file`` at the end.
A batch looks each file up three times (check, attach, count): a lookup that walks the namespace makes
batch k cost k times the first.

    .venv/bin/python -m bench.vector_store_files [--files 10000] [--backend sqlite|postgres|both]
    .venv/bin/python -m bench.vector_store_files --batches 5 --batch-size 2000 [--backend ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common.postgres import bench_postgres
from bench.common.stats import percentile
from bench.common.synthetic import synthetic_document
from calypso.config import Settings
from calypso.models import VectorStoreFile
from calypso.services import open_services
from calypso.services.ingestion import Upload
from testkit.stores import add_document

STORE = "vs_bench"


def run(settings: Settings, files: int, label: str) -> None:
    services = open_services(settings)
    try:
        storage, stores = services.storage, services.vector_stores
        started = time.perf_counter()
        ids = []
        for n in range(files):
            doc, pages, chunks, content = synthetic_document(n, [f"Passage of document {n}."], namespace=STORE)
            add_document(storage, doc, pages, chunks, content)
            ids.append(doc.file_id)
            if n % 10 == 0:
                link = VectorStoreFile("default", STORE, f"file-extra-{n}", doc.id, {"n": n})
                storage.vector_stores.link_file(link, n)
        print(f"{label}: {files:,} documents written in {time.perf_counter() - started:.1f}s")
        middle = ids[len(ids) // 2 + 1]  # not a tenth: those show under their extra id
        cases = {
            "first page (20, desc)": lambda: stores.list_files("default", STORE, 20, None, None, "desc", None),
            "after a middle cursor (100, asc)": lambda: stores.list_files(
                "default", STORE, 100, middle, None, "asc", None
            ),
            "before a middle cursor (20)": lambda: stores.list_files("default", STORE, 20, None, middle, "desc", None),
            "filter=completed (20)": lambda: stores.list_files("default", STORE, 20, None, None, "desc", "completed"),
            "get_file": lambda: stores.get_file("default", STORE, middle),
        }
        for name, call in cases.items():
            times = []
            for _ in range(30):
                t = time.perf_counter()
                call()
                times.append((time.perf_counter() - t) * 1000)
            print(f"  {name:34s} p50 {percentile(times, 50):6.2f} ms  p95 {percentile(times, 95):6.2f} ms")
    finally:
        services.close()


def run_batches(settings: Settings, batches: int, size: int, label: str) -> None:
    services = open_services(settings)
    try:
        ingestion, stores = services.ingestion, services.vector_stores
        store = stores.create("default", "bench", {}, None).store
        last = ""
        for b in range(batches):
            ids = []
            for n in range(b * size, (b + 1) * size):
                data = f"File {n} of the batch benchmark.".encode()
                ids.append(ingestion.submit(Upload(data, f"f{n}.txt", "general"), wake_workers=False).document.file_id)
            last = ids[len(ids) // 2]
            t = time.perf_counter()
            stores.create_batch("default", store.id, [(i, {}, None, "chunking_strategy") for i in ids])
            print(
                f"{label}: batch {b + 1} of {size:,} files (store then {(b + 1) * size:,}) "
                f"{time.perf_counter() - t:6.2f} s"
            )
        times = []
        for _ in range(30):
            t = time.perf_counter()
            stores.get_file("default", store.id, last)
            times.append((time.perf_counter() - t) * 1000)
        print(f"{label}: get_file at {batches * size:,} files p50 {percentile(times, 50):.3f} ms")
    finally:
        services.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--batches", type=int, default=0, help="time this many file batches instead")
    parser.add_argument("--batch-size", type=int, default=2000)
    args = parser.parse_args()

    def bench(settings: Settings, label: str) -> None:
        if args.batches:
            run_batches(settings, args.batches, args.batch_size, label)
        else:
            run(settings, args.files, label)

    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as home:
            bench(Settings(home=Path(home), ingest_workers=0, embedding_model="none"), "sqlite")
    if args.backend in ("postgres", "both"):
        pg = bench_postgres()
        try:
            with tempfile.TemporaryDirectory() as home:
                url = pg.create_database("bench_vector_store_files")
                bench(Settings(home=Path(home), database_url=url, ingest_workers=0, embedding_model="none"), "postgres")
        finally:
            pg.close()


if __name__ == "__main__":
    main()
