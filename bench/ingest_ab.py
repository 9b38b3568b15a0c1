"""Keyword-searchable ingestion of two source trees, in turns: SciFact uploads through ``DocumentService.ingest``.

    git worktree add --detach ../calypso-base <commit>
    .venv/bin/python -m bench.ingest_ab ../calypso-base . [--uploads 2000] [--rounds 4]

Each round runs each tree in a process of its own (the first tree first in rounds 1, 3, …, the second in
2, 4, …, so both see the same machine load): a fresh SQLite data directory with command A's settings
(bench/hybrid_quality.py: one passage per abstract, the default embedding model, so each completed
document also queues its embedding job), 20 warm-up uploads (the parse children start, modules load),
then ``--uploads`` SciFact abstracts, one ``ingest(wait=True)`` each, timed as pages/s. Then, in the
same process, the same uploads into a second fresh directory, counted rather than timed: SQL statements
(every statement either SQLite connection ran, transactions' BEGIN and COMMIT included) and threads
started, per upload. Each process also prints a digest of what it stored (every passage's text,
offsets, pages and analysed terms, by file name) and of the keyword search results of 100 SciFact
claims: equal digests mean the trees stored and found the same passages.

Prints each round's pages/s per tree and their ratio, then the medians. A difference smaller than
the spread between rounds is noise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import beir as be
from calypso.services.ingestion import Upload

WARM_UP = 20
CLAIMS = 100


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _ingest(home: Path, uploads: list[tuple[str, str]]) -> tuple[float, int, object]:
    """Ingest ``uploads`` after the warm-up ones into a fresh service at ``home``: (seconds, pages, services)."""
    from calypso.config import Settings
    from calypso.services import open_services

    services = open_services(Settings(home=home, chunk_size=100_000, chunk_overlap=0))
    for doc_id, text in uploads[:WARM_UP]:
        services.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", "scifact"))
    pages = 0
    t0 = time.perf_counter()
    for doc_id, text in uploads[WARM_UP:]:
        pages += services.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", "scifact")).document.page_count
    return time.perf_counter() - t0, pages, services


def _digests(services: object, home: Path, claims: list[str]) -> tuple[str, str]:
    """What was stored (passages by file name) and what keyword search finds, each as a short hash."""
    import sqlite3

    from calypso.config import DATABASE_FILE
    from calypso.models import RankingOptions

    stored = hashlib.sha256()
    with sqlite3.connect(home / DATABASE_FILE) as db:
        rows = db.execute(
            'SELECT d.filename, d.status, d.page_count, d.chunk_count, c.chunk_index, c.text, c.start, c."end", '
            "c.page_start, c.page_end, c.page_labels, c.heading_path, c.terms FROM chunks c "
            "JOIN documents d ON d.key = c.document_key ORDER BY d.filename, c.chunk_index"
        )
        for row in rows:
            stored.update(repr(tuple(row)).encode())
    found = hashlib.sha256()
    search = services.search  # type: ignore[attr-defined]
    for claim in claims:
        for passage in search.search(
            claim, search.scope("scifact", max_results=10, ranking=RankingOptions(embedding_weight=0))
        ):
            found.update(f"{passage.document.filename}:{passage.chunk.chunk_index}:{passage.score:.6f}|".encode())
    return stored.hexdigest()[:16], found.hexdigest()[:16]


def child(uploads: int, offset: int) -> None:
    """One tree's run (this process imports that tree's calypso): prints one JSON line."""
    from calypso.store.sqlite import database

    corpus = list(be.load_corpus(be.scifact_dir()).items())
    batch = corpus[offset : offset + WARM_UP + uploads]
    claims = list(be.load_queries(be.scifact_dir()).values())[:CLAIMS]
    with tempfile.TemporaryDirectory() as tmp:
        seconds, pages, services = _ingest(Path(tmp) / "timed", batch)
        stored, found = _digests(services, Path(tmp) / "timed", claims)
        services.close()  # type: ignore[attr-defined]

        statements = [0]
        opened = database.Database._open

        def traced(self: database.Database) -> object:
            connection = opened(self)
            connection.set_trace_callback(lambda _: statements.__setitem__(0, statements[0] + 1))
            return connection

        database.Database._open = traced  # type: ignore[method-assign,assignment]
        started = [0]
        start = threading.Thread.start

        def counted(thread: threading.Thread) -> None:
            started[0] += 1
            start(thread)

        threading.Thread.start = counted  # type: ignore[method-assign]
        from calypso.config import Settings
        from calypso.services import open_services

        counting = open_services(Settings(home=Path(tmp) / "counted", chunk_size=100_000, chunk_overlap=0))
        for doc_id, text in batch[:WARM_UP]:
            counting.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", "scifact"))
        statements[0] = started[0] = 0
        for doc_id, text in batch[WARM_UP:]:
            counting.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", "scifact"))
        counted_statements, counted_threads = statements[0], started[0]
        threading.Thread.start = start  # type: ignore[method-assign]
        counting.close()
    print(
        json.dumps(
            {
                "seconds": seconds,
                "pages": pages,
                "statements_per_upload": counted_statements / uploads,
                "threads_per_upload": counted_threads / uploads,
                "stored": stored,
                "found": found,
            }
        ),
        flush=True,
    )


def run_tree(tree: Path, uploads: int, offset: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(tree.resolve() / "src"), "CALYPSO_LOG_LEVEL": "warning"}
    command = [sys.executable, __file__, "--child", "--uploads", str(uploads), "--offset", str(offset)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path, help="two source trees: the base, then the change")
    parser.add_argument("--uploads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--offset", type=int, default=0, help="first SciFact abstract used")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.uploads, args.offset)
        return
    if len(args.trees) != 2:
        parser.error("name two source trees")
    names = [str(tree) for tree in args.trees]
    print(f"{args.uploads:,} SciFact uploads per run, {args.rounds} rounds; {os.cpu_count()} CPUs")
    print(f"load average before: {loadavg()}")
    rates: dict[str, list[float]] = {name: [] for name in names}
    last: dict[str, dict[str, object]] = {}
    for round_ in range(args.rounds):
        order = list(zip(names, args.trees, strict=True))
        if round_ % 2:
            order.reverse()
        line = []
        for name, tree in order:
            result = run_tree(tree, args.uploads, args.offset)
            rate = float(result["pages"]) / float(result["seconds"])  # type: ignore[arg-type]
            rates[name].append(rate)
            last[name] = result
            line.append(f"{name} {rate:7.1f} pages/s")
        ratio = rates[names[1]][-1] / rates[names[0]][-1]
        print(f"round {round_ + 1}: {'; '.join(line)}; ratio {ratio:.2f} (load {loadavg()})", flush=True)
    print(f"load average after: {loadavg()}")
    print(f"{'tree':<28} {'median pages/s':>14} {'best':>8} {'SQL/upload':>10} {'threads/upload':>14}  stored / found")
    for name in names:
        r = last[name]
        print(
            f"{name:<28} {statistics.median(rates[name]):14.1f} {max(rates[name]):8.1f} "
            f"{float(r['statements_per_upload']):10.1f} {float(r['threads_per_upload']):14.2f}  "  # type: ignore[arg-type]
            f"{r['stored']} / {r['found']}"
        )
    ratios = [b / a for a, b in zip(rates[names[0]], rates[names[1]], strict=True)]
    print(f"ratio of the second tree to the first, median of rounds: {statistics.median(ratios):.2f}")
    same = all(last[names[0]][k] == last[names[1]][k] for k in ("stored", "found"))
    print("same passages and search results" if same else "THE TREES STORED OR FOUND DIFFERENT PASSAGES")


if __name__ == "__main__":
    main()
