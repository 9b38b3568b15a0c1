"""``JobStore`` in SQL both backends speak: the lease updates and the ends of a job.

Written once with ``?`` placeholders (``_sql`` swaps in the backend's ``mark``). What differs stays in
``sqlite/jobs.py`` and ``postgres/jobs.py``: how a claim takes a job (the single writer's ``BEGIN
IMMEDIATE``, or ``FOR UPDATE SKIP LOCKED`` and the lock order), whose clock a lease runs on, how a worker's
ownership is checked (and locked) before it writes, how passages go in and how a change is recorded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from calypso.models import Chunk, Document, IngestJob, Page, QueueStats
from calypso.store.base import MAX_JOB_ATTEMPTS
from calypso.store.shared_sql import D, SharedSQL

GAVE_UP = {
    "code": "server_error",
    "message": f"Ingestion was started {MAX_JOB_ATTEMPTS} times and never finished (the worker stopped each "
    "time); the file may be too large or too complex for this server. Delete it and upload a smaller file.",
}


class JobsSQL(SharedSQL[D]):
    """The ``JobStore`` methods and statements whose SQL is the same on both backends.

    A backend sets ``database`` and ``mark``, claims in ``_claim`` and says how a JSON value and a text
    value are bound (``_json``, ``_text``).
    """

    def _json(self, value: object) -> object:
        raise NotImplementedError

    def _text(self, value: str) -> str:
        return value

    def _claim(self, worker_id: str, lease_seconds: float, document_key: int | None) -> IngestJob | None:
        raise NotImplementedError

    def claim(self, worker_id: str, lease_seconds: float) -> IngestJob | None:
        return self._claim(worker_id, lease_seconds, None)

    def claim_document(self, document_key: int, worker_id: str, lease_seconds: float) -> IngestJob | None:
        return self._claim(worker_id, lease_seconds, document_key)

    def _update_owned(self, sql: str, args: tuple[object, ...]) -> bool:
        # Every statement ends "WHERE document_key = ? AND lease_owner = ?": a lost lease matches no row.
        statement = self._sql(sql)
        return bool(self.database.write(lambda db: db.execute(statement, args).rowcount == 1))

    def queue_stats(self) -> QueueStats:
        row = self.database.row(
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN lease_owner IS NULL THEN 0 ELSE 1 END), 0), MIN(created_at) "
            "FROM ingest_jobs"
        )
        total, running, oldest = row if row is not None else (0, 0, None)
        return QueueStats(queued=int(total) - int(running), running=int(running), oldest_created_at=oldest)

    def release(self, document_key: int, worker_id: str) -> None:
        self._update_owned(
            "UPDATE ingest_jobs SET lease_owner = NULL, lease_expires_at = NULL, "
            "attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, "
            "updated_at = ? WHERE document_key = ? AND lease_owner = ?",
            (int(time.time()), document_key, worker_id),
        )

    def report_progress(self, document_key: int, worker_id: str, pages_parsed: int, passages_written: int) -> bool:
        return self._update_owned(
            "UPDATE ingest_jobs SET pages_parsed = ?, passages_written = ?, updated_at = ? "
            "WHERE document_key = ? AND lease_owner = ?",
            (pages_parsed, passages_written, int(time.time()), document_key, worker_id),
        )

    # -- statements inside a backend's write -----------------------------------
    def _end(self, db: Any, document_key: int, status: str, error: dict[str, Any] | None) -> None:
        """Set the document's final status and drop its job."""
        db.execute(
            self._sql("UPDATE documents SET status = ?, last_error = ? WHERE key = ?"),
            (status, self._json(error) if error is not None else None, document_key),
        )
        db.execute(self._sql("DELETE FROM ingest_jobs WHERE document_key = ?"), (document_key,))

    def _completed(
        self,
        db: Any,
        document_key: int,
        doc: Document,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        embed_model: str | None,
    ) -> None:
        """Mark the document completed (its passages already written), drop its job, queue its embedding."""
        db.execute(
            self._sql(
                "UPDATE documents SET status = 'completed', last_error = NULL, page_count = ?, chunk_count = ?, "
                "title = ?, metadata = ?, media_type = ? WHERE key = ?"
            ),
            (
                len(pages),
                len(chunks),
                None if doc.title is None else self._text(doc.title),
                self._json(doc.metadata),
                doc.media_type,
                document_key,
            ),
        )
        db.execute(self._sql("DELETE FROM ingest_jobs WHERE document_key = ?"), (document_key,))
        self._queue_embedding(db, document_key, embed_model)

    def _queue_embedding(self, db: Any, document_key: int, embed_model: str | None) -> None:
        """With a model, an embedding job for a completed document: its vectors come later, from an embedding worker."""
        if embed_model is not None:
            db.execute(
                self._sql(
                    "INSERT INTO embedding_jobs (document_key, model, created_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (document_key) DO NOTHING"
                ),
                (document_key, embed_model, int(time.time())),
            )
