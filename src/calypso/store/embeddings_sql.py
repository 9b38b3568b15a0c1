"""``EmbeddingStore`` in SQL both backends speak: passage vectors and the queue of documents to embed.

A completed document gets an embedding job in the same transaction that makes it keyword-searchable
(``JobStore.complete(..., embed_model=...)``); an embedding worker claims the job under a lease, stores
its passages' vectors in batches, each batch in one transaction with an ``embedded`` change on the feed
(so every process's vector index picks the batch up), and drops the job when no passage is left.
A worker that dies leaves the job to be claimed again once its lease expires; batches already stored
stay, and only the passages still missing are embedded.

What differs between the backends is passed in as a ``Dialect``: the placeholder, how a vector is
written and read (a float32 blob in SQLite; a pgvector ``vector`` in PostgreSQL, read in binary),
how a claim skips rows another worker holds, and how a change is recorded on the feed.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from calypso.models import EmbeddingJob
from calypso.store.base import MAX_JOB_ATTEMPTS


class _Database(Protocol):
    def rows(self, sql: str, params: Any = ()) -> list[Any]: ...

    def row(self, sql: str, params: Any = ()) -> Any: ...

    def stream(self, sql: str, params: Any = ()) -> Iterator[Any]: ...

    def write(self, work: Any) -> Any: ...


@dataclass(frozen=True)
class Dialect:
    mark: str  # "?" or "%s"
    vector_param: str  # the SQL for one vector parameter ("?" or "%s::vector")
    vector_column: str  # how to select a vector so ``decode`` can read it
    encode: Callable[[np.ndarray], Any]
    decode: Callable[[Any], np.ndarray]
    skip_locked: str  # appended to the claim's SELECT ("" or "FOR UPDATE SKIP LOCKED")
    lock_document: str | None  # taken first in a write, in the delete's lock order (PostgreSQL)
    record_change: Callable[[Any, str, str, int, str], None]


def sqlite_dialect(record_change: Callable[[Any, str, str, int, str], None]) -> Dialect:
    return Dialect(
        mark="?",
        vector_param="?",
        vector_column="e.vector",
        encode=lambda v: np.asarray(v, dtype="<f4").tobytes(),
        decode=lambda raw: np.frombuffer(raw, dtype="<f4"),
        skip_locked="",
        lock_document=None,
        record_change=record_change,
    )


def _pg_text(v: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in np.asarray(v, dtype=np.float32)) + "]"


def _pg_binary(raw: bytes) -> np.ndarray:
    # pgvector's binary form: uint16 dimension, uint16 unused, then big-endian float4s.
    (dim,) = struct.unpack_from(">H", raw)
    return np.frombuffer(raw, dtype=">f4", count=dim, offset=4).astype(np.float32)


def postgres_dialect(record_change: Callable[[Any, str, str, int, str], None]) -> Dialect:
    return Dialect(
        mark="%s",
        vector_param="%s::vector",
        vector_column="vector_send(e.vector)",  # bytea: no adapter to register for the extension's type
        encode=_pg_text,
        decode=lambda raw: _pg_binary(bytes(raw)),
        skip_locked="FOR UPDATE SKIP LOCKED",
        lock_document="SELECT 1 FROM documents WHERE key = %s FOR KEY SHARE",
        record_change=record_change,
    )


class SQLEmbeddingStore:
    """``calypso.store.base.EmbeddingStore`` over a backend's ``Database``."""

    def __init__(self, database: _Database, dialect: Dialect) -> None:
        self.database = database
        self.d = dialect

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.d.mark)

    # -- the queue -------------------------------------------------------------
    def claim(self, worker_id: str, lease_seconds: float, model: str) -> EmbeddingJob | None:
        """The oldest unleased (or expired) job for ``model``, leased to ``worker_id``; jobs tried too often are dropped."""
        select = self._sql(
            "SELECT j.document_key, j.attempts, d.workspace, d.namespace FROM embedding_jobs j "
            "JOIN documents d ON d.key = j.document_key "
            "WHERE j.model = ? AND (j.lease_owner IS NULL OR j.lease_expires_at < ?) "
            f"ORDER BY j.document_key LIMIT 1 {self.d.skip_locked.replace('FOR UPDATE', 'FOR UPDATE OF j')}"
        )

        def work(db: Any) -> EmbeddingJob | None:
            while True:
                now = time.time()
                row = db.execute(select, (model, now)).fetchone()
                if row is None:
                    return None
                key, attempts, workspace, namespace = tuple(row)
                if attempts >= MAX_JOB_ATTEMPTS:  # the model fails on this document every time: keyword-only
                    db.execute(self._sql("DELETE FROM embedding_jobs WHERE document_key = ?"), (key,))
                    continue
                db.execute(
                    self._sql(
                        "UPDATE embedding_jobs SET attempts = attempts + 1, lease_owner = ?, lease_expires_at = ? "
                        "WHERE document_key = ?"
                    ),
                    (worker_id, now + lease_seconds, key),
                )
                return EmbeddingJob(int(key), workspace, namespace, model, int(attempts) + 1)

        result: EmbeddingJob | None = self.database.write(work)
        return result

    def renew(self, document_key: int, worker_id: str, lease_seconds: float) -> bool:
        sql = self._sql("UPDATE embedding_jobs SET lease_expires_at = ? WHERE document_key = ? AND lease_owner = ?")
        args = (time.time() + lease_seconds, document_key, worker_id)
        return bool(self.database.write(lambda db: db.execute(sql, args).rowcount == 1))

    def release(self, document_key: int, worker_id: str) -> None:
        sql = self._sql(
            "UPDATE embedding_jobs SET lease_owner = NULL, lease_expires_at = NULL, attempts = attempts - 1 "
            "WHERE document_key = ? AND lease_owner = ?"
        )
        self.database.write(lambda db: db.execute(sql, (document_key, worker_id)))

    def finish(self, document_key: int, worker_id: str) -> bool:
        sql = self._sql("DELETE FROM embedding_jobs WHERE document_key = ? AND lease_owner = ?")
        return bool(self.database.write(lambda db: db.execute(sql, (document_key, worker_id)).rowcount == 1))

    def pending(self, model: str) -> int:
        """Documents waiting for (or being given) vectors of ``model``."""
        row = self.database.row(self._sql("SELECT count(*) FROM embedding_jobs WHERE model = ?"), (model,))
        return int(row[0]) if row else 0

    def reset(self, model: str, workspace: str | None = None) -> int:
        """Forget every stored vector (of any model) and queue every completed document for ``model``: reindex."""
        scope, args = ("AND workspace = ?", (workspace,)) if workspace is not None else ("", ())

        def work(db: Any) -> int:
            keys = f"SELECT key FROM documents WHERE status = 'completed' {scope}"
            db.execute(self._sql(f"DELETE FROM chunk_embeddings WHERE document_key IN ({keys})"), args)
            db.execute(self._sql(f"DELETE FROM embedding_jobs WHERE document_key IN ({keys})"), args)
            cursor = db.execute(
                self._sql(
                    "INSERT INTO embedding_jobs (document_key, model, created_at) "
                    f"SELECT key, ?, ? FROM documents WHERE status = 'completed' {scope}"
                ),
                (model, int(time.time()), *args),
            )
            return int(cursor.rowcount)

        result: int = self.database.write(work)
        return result

    def queue_other_models(self, model: str) -> int:
        """Queue every completed, unqueued document holding vectors of another model for ``model``: after the
        configured model changed, the workers replace them in the background (``store_vectors`` overwrites)."""
        sql = self._sql(
            "INSERT INTO embedding_jobs (document_key, model, created_at) "
            "SELECT d.key, ?, ? FROM documents d WHERE d.status = 'completed' "
            "AND NOT EXISTS (SELECT 1 FROM embedding_jobs j WHERE j.document_key = d.key) "
            "AND EXISTS (SELECT 1 FROM chunk_embeddings e WHERE e.document_key = d.key AND e.model <> ?)"
        )
        return int(self.database.write(lambda db: db.execute(sql, (model, int(time.time()), model)).rowcount))

    # -- vectors ---------------------------------------------------------------
    def missing_chunks(self, document_key: int, model: str) -> list[tuple[int, str]]:
        """(chunk key, text) of the document's passages with no vector of ``model``, in document order."""
        rows = self.database.rows(
            self._sql(
                "SELECT c.key, c.text FROM chunks c LEFT JOIN chunk_embeddings e ON e.chunk_key = c.key "
                "AND e.model = ? WHERE c.document_key = ? AND e.chunk_key IS NULL ORDER BY c.chunk_index"
            ),
            (model, document_key),
        )
        return [(int(key), text) for key, text in rows]

    def store_vectors(self, job: EmbeddingJob, worker_id: str, chunk_keys: Sequence[int], vectors: np.ndarray) -> bool:
        """Store one batch and record an ``embedded`` change, if the job is still this worker's; else nothing."""
        insert = (
            "INSERT INTO chunk_embeddings (chunk_key, document_key, model, dimension, vector) "
            f"VALUES ({self.d.mark}, {self.d.mark}, {self.d.mark}, {self.d.mark}, {self.d.vector_param}) "
            # A vector of another model (the configured one changed) is replaced; one of this model is the same.
            "ON CONFLICT (chunk_key) DO UPDATE SET model = excluded.model, dimension = excluded.dimension, "
            "vector = excluded.vector"
        )
        dim = int(vectors.shape[1])
        rows = [(k, job.document_key, job.model, dim, self.d.encode(v)) for k, v in zip(chunk_keys, vectors)]

        def work(db: Any) -> bool:
            if (
                self.d.lock_document is not None
                and db.execute(self.d.lock_document, (job.document_key,)).fetchone() is None
            ):
                return False  # the document is gone
            owned = db.execute(
                self._sql("SELECT 1 FROM embedding_jobs WHERE document_key = ? AND lease_owner = ?"),
                (job.document_key, worker_id),
            ).fetchone()
            if owned is None:
                return False
            cursor = db.cursor() if hasattr(db, "cursor") else db
            cursor.executemany(insert, rows)
            self.d.record_change(db, job.workspace, job.namespace, job.document_key, "embedded")
            return True

        return bool(self.database.write(work))

    def document_vectors(self, document_key: int, model: str) -> tuple[list[int], np.ndarray | None]:
        rows = self.database.rows(
            self._sql(
                f"SELECT e.chunk_key, {self.d.vector_column} FROM chunk_embeddings e "
                "WHERE e.document_key = ? AND e.model = ? ORDER BY e.chunk_key"
            ),
            (document_key, model),
        )
        if not rows:
            return [], None
        return [int(r[0]) for r in rows], np.stack([self.d.decode(r[1]) for r in rows])

    def namespace_vectors(
        self, workspace: str, namespace: str, model: str
    ) -> Iterator[tuple[int, list[int], np.ndarray]]:
        """(document key, chunk keys, vectors) of every document of the namespace with vectors of ``model``."""
        rows = self.database.stream(
            self._sql(
                f"SELECT e.document_key, e.chunk_key, {self.d.vector_column} FROM chunk_embeddings e "
                "JOIN documents d ON d.key = e.document_key "
                "WHERE d.workspace = ? AND d.namespace = ? AND e.model = ? ORDER BY e.document_key, e.chunk_key"
            ),
            (workspace, namespace, model),
        )
        current: int | None = None
        keys: list[int] = []
        vectors: list[np.ndarray] = []
        for doc_key, chunk_key, raw in rows:
            if doc_key != current:
                if current is not None:
                    yield current, keys, np.stack(vectors)
                current, keys, vectors = int(doc_key), [], []
            keys.append(int(chunk_key))
            vectors.append(self.d.decode(raw))
        if current is not None:
            yield current, keys, np.stack(vectors)

    def embedded_counts(self, document_keys: Sequence[int], model: str) -> dict[int, int]:
        """Passages with a vector of ``model``, per document key (absent: none)."""
        found: dict[int, int] = {}
        keys = list(document_keys)
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join([self.d.mark] * len(part))
            rows = self.database.rows(
                self._sql(
                    "SELECT document_key, count(*) FROM chunk_embeddings "
                    f"WHERE model = ? AND document_key IN ({marks}) GROUP BY document_key"
                ),
                (model, *part),
            )
            found.update((int(k), int(n)) for k, n in rows)
        return found

    def stored_dimension(self, model: str) -> int | None:
        """The dimension of vectors stored under ``model``, or None when it has none: a start-up check,
        so it reads the first row of that model instead of grouping the whole table."""
        row = self.database.row(self._sql("SELECT dimension FROM chunk_embeddings WHERE model = ? LIMIT 1"), (model,))
        return int(row[0]) if row else None
