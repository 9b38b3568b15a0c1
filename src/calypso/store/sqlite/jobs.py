"""Ingestion jobs in the embedded SQLite file: the single writer makes every claim atomic."""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from calypso.errors import StorageError
from calypso.models import Chunk, Document, IngestJob, Page
from calypso.store.base import MAX_JOB_ATTEMPTS, DuplicateContent
from calypso.store.documents_sql import DOC_COLUMNS
from calypso.store.jobs_sql import GAVE_UP, JobsSQL
from calypso.store.sqlite.database import Database, batched
from calypso.store.sqlite.documents import (
    _record_change,
    document_from_row,
    insert_document,
    write_pages_and_chunks,
)

log = logging.getLogger("calypso.store")


def _owned(db: sqlite3.Connection, document_key: int, worker_id: str) -> sqlite3.Row | None:
    found: sqlite3.Row | None = db.execute(
        "SELECT d.workspace, d.namespace FROM ingest_jobs j JOIN documents d ON d.key = j.document_key "
        "WHERE j.document_key = ? AND j.lease_owner = ?",
        (document_key, worker_id),
    ).fetchone()
    return found


def _no_live_copy(db: sqlite3.Connection, doc: Document) -> None:
    """DuplicateContent when the namespace holds ``doc``'s bytes in progress or completed; a failed or cancelled
    copy is deleted (it never reached search: no chunks, no change)."""
    existing = db.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE workspace = ? AND namespace = ? AND sha256 = ?",
        (doc.workspace, doc.namespace, doc.sha256),
    ).fetchone()
    if existing is not None:
        if existing["status"] in ("in_progress", "completed"):
            raise DuplicateContent(document_from_row(existing))
        db.execute("DELETE FROM documents WHERE key = ?", (existing["key"],))


