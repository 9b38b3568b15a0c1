"""The embedded store: one SQLite file in WAL mode.

Reads use one connection per thread; all writes go through one lock and
``BEGIN IMMEDIATE`` so a document, its pages, chunks and bytes land in one
transaction or not at all.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from calypso.errors import NotFound, StorageError
from calypso.models import Chunk, Document, Page
from calypso.retrieval.tokenize import ANALYZER_VERSION
from calypso.store.base import Listing, Store, StoredChunk
from calypso.store.migrations import migrate

_DOC_COLUMNS = (
    "key, id, file_id, workspace, namespace, filename, media_type, bytes, sha256, created_at, "
    "page_count, chunk_count, title, source_url, metadata"
)
_CHUNK_COLUMNS = (
    'c.key, d.id, c.chunk_index, c.text, c.start, c."end", c.page_start, c.page_end, c.page_labels, c.heading_path'
)


def encode_terms(terms: list[str]) -> str:
    # Terms are word characters only, so a space joins them unambiguously.
    return f"{ANALYZER_VERSION} " + " ".join(terms)


def decode_terms(stored: str | None) -> list[str] | None:
    """Stored terms, or None when absent or written by another analyzer version (re-tokenise then)."""
    if not stored:
        return None
    version, _, joined = stored.partition(" ")
    if version != ANALYZER_VERSION:
        return None
    return joined.split(" ") if joined else []


def _document(row: sqlite3.Row) -> Document:
    return Document(
        id=row["id"],
        file_id=row["file_id"],
        workspace=row["workspace"],
        namespace=row["namespace"],
        filename=row["filename"],
        media_type=row["media_type"],
        bytes=row["bytes"],
        sha256=row["sha256"],
        created_at=row["created_at"],
        page_count=row["page_count"],
        chunk_count=row["chunk_count"],
        title=row["title"],
        source_url=row["source_url"],
        metadata=json.loads(row["metadata"]),
    )


def _stored_chunk(row: sqlite3.Row | tuple) -> StoredChunk:
    key, document_id, index, text, start, end, page_start, page_end, labels, path = tuple(row)
    chunk = Chunk(index, text, start, end, page_start, page_end, tuple(json.loads(labels)), tuple(json.loads(path)))
    return StoredChunk(key=key, document_id=document_id, chunk=chunk)


class SQLiteStore(Store):
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        with self._write_lock:
            migrate(self._connection())

    # -- connections -------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
            with self._all_lock:
                self._all.append(db)
        return db

    def _write(self, work) -> object:
        """Run ``work(db)`` inside one immediate transaction under the single-writer lock."""
        with self._write_lock:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
                db.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                db.execute("ROLLBACK")
                raise StorageError(f"The database refused the write: {exc}") from exc
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._all_lock:
            for db in self._all:
                try:
                    db.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()

    # -- writes ------------------------------------------------------------
    def add_document(
        self,
        doc: Document,
        pages: Sequence[Page],
        chunks: Sequence[Chunk],
        content: bytes,
        terms: Sequence[list[str]] | None = None,
    ) -> tuple[int, list[int]]:
        stored_terms = [encode_terms(t) for t in terms] if terms is not None else [None] * len(chunks)

        def work(db: sqlite3.Connection) -> tuple[int, list[int]]:
            cursor = db.execute(
                "INSERT INTO documents (id, file_id, workspace, namespace, filename, media_type, bytes, sha256, "
                "created_at, page_count, chunk_count, title, source_url, metadata, content) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    doc.id,
                    doc.file_id,
                    doc.workspace,
                    doc.namespace,
                    doc.filename,
                    doc.media_type,
                    doc.bytes,
                    doc.sha256,
                    doc.created_at,
                    doc.page_count,
                    doc.chunk_count,
                    doc.title,
                    doc.source_url,
                    json.dumps(doc.metadata),
                    content,
                ),
            )
            key = cursor.lastrowid
            db.executemany(
                'INSERT INTO pages (document_key, number, label, start, "end") VALUES (?, ?, ?, ?, ?)',
                [(key, p.number, p.label, p.start, p.end) for p in pages],
            )
            db.executemany(
                'INSERT INTO chunks (document_key, chunk_index, text, start, "end", page_start, page_end, '
                "page_labels, heading_path, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        key,
                        c.chunk_index,
                        c.text,
                        c.start,
                        c.end,
                        c.page_start,
                        c.page_end,
                        json.dumps(list(c.page_labels)),
                        json.dumps(list(c.heading_path)),
                        chunk_terms,
                    )
                    for c, chunk_terms in zip(chunks, stored_terms, strict=True)
                ],
            )
            chunk_keys = [
                r[0] for r in db.execute("SELECT key FROM chunks WHERE document_key = ? ORDER BY chunk_index", (key,))
            ]
            return key, chunk_keys

        return self._write(work)  # type: ignore[return-value]

    def delete_document(self, workspace: str, document_id: str) -> Document | None:
        def work(db: sqlite3.Connection) -> Document | None:
            row = db.execute(
                f"SELECT {_DOC_COLUMNS} FROM documents WHERE workspace = ? AND id = ?", (workspace, document_id)
            ).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM documents WHERE key = ?", (row["key"],))
            return _document(row)

        return self._write(work)  # type: ignore[return-value]

    # -- reads -------------------------------------------------------------
    def _one_document(self, where: str, args: tuple) -> Document | None:
        row = self._connection().execute(f"SELECT {_DOC_COLUMNS} FROM documents WHERE {where}", args).fetchone()
        return _document(row) if row else None

    def find_duplicate(self, workspace: str, namespace: str, sha256: str) -> Document | None:
        return self._one_document("workspace = ? AND namespace = ? AND sha256 = ?", (workspace, namespace, sha256))

    def get_document(self, workspace: str, document_id: str) -> Document | None:
        return self._one_document("workspace = ? AND id = ?", (workspace, document_id))

    def get_document_by_file_id(self, workspace: str, file_id: str) -> Document | None:
        return self._one_document("workspace = ? AND file_id = ?", (workspace, file_id))

    def find_file(self, file_id: str) -> Document | None:
        """A file in any workspace: only for signed links, whose signature names the workspace."""
        return self._one_document("file_id = ?", (file_id,))

    def document_key(self, workspace: str, document_id: str) -> int | None:
        row = (
            self._connection()
            .execute("SELECT key FROM documents WHERE workspace = ? AND id = ?", (workspace, document_id))
            .fetchone()
        )
        return row[0] if row else None

    def document_keys(self, workspace: str, document_ids: Sequence[str]) -> dict[str, int]:
        if not document_ids:
            return {}
        marks = ",".join("?" * len(document_ids))
        rows = self._connection().execute(
            f"SELECT id, key FROM documents WHERE workspace = ? AND id IN ({marks})", (workspace, *document_ids)
        )
        return {row[0]: row[1] for row in rows}

    def list_documents(
        self, workspace: str, namespace: str | None, limit: int, after: str | None, order: str = "desc"
    ) -> Listing:
        where = ["workspace = ?"]
        args: list = [workspace]
        if namespace is not None:
            where.append("namespace = ?")
            args.append(namespace)
        if after is not None:
            cursor_key = self.document_key(workspace, after)
            if cursor_key is None:
                raise NotFound(
                    f"No document {after!r} to page after; pass an id from the previous page.", param="after"
                )
            where.append("key < ?" if order == "desc" else "key > ?")
            args.append(cursor_key)
        direction = "DESC" if order == "desc" else "ASC"
        rows = (
            self._connection()
            .execute(
                f"SELECT {_DOC_COLUMNS} FROM documents WHERE {' AND '.join(where)} ORDER BY key {direction} LIMIT ?",
                (*args, limit + 1),
            )
            .fetchall()
        )
        return Listing([_document(r) for r in rows[:limit]], has_more=len(rows) > limit)

    def list_chunks(self, workspace: str, document_id: str, limit: int, after: int | None) -> Listing:
        rows = (
            self._connection()
            .execute(
                f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.key = c.document_key "
                "WHERE d.workspace = ? AND d.id = ? AND c.chunk_index > ? ORDER BY c.chunk_index LIMIT ?",
                (workspace, document_id, -1 if after is None else after, limit + 1),
            )
            .fetchall()
        )
        return Listing([_stored_chunk(r) for r in rows[:limit]], has_more=len(rows) > limit)

    def get_chunks(self, keys: Sequence[int]) -> dict[int, StoredChunk]:
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        rows = self._connection().execute(
            f"SELECT {_CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.key = c.document_key WHERE c.key IN ({marks})",
            tuple(keys),
        )
        return {row[0]: _stored_chunk(row) for row in rows}

    def get_documents_by_id(self, ids: Sequence[str]) -> dict[str, Document]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._connection().execute(f"SELECT {_DOC_COLUMNS} FROM documents WHERE id IN ({marks})", tuple(ids))
        return {row["id"]: _document(row) for row in rows}

    def get_pages(self, workspace: str, document_id: str) -> list[Page]:
        rows = self._connection().execute(
            'SELECT p.number, p.label, p.start, p."end" FROM pages p JOIN documents d ON d.key = p.document_key '
            "WHERE d.workspace = ? AND d.id = ? ORDER BY p.number",
            (workspace, document_id),
        )
        return [Page(*row) for row in rows]

    def read_content(self, workspace: str, document_id: str) -> bytes:
        row = (
            self._connection()
            .execute("SELECT content FROM documents WHERE workspace = ? AND id = ?", (workspace, document_id))
            .fetchone()
        )
        if row is None:
            raise NotFound(f"No document {document_id!r}.")
        return bytes(row[0])

    def namespace_chunks(
        self, workspace: str, namespace: str
    ) -> Iterator[tuple[int, list[tuple[int, str, list[str] | None]]]]:
        rows = self._connection().execute(
            "SELECT c.document_key, c.key, c.text, c.terms FROM chunks c JOIN documents d ON d.key = c.document_key "
            "WHERE d.workspace = ? AND d.namespace = ? ORDER BY c.document_key, c.chunk_index",
            (workspace, namespace),
        )
        current: int | None = None
        batch: list[tuple[int, str, list[str] | None]] = []
        for doc_key, key, text, terms in rows:
            if doc_key != current:
                if batch:
                    yield current, batch  # type: ignore[misc]
                current, batch = doc_key, []
            batch.append((key, text, decode_terms(terms)))
        if batch:
            yield current, batch  # type: ignore[misc]

    def namespaces(self, workspace: str) -> list[str]:
        rows = self._connection().execute(
            "SELECT DISTINCT namespace FROM documents WHERE workspace = ? ORDER BY namespace", (workspace,)
        )
        return [row[0] for row in rows]
