"""Documents, pages, chunks and original bytes in the embedded SQLite file."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from calypso.errors import NotFound
from calypso.models import Chunk, Document, Page, StoredChunk
from calypso.store.documents_sql import (
    DOC_COLUMNS,
    PASSAGE_COLUMNS,
    DocumentsSQL,
    chunking_columns,
    document_from_columns,
    layout_value,
    passages_from_rows,
    sections_value,
)
from calypso.store.sqlite.database import Database, batched


def document_from_row(row: sqlite3.Row) -> Document:
    return document_from_columns(row, json.loads)


def _record_change(db: sqlite3.Connection, workspace: str, namespace: str, document_key: int, kind: str) -> None:
    # One writer at a time, so AUTOINCREMENT order is commit order.
    db.execute(
        "INSERT INTO document_changes (workspace, namespace, document_key, kind, at) VALUES (?, ?, ?, ?, ?)",
        (workspace, namespace, document_key, kind, int(time.time())),
    )


def insert_document(db: sqlite3.Connection, doc: Document, content: bytes) -> int:
    """Insert the document row with its bytes; returns its key."""
    cursor = db.execute(
        "INSERT INTO documents (id, file_id, workspace, namespace, filename, media_type, bytes, sha256, "
        "created_at, page_count, chunk_count, title, source_url, metadata, content, status, last_error, "
        "chunk_max_tokens, chunk_overlap_tokens, purpose, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            doc.status,
            json.dumps(doc.last_error) if doc.last_error is not None else None,
            *chunking_columns(doc.chunking),
            doc.purpose,
            doc.expires_at,
        ),
    )
    key = cursor.lastrowid
    assert key is not None  # an INSERT into a rowid table always sets it
    return key


def _json_or_null(value: object) -> str | None:
    return None if value is None else json.dumps(value)


def write_pages_and_chunks(
    db: sqlite3.Connection,
    key: int,
    pages: Sequence[Page],
    chunks: Sequence[Chunk],
    terms: Sequence[str | None],
) -> list[int]:
    """Insert a document's pages and chunks (inside the caller's transaction); the chunk keys in chunk order."""
    db.executemany(
        'INSERT INTO pages (document_key, number, label, start, "end", layout) VALUES (?, ?, ?, ?, ?, ?)',
        [(key, p.number, p.label, p.start, p.end, _json_or_null(layout_value(p))) for p in pages],
    )
    db.executemany(
        'INSERT INTO chunks (document_key, chunk_index, text, start, "end", page_start, page_end, '
        "page_labels, heading_path, terms, modality, sections, confidence, table_header) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                c.modality,
                _json_or_null(sections_value(c)),
                c.confidence,
                c.table_header or None,
            )
            for c, chunk_terms in zip(chunks, terms, strict=True)
        ],
    )
    return [r[0] for r in db.execute("SELECT key FROM chunks WHERE document_key = ? ORDER BY chunk_index", (key,))]


class SQLiteDocumentStore(DocumentsSQL[Database]):
    """``calypso.store.base.DocumentStore`` on SQLite."""

    mark = "?"

    def __init__(self, database: Database) -> None:
        self.database = database

    def _loads(self, value: str) -> Any:
        return json.loads(value)  # JSON columns are text in SQLite

    # -- writes ------------------------------------------------------------
    def delete_document(self, workspace: str, document_id: str) -> Document | None:
        def work(db: sqlite3.Connection) -> Document | None:
            row = db.execute(
                f"SELECT {DOC_COLUMNS} FROM documents WHERE workspace = ? AND id = ?", (workspace, document_id)
            ).fetchone()
            if row is None:
                return None
            db.execute("DELETE FROM documents WHERE key = ?", (row["key"],))
            _record_change(db, workspace, row["namespace"], row["key"], "deleted")
            return document_from_row(row)

        return self.database.write(work, frees_space=True)

    # -- reads (the rest, the same on both backends, in documents_sql) ------
    # Lookups by a list of ids say ``+workspace``: the unary plus keeps SQLite's planner on the unique id
    # index; left to choose, it walked every document of the workspace by (workspace, …) instead
    # (12 ms instead of 0.02 ms per search at 200k passages, bench/scale_search.py).
    def document_keys(self, workspace: str, document_ids: Sequence[str]) -> dict[str, int]:
        keys: dict[str, int] = {}
        for batch in batched(document_ids):
            marks = ",".join("?" * len(batch))
            rows = self.database.rows(
                f"SELECT id, key FROM documents WHERE +workspace = ? AND id IN ({marks})", (workspace, *batch)
            )
            keys.update({row[0]: row[1] for row in rows})
        return keys

    def get_passages(
        self, workspace: str, keys: Sequence[int], namespace: str | None = None
    ) -> dict[int, tuple[StoredChunk, Document]]:
        scope, scope_args = _chunk_scope(workspace, namespace)
        found: dict[int, tuple[StoredChunk, Document]] = {}
        for batch in batched(keys):
            marks = ",".join("?" * len(batch))
            # CROSS JOIN makes SQLite start from the few chunk keys: left to choose, its planner walked the
            # whole namespace's documents (34 ms instead of 0.4 ms at 200k passages, bench/scale_search.py).
            rows = self.database.rows(
                f"SELECT {PASSAGE_COLUMNS} FROM chunks c CROSS JOIN documents d ON d.key = c.document_key "
                f"WHERE {scope} AND c.key IN ({marks})",
                (*scope_args, *batch),
            )
            found.update(passages_from_rows(rows, self._loads))
        return found

    def chunk_positions(self, keys: Sequence[int]) -> dict[int, tuple[int, int]]:
        positions: dict[int, tuple[int, int]] = {}
        for batch in batched(keys):
            marks = ",".join("?" * len(batch))
            rows = self.database.rows(
                f"SELECT key, document_key, chunk_index FROM chunks WHERE key IN ({marks})", batch
            )
            positions.update({row[0]: (row[1], row[2]) for row in rows})
        return positions

    def lone_chunks(self, keys: Sequence[int]) -> set[int]:
        lone: set[int] = set()
        for batch in batched(keys):
            marks = ",".join("?" * len(batch))
            rows = self.database.rows(
                f"SELECT c.key FROM chunks c WHERE c.key IN ({marks}) AND c.chunk_index = 0 AND NOT EXISTS "
                "(SELECT 1 FROM chunks n WHERE n.document_key = c.document_key AND n.chunk_index = 1)",
                batch,
            )
            lone.update(row[0] for row in rows)
        return lone

    def get_documents_by_id(self, workspace: str, ids: Sequence[str]) -> dict[str, Document]:
        documents: dict[str, Document] = {}
        for batch in batched(ids):
            marks = ",".join("?" * len(batch))
            rows = self.database.rows(
                f"SELECT {DOC_COLUMNS} FROM documents WHERE +workspace = ? AND id IN ({marks})", (workspace, *batch)
            )
            documents.update({row["id"]: document_from_row(row) for row in rows})
        return documents

    def read_content(self, workspace: str, document_id: str) -> bytes:
        row = self.database.row(
            "SELECT content FROM documents WHERE workspace = ? AND id = ?", (workspace, document_id)
        )
        if row is None:
            raise NotFound(f"No document {document_id!r}.")
        return bytes(row[0])


def _chunk_scope(workspace: str, namespace: str | None) -> tuple[str, list[str]]:
    """The WHERE clause (over documents ``d``) that keeps a chunk lookup inside a workspace (and namespace)."""
    if namespace is None:
        return "d.workspace = ?", [workspace]
    return "d.workspace = ? AND d.namespace = ?", [workspace, namespace]
