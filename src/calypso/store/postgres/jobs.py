"""Ingestion jobs in PostgreSQL, for workers in many processes.

Claims take the job row with ``FOR UPDATE SKIP LOCKED``, so concurrent claimers each get a different job
and never wait on one another. Lease times are the database's clock (``_NOW``), so workers on hosts whose
clocks disagree still agree on when a lease expired. ``complete`` and ``fail`` lock the job row first: a
concurrent cancel, delete or re-claim either happens before (and the worker writes nothing) or waits for
the commit (and finds the job gone).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from psycopg.types.json import Json

from calypso.models import Chunk, Document, IngestJob, Page
from calypso.store.base import MAX_JOB_ATTEMPTS, DuplicateContent
from calypso.store.documents_sql import DOC_COLUMNS
from calypso.store.jobs_sql import GAVE_UP, JobsSQL
from calypso.store.postgres.database import Connection, Database, Row, text
from calypso.store.postgres.documents import (
    PostgresDocumentStore,
    _record_change,
    document_from_row,
    write_pages_and_chunks,
)

_NOW = "extract(epoch FROM clock_timestamp())"


# Lock order, in every transaction that touches both: the document row, then its job row. A delete
# (documents first, then the job through ON DELETE CASCADE) and a worker's complete or fail would
# otherwise each hold one lock and wait for the other: a deadlock PostgreSQL resolves by failing one.
def _lock_document(db: Connection, document_key: int) -> bool:
    """Take the document row's lock (waiting for a delete or cancel to commit); False when it is gone."""
    row = db.execute("SELECT 1 FROM documents WHERE key = %s FOR NO KEY UPDATE", (document_key,)).fetchone()
    return row is not None


def _owned(db: Connection, document_key: int, worker_id: str) -> Row | None:
    if not _lock_document(db, document_key):
        return None
    return db.execute(
        "SELECT d.workspace, d.namespace FROM ingest_jobs j JOIN documents d ON d.key = j.document_key "
        "WHERE j.document_key = %s AND j.lease_owner = %s FOR UPDATE OF j",
        (document_key, worker_id),
    ).fetchone()


def _insert_new(db: Connection, doc: Document, content: bytes) -> int:
    """Insert ``doc`` with its bytes; its key. DuplicateContent when the namespace holds these bytes in progress or
    completed; a failed or cancelled copy is deleted (it never reached search: no chunks, no change)."""
    try:
        key = PostgresDocumentStore.insert_document(db, doc)
    except DuplicateContent as duplicate:
        if duplicate.existing.status not in ("failed", "cancelled"):
            raise
        # Only on a conflict, and by id: a DELETE by (workspace, namespace, sha256) before every insert was
        # planned on the namespace's index while the table's statistics lagged, walking the namespace (a
        # 2,000-file batch grew from 3.3 to 7.4 s up to 10,000 files, issue 45).
        db.execute(
            "DELETE FROM documents WHERE id = %s AND status IN ('failed', 'cancelled')", (duplicate.existing.id,)
        )
        key = PostgresDocumentStore.insert_document(db, doc)  # DuplicateContent for a live copy landed meanwhile
    db.execute("INSERT INTO document_contents (document_key, content) VALUES (%s, %s)", (key, content))
    return key