class SQLiteJobStore(JobsSQL[Database]):
    """``calypso.store.base.JobStore`` on SQLite."""

    mark = "?"

    def __init__(self, database: Database) -> None:
        self.database = database

    def _json(self, value: object) -> str:
        return json.dumps(value)

    def submit(self, doc: Document, content: bytes) -> Document:
        return self._submit(doc, content, None, 0).document

    def submit_claimed(self, doc: Document, content: bytes, worker_id: str, lease_seconds: float) -> IngestJob:
        return self._submit(doc, content, worker_id, lease_seconds)

    def _submit(self, doc: Document, content: bytes, worker_id: str | None, lease_seconds: float) -> IngestJob:
        queued = replace(doc, status="in_progress", last_error=None, page_count=0, chunk_count=0)

        def work(db: sqlite3.Connection) -> IngestJob:
            _no_live_copy(db, doc)
            key = insert_document(db, queued, content)
            now = time.time()
            attempts, expires = (0, None) if worker_id is None else (1, now + lease_seconds)
            db.execute(
                "INSERT INTO ingest_jobs (document_key, attempts, lease_owner, lease_expires_at, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (key, attempts, worker_id, expires, int(now), int(now)),
            )
            return IngestJob(queued, key, attempts, worker_id)

        # The bytes, and their copy in the write-ahead log until a checkpoint.
        return self.database.write(work, needs=2 * len(content))

    def add_completed(
        self,
        doc: Document,
        content: bytes,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        terms: Sequence[str | None],
        embed_model: str | None = None,
    ) -> list[int]:
        completed = replace(doc, status="completed", last_error=None, page_count=len(pages), chunk_count=len(chunks))

        def work(db: sqlite3.Connection) -> list[int]:
            _no_live_copy(db, doc)
            key = insert_document(db, completed, content)
            chunk_keys = write_pages_and_chunks(db, key, pages, chunks, terms)
            self._queue_embedding(db, key, embed_model)
            _record_change(db, doc.workspace, doc.namespace, key, "added")
            return chunk_keys

        # The bytes as submit counts them, the passages as complete does.
        return self.database.write(work, needs=2 * len(content) + 3 * sum(len(chunk.text) for chunk in chunks))

    def _claim(self, worker_id: str, lease_seconds: float, document_key: int | None) -> IngestJob | None:
        def work(db: sqlite3.Connection) -> IngestJob | None:
            while True:
                now = time.time()
                where, args = "(lease_owner IS NULL OR lease_expires_at < ?)", [now]
                if document_key is not None:
                    where += " AND document_key = ?"
                    args.append(document_key)
                row = db.execute(
                    f"SELECT document_key, attempts FROM ingest_jobs WHERE {where} ORDER BY document_key LIMIT 1",
                    args,
                ).fetchone()
                if row is None:
                    return None
                key, attempts = row
                if attempts >= MAX_JOB_ATTEMPTS:
                    self._end(db, key, "failed", GAVE_UP)
                    continue
                db.execute(
                    "UPDATE ingest_jobs SET attempts = attempts + 1, lease_owner = ?, lease_expires_at = ?, "
                    "updated_at = ? WHERE document_key = ?",
                    (worker_id, now + lease_seconds, int(now), key),
                )
                return self._job(db, key)

        return self.database.write(work)

    @staticmethod
    def _job(db: sqlite3.Connection, key: int) -> IngestJob:
        doc = db.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE key = ?", (key,)).fetchone()
        job = db.execute(
            "SELECT attempts, lease_owner, pages_parsed, passages_written FROM ingest_jobs WHERE document_key = ?",
            (key,),
        ).fetchone()
        return IngestJob(document_from_row(doc), key, *tuple(job))

    def renew(self, document_key: int, worker_id: str, lease_seconds: float) -> bool:
        return self._update_owned(
            "UPDATE ingest_jobs SET lease_expires_at = ?, updated_at = ? WHERE document_key = ? AND lease_owner = ?",
            (time.time() + lease_seconds, int(time.time()), document_key, worker_id),
        )

    def complete(
        self,
        document_key: int,
        worker_id: str,
        doc: Document,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        terms: Sequence[str | None],
        embed_model: str | None = None,
    ) -> list[int] | None:
        def work(db: sqlite3.Connection) -> list[int] | None:
            owned = _owned(db, document_key, worker_id)
            if owned is None:
                return None
            chunk_keys = write_pages_and_chunks(db, document_key, pages, chunks, terms)
            self._completed(db, document_key, doc, pages, chunks, embed_model)
            _record_change(db, owned["workspace"], owned["namespace"], document_key, "added")
            return chunk_keys

        # Measured on text: chunks and their terms take about twice the text, plus log room.
        text = sum(len(chunk.text) for chunk in chunks)
        return self.database.write(work, needs=3 * text)

    def fail(self, document_key: int, worker_id: str, error: dict[str, Any]) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            if _owned(db, document_key, worker_id) is None:
                return False
            self._end(db, document_key, "failed", error)
            return True

        return self.database.write(work)

    def cancel(self, workspace: str, document_id: str) -> Document | None:
        def work(db: sqlite3.Connection) -> Document | None:
            row = db.execute(
                "SELECT d.key FROM documents d JOIN ingest_jobs j ON j.document_key = d.key "
                "WHERE d.workspace = ? AND d.id = ?",
                (workspace, document_id),
            ).fetchone()
            if row is None:
                return None
            self._end(db, row[0], "cancelled", None)
            return document_from_row(
                db.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE key = ?", (row[0],)).fetchone()
            )

        return self.database.write(work)

    def jobs(self, workspace: str, document_ids: Sequence[str]) -> dict[str, IngestJob]:
        found: dict[str, IngestJob] = {}
        for batch in batched(document_ids):
            marks = ",".join("?" * len(batch))
            rows = self.database.rows(
                f"SELECT {DOC_COLUMNS} FROM documents WHERE +workspace = ? AND id IN ({marks}) "
                "AND key IN (SELECT document_key FROM ingest_jobs)",
                (workspace, *batch),
            )
            documents = {row["key"]: document_from_row(row) for row in rows}
            if not documents:
                continue
            keys = list(documents)
            job_rows = self.database.rows(
                "SELECT document_key, attempts, lease_owner, pages_parsed, passages_written FROM ingest_jobs "
                f"WHERE document_key IN ({','.join('?' * len(keys))})",
                keys,
            )
            for key, *rest in (tuple(r) for r in job_rows):
                found[documents[key].id] = IngestJob(documents[key], key, *rest)
        return found


def release_dead_leases(database: Database, pid: int) -> int:
    """Free the ingestion and embedding leases of the process ``pid`` on this host, which died holding them.

    Called when the data-directory lock shows its previous owner ended without releasing it: nothing
    else can still be working on those jobs, so waiting out their leases (30 s) would only delay the
    restart. Attempts stay counted, so a document that kills the server each time is still given up.
    """
    owners = f"{socket.gethostname()}:{pid}:"  # worker ids are host:pid:role:random (ingest_worker.worker_id)

    def work(db: sqlite3.Connection) -> int:
        released = 0
        for table in ("ingest_jobs", "embedding_jobs"):
            released += db.execute(
                f"UPDATE {table} SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE substr(lease_owner, 1, length(?)) = ?",
                (owners, owners),
            ).rowcount
        return released

    try:
        released = database.write(work)
    except StorageError as exc:  # a full disk, say: the leases then expire as usual
        log.warning("could not free the job leases of process %d, which ended without closing: %s", pid, exc.message)
        return 0
    if released:
        log.info("freed %d job lease(s) of process %d, which ended without closing", released, pid)
    return released
