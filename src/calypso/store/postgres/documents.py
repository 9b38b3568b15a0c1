"""Documents, pages, chunks and original bytes in PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Sequence

from psycopg.types.json import Json

from calypso.errors import NotFound
from calypso.models import Chunk, Document, Page, StoredChunk
from calypso.store.base import DuplicateContent
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
from calypso.store.postgres.database import Connection, Database, Row, text

# Held from a change's insert to its commit, so feed seqs commit in order (a reader never skips one that
# commits late). Only the last statement of a write takes it: the wait is a commit, not an upload.
FEED_LOCK = int.from_bytes(b"calyfeed", "big", signed=True)
# Other processes LISTEN on this channel to follow the feed without polling hard.
FEED_CHANNEL = "calypso_document_changes"


def _record_change(db: Connection, workspace: str, namespace: str, document_key: int, kind: str) -> None:
    db.execute("SELECT pg_advisory_xact_lock(%s)", (FEED_LOCK,))
    db.execute(
        "INSERT INTO document_changes (workspace, namespace, document_key, kind, at) VALUES (%s, %s, %s, %s, %s)",
        (workspace, namespace, document_key, kind, int(time.time())),
    )
    db.execute(f"NOTIFY {FEED_CHANNEL}")  # delivered at commit, and only if it commits


def _optional_text(value: str | None) -> str | None:
    return None if value is None else text(value)


def document_from_row(row: Row) -> Document:
    return document_from_columns(row, as_is)


def as_is(value: object) -> object:
    return value  # psycopg returns jsonb and arrays as Python values already


def _sections(chunk: Chunk) -> Json | None:
    value = sections_value(chunk)
    if value is None:
        return None
    return Json([[offset, [text(h) for h in path]] for offset, path in value])


def write_pages_and_chunks(
    db: Connection, key: int, pages: Sequence[Page], chunks: Sequence[Chunk], terms: Sequence[str | None]
) -> list[int]:
    """Copy a document's pages and chunks in (inside the caller's transaction); the chunk keys in chunk order."""
    with db.cursor().copy('COPY pages (document_key, number, label, start, "end", layout) FROM STDIN') as copy:
        for p in pages:
            layout = layout_value(p)
            copy.write_row((key, p.number, text(p.label), p.start, p.end, None if layout is None else Json(layout)))
    with db.cursor().copy(
        'COPY chunks (document_key, chunk_index, text, start, "end", page_start, page_end, page_labels, '
        "heading_path, terms, modality, sections, confidence, table_header) FROM STDIN"
    ) as copy:
        for c, chunk_terms in zip(chunks, terms, strict=True):
            copy.write_row(
                (
                    key,
                    c.chunk_index,
                    text(c.text),
                    c.start,
                    c.end,
                    c.page_start,
                    c.page_end,
                    [text(label) for label in c.page_labels],
                    [text(heading) for heading in c.heading_path],
                    chunk_terms,
                    c.modality,
                    _sections(c),
                    c.confidence,
                    text(c.table_header) if c.table_header else None,
                )
            )
    rows = db.execute("SELECT key FROM chunks WHERE document_key = %s ORDER BY chunk_index", (key,))
    return [row[0] for row in rows]


class PostgresDocumentStore(DocumentsSQL[Database]):
    """``calypso.store.base.DocumentStore`` on PostgreSQL."""

    mark = "%s"

    def __init__(self, database: Database) -> None:
        self.database = database

    def _loads(self, value: object) -> object:
        return as_is(value)

    # -- writes ------------------------------------------------------------
    @staticmethod
    def insert_document(db: Connection, doc: Document) -> int:
        """The new document's key; DuplicateContent when the namespace holds these bytes, even if they just landed."""
        while True:
            # ON CONFLICT waits for a concurrent insert of the same bytes to commit or roll back, then decides.
            row = db.execute(
                "INSERT INTO documents (id, file_id, workspace, namespace, filename, media_type, bytes, sha256, "
                "created_at, page_count, chunk_count, title, source_url, metadata, status, last_error, "
                "chunk_max_tokens, chunk_overlap_tokens, purpose, expires_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (workspace, namespace, sha256) DO NOTHING RETURNING key",
                (
                    doc.id,
                    doc.file_id,
                    doc.workspace,
                    doc.namespace,
                    text(doc.filename),
                    doc.media_type,
                    doc.bytes,
                    doc.sha256,
                    doc.created_at,
                    doc.page_count,
                    doc.chunk_count,
                    _optional_text(doc.title),
                    _optional_text(doc.source_url),
                    Json(doc.metadata),
                    doc.status,
                    Json(doc.last_error) if doc.last_error is not None else None,
                    *chunking_columns(doc.chunking),
                    doc.purpose,
                    doc.expires_at,
                ),
            ).fetchone()
            if row is not None:
                key: int = row[0]
                return key
            # A new statement sees the winner's committed row (READ COMMITTED).
            existing = db.execute(
                f"SELECT {DOC_COLUMNS} FROM documents WHERE workspace = %s AND namespace = %s AND sha256 = %s",
                (doc.workspace, doc.namespace, doc.sha256),
            ).fetchone()
            if existing is not None:
                raise DuplicateContent(document_from_row(existing))
            # The other copy was deleted in between: try again.

    def delete_document(self, workspace: str, document_id: str) -> Document | None:
        def work(db: Connection) -> Row | None:
            # Pages, chunks and bytes go with it (ON DELETE CASCADE), in the same statement.
            row = db.execute(
                f"DELETE FROM documents WHERE workspace = %s AND id = %s RETURNING {DOC_COLUMNS}",
                (workspace, document_id),
            ).fetchone()
            if row is not None:
                _record_change(db, workspace, row[4], row[0], "deleted")
            return row

        row = self.database.write(work)
        return document_from_row(row) if row else None

    # -- reads (the rest, the same on both backends, in documents_sql) ------
    def document_keys(self, workspace: str, document_ids: Sequence[str]) -> dict[str, int]:
        return document_keys_from(self.database.rows(*document_keys_query(workspace, document_ids)))

    def get_passages(
        self, workspace: str, keys: Sequence[int], namespace: str | None = None
    ) -> dict[int, tuple[StoredChunk, Document]]:
        return passages_from_rows(self.database.rows(*passages_query(workspace, keys, namespace)), as_is)

    def chunk_positions(self, keys: Sequence[int]) -> dict[int, tuple[int, int]]:
        return positions_from(self.database.rows(*chunk_positions_query(keys)))

    def lone_chunks(self, keys: Sequence[int]) -> set[int]:
        return {row[0] for row in self.database.rows(*lone_chunks_query(keys))}

    def get_documents_by_id(self, workspace: str, ids: Sequence[str]) -> dict[str, Document]:
        rows = self.database.rows(
            f"SELECT {DOC_COLUMNS} FROM documents WHERE workspace = %s AND id = ANY(%s::text[])",
            (workspace, list(ids)),
        )
        return {row[1]: document_from_row(row) for row in rows}

    def read_content(self, workspace: str, document_id: str) -> bytes:
        row = self.database.row(
            "SELECT c.content FROM document_contents c JOIN documents d ON d.key = c.document_key "
            "WHERE d.workspace = %s AND d.id = %s",
            (workspace, document_id),
        )
        if row is None:
            raise NotFound(f"No document {document_id!r}.")
        return bytes(row[0])


