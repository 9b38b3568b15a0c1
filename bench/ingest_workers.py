"""Ingestion throughput on PostgreSQL with one and with two `calypso worker` processes.

    .venv/bin/python -m bench.ingest_workers [--copies 6] [--workers 1,2]

The real documents of ../shared/data/ingestion-docs (PDF, DOCX, HTML, Markdown),
each submitted ``--copies`` times (one namespace per copy, so none is a
duplicate), are queued as ingestion jobs in a fresh database; then N worker
processes (one thread each, parsing in their own child processes as in
production) are started and timed until every job has ended. Reported:
pages/s and passages/s from the first worker's start to the last job's end,
worker start-up included, and the CPU seconds the workers and PostgreSQL used.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from bench.common.paths import REPO, data_dir
from bench.common.postgres import bench_postgres
from calypso.config import Settings
from calypso.services import open_services
from calypso.services.ingestion import Upload
from testkit.postgres import PgServer


def documents() -> list[Path]:
    root = data_dir() / "ingestion-docs"
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in {".pdf", ".docx", ".html", ".md"})


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its living descendants (the parse children), from /proc."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parents[int(proc.name)] = int(_stat(int(proc.name))[1])
            except OSError:
                continue
    tree, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    ticks = 0
    for member in tree:
        try:
            ticks += sum(int(v) for v in _stat(member)[11:15])  # utime, stime, cutime, cstime
        except OSError:
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def postgres_cpu(pgdata: Path) -> float:
    """CPU of the postmaster and its backends: exited backends count through the postmaster's cutime."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    return cpu_seconds(postmaster)


def queue_jobs(url: str, home: Path, paths: list[Path], copies: int) -> int:
    services = open_services(Settings(home=home, database_url=url, ingest_workers=0))
    try:
        for copy in range(copies):
            for path in paths:
                services.ingestion.submit(Upload(path.read_bytes(), path.name, f"copy{copy}"), wake_workers=False)
        return copies * len(paths)
    finally:
        services.close()


def run(pg: PgServer, workers: int, paths: list[Path], copies: int) -> dict[str, float]:
    url = pg.create_database(f"ingest_{workers}")
    with tempfile.TemporaryDirectory() as home:
        jobs = queue_jobs(url, Path(home), paths, copies)
        env = {**os.environ, "CALYPSO_DATABASE_URL": url, "CALYPSO_HOME": home, "CALYPSO_JOB_POLL_SECONDS": "0.1"}
        env["PYTHONPATH"] = str(REPO / "src")
        pg_cpu_before = postgres_cpu(pg.pgdata)
        start = time.perf_counter()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from calypso.cli import main; raise SystemExit(main())",
                    "worker",
                    "--threads",
                    "1",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        try:
            with psycopg.connect(url, autocommit=True) as db:
                while True:
                    row = db.execute(
                        "SELECT count(*) FILTER (WHERE status = 'in_progress'), count(*) FILTER (WHERE status = "
                        "'failed'), coalesce(sum(page_count), 0), coalesce(sum(chunk_count), 0) FROM documents"
                    ).fetchone()
                    assert row is not None
                    if row[0] == 0:
                        break
                    time.sleep(0.05)
            elapsed = time.perf_counter() - start
            worker_cpu = sum(cpu_seconds(p.pid) for p in procs)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(60)
        pg_cpu = postgres_cpu(pg.pgdata) - pg_cpu_before
    pg.admin(f'DROP DATABASE IF EXISTS "ingest_{workers}" WITH (FORCE)')
    _, failed, pages, passages = row
    return {
        "workers": workers,
        "jobs": jobs,
        "failed": failed,
        "pages": pages,
        "passages": passages,
        "seconds": elapsed,
        "worker_cpu": worker_cpu,
        "pg_cpu": pg_cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=6, help="times each document is queued (namespaces)")
    parser.add_argument("--workers", default="1,2", help="worker process counts to compare")
    args = parser.parse_args()
    paths = documents()
    pg = bench_postgres()
    try:
        print(f"{len(paths)} documents x {args.copies} copies; {os.cpu_count()} CPUs on this machine")
        print(
            f"{'workers':>7} {'jobs':>5} {'failed':>6} {'pages':>6} {'passages':>8} {'s':>7} "
            f"{'pages/s':>8} {'pass/s':>7} {'wrk cpu s':>9} {'pg cpu s':>8}"
        )
        for count in (int(n) for n in args.workers.split(",")):
            r = run(pg, count, paths, args.copies)
            print(
                f"{r['workers']:>7} {r['jobs']:>5} {r['failed']:>6} {r['pages']:>6} {r['passages']:>8} "
                f"{r['seconds']:>7.1f} {r['pages'] / r['seconds']:>8.1f} {r['passages'] / r['seconds']:>7.0f} "
                f"{r['worker_cpu']:>9.1f} {r['pg_cpu']:>8.1f}"
            )
    finally:
        pg.close()


if __name__ == "__main__":
    main()