class PostgresJobStore(JobsSQL[Database]):
    """``calypso.store.base.JobStore`` on PostgreSQL."""

    mark = "%s"

    def __init__(self, database: Database) -> None:
        self.database = database

    def _json(self, value: object) -> Json:
        return Json(value)

    def _text(self, value: str) -> str:
        return text(value)

    def submit(self, doc: Document, content: bytes) -> Document:
        return self._submit(doc, content, None, 0).document

    def submit_claimed(self, doc: Document, content: bytes, worker_id: str, lease_seconds: float) -> IngestJob:
        return self._submit(doc, content, worker_id, lease_seconds)

    def _submit(self, doc: Document, content: bytes, worker_id: str | None, lease_seconds: float) -> IngestJob:
        queued = replace(doc, status="in_progress", last_error=None, page_count=0, chunk_count=0)

        def work(db: Connection) -> IngestJob:
            key = _insert_new(db, queued, content)
            now = int(time.time())
            if worker_id is None:
                db.execute(
                    "INSERT INTO ingest_jobs (document_key, created_at, updated_at) VALUES (%s, %s, %s)",
                    (key, now, now),
                )
                return IngestJob(queued, key, 0, None)
            db.execute(
                "INSERT INTO ingest_jobs (document_key, attempts, lease_owner, lease_expires_at, created_at, "
                f"updated_at) VALUES (%s, 1, %s, {_NOW} + %s, %s, %s)",
                (key, worker_id, lease_seconds, now, now),
            )
            return IngestJob(queued, key, 1, worker_id)

        return self.database.write(work)

    def add_completed(
        self,
        doc: Document,
        content: bytes,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        terms: Sequence[str | None],
        embed_model: str | None = None,
    ) -> list[int]:
        if len(terms) != len(chunks):
            raise ValueError(f"{len(terms)} terms for {len(chunks)} chunks")
        completed = replace(doc, status="completed", last_error=None, page_count=len(pages), chunk_count=len(chunks))

        def work(db: Connection) -> list[int]:
            key = _insert_new(db, completed, content)
            chunk_keys = write_pages_and_chunks(db, key, pages, chunks, terms)
            self._queue_embedding(db, key, embed_model)
            _record_change(db, doc.workspace, doc.namespace, key, "added")
            return chunk_keys

        return self.database.write(work)

    def _claim(self, worker_id: str, lease_seconds: float, document_key: int | None) -> IngestJob | None:
        where = f"(lease_owner IS NULL OR lease_expires_at < {_NOW})"
        args: list[object] = []
        if document_key is not None:
            where += " AND document_key = %s"
            args.append(document_key)

        def work(db: Connection) -> IngestJob | None:
            while True:
                row = db.execute(
                    f"SELECT document_key, attempts FROM ingest_jobs WHERE {where} "
                    "ORDER BY document_key LIMIT 1 FOR UPDATE SKIP LOCKED",
                    args,
                ).fetchone()
                if row is None:
                    return None
                key, attempts = row
                if attempts >= MAX_JOB_ATTEMPTS:
                    # The job row is locked already: take the document's only if free (see the lock order);
                    # if a delete or cancel holds it, leave the job to them and to the next poll.
                    free = db.execute(
                        "SELECT 1 FROM documents WHERE key = %s FOR NO KEY UPDATE SKIP LOCKED", (key,)
                    ).fetchone()
                    if free is None:
                        return None
                    self._end(db, key, "failed", GAVE_UP)
                    continue
                db.execute(
                    f"UPDATE ingest_jobs SET attempts = attempts + 1, lease_owner = %s, "
                    f"lease_expires_at = {_NOW} + %s, updated_at = %s WHERE document_key = %s",
                    (worker_id, lease_seconds, int(time.time()), key),
                )
                doc = db.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE key = %s", (key,)).fetchone()
                assert doc is not None  # the job row references it and is locked
                return IngestJob(document_from_row(doc), key, attempts + 1, worker_id, *self._progress(db, key))

        return self.database.write(work)

    @staticmethod
    def _progress(db: Connection, key: int) -> tuple[int, int]:
        row = db.execute(
            "SELECT pages_parsed, passages_written FROM ingest_jobs WHERE document_key = %s", (key,)
        ).fetchone()
        return (row[0], row[1]) if row else (0, 0)

    def renew(self, document_key: int, worker_id: str, lease_seconds: float) -> bool:
        return self._update_owned(
            f"UPDATE ingest_jobs SET lease_expires_at = {_NOW} + ?, updated_at = ? "
            "WHERE document_key = ? AND lease_owner = ?",
            (lease_seconds, int(time.time()), document_key, worker_id),
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
        if len(terms) != len(chunks):
            raise ValueError(f"{len(terms)} terms for {len(chunks)} chunks")

        def work(db: Connection) -> list[int] | None:
            owned = _owned(db, document_key, worker_id)
            if owned is None:
                return None
            chunk_keys = write_pages_and_chunks(db, document_key, pages, chunks, terms)
            self._completed(db, document_key, doc, pages, chunks, embed_model)
            _record_change(db, owned[0], owned[1], document_key, "added")
            return chunk_keys

        return self.database.write(work)

    def fail(self, document_key: int, worker_id: str, error: dict[str, Any]) -> bool:
        def work(db: Connection) -> bool:
            if _owned(db, document_key, worker_id) is None:
                return False
            self._end(db, document_key, "failed", error)
            return True

        return self.database.write(work)

    def cancel(self, workspace: str, document_id: str) -> Document | None:
        def work(db: Connection) -> Row | None:
            # The document row first (the lock order): waits for a worker's complete or fail, then finds
            # the job gone and cancels nothing.
            document = db.execute(
                "SELECT key FROM documents WHERE workspace = %s AND id = %s FOR NO KEY UPDATE", (workspace, document_id)
            ).fetchone()
            if document is None:
                return None
            row = db.execute(
                "DELETE FROM ingest_jobs WHERE document_key = %s RETURNING document_key", (document[0],)
            ).fetchone()
            if row is None:
                return None
            return db.execute(
                f"UPDATE documents SET status = 'cancelled', last_error = NULL WHERE key = %s RETURNING {DOC_COLUMNS}",
                (row[0],),
            ).fetchone()

        row = self.database.write(work)
        return document_from_row(row) if row else None

    def jobs(self, workspace: str, document_ids: Sequence[str]) -> dict[str, IngestJob]:
        rows = self.database.rows(
            f"SELECT {', '.join('d.' + c.strip() for c in DOC_COLUMNS.split(','))}, "
            "j.attempts, j.lease_owner, j.pages_parsed, j.passages_written "
            "FROM documents d JOIN ingest_jobs j ON j.document_key = d.key "
            "WHERE d.workspace = %s AND d.id = ANY(%s::text[])",
            (workspace, list(document_ids)),
        )
        width = len(DOC_COLUMNS.split(","))
        return {row[1]: IngestJob(document_from_row(row[:width]), row[0], *row[width:]) for row in rows}