# The reads a search makes, as (statement, parameters): the store's methods above run them on a pooled connection
# of the calling thread, ``search_reads.PostgresSearchReads`` awaits them on the server's event loop.
Query = tuple[str, tuple[object, ...]]


def document_keys_query(workspace: str, document_ids: Sequence[str]) -> Query:
    return "SELECT id, key FROM documents WHERE workspace = %s AND id = ANY(%s::text[])", (
        workspace,
        list(document_ids),
    )


def document_keys_from(rows: Sequence[Row]) -> dict[str, int]:
    return {row[0]: row[1] for row in rows}


def passages_query(workspace: str, keys: Sequence[int], namespace: str | None) -> Query:
    scope, args = _chunk_scope(workspace, namespace)
    sql = (
        f"SELECT {PASSAGE_COLUMNS} FROM chunks c JOIN documents d ON d.key = c.document_key "
        f"WHERE {scope} AND c.key = ANY(%s::bigint[])"
    )
    return sql, (*args, list(keys))


def chunk_positions_query(keys: Sequence[int]) -> Query:
    return "SELECT key, document_key, chunk_index FROM chunks WHERE key = ANY(%s::bigint[])", (list(keys),)


def positions_from(rows: Sequence[Row]) -> dict[int, tuple[int, int]]:
    return {row[0]: (row[1], row[2]) for row in rows}


def lone_chunks_query(keys: Sequence[int]) -> Query:
    sql = (
        "SELECT c.key FROM chunks c WHERE c.key = ANY(%s::bigint[]) AND c.chunk_index = 0 AND NOT EXISTS "
        "(SELECT 1 FROM chunks n WHERE n.document_key = c.document_key AND n.chunk_index = 1)"
    )
    return sql, (list(keys),)


def _chunk_scope(workspace: str, namespace: str | None) -> tuple[str, list[str]]:
    """The WHERE clause (over documents ``d``) that keeps a chunk lookup inside a workspace (and namespace)."""
    if namespace is None:
        return "d.workspace = %s", [workspace]
    return "d.workspace = %s AND d.namespace = %s", [workspace, namespace]
