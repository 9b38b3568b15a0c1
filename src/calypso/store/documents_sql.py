"""``DocumentStore`` reads in SQL both backends speak; each backend keeps its writes and its id-list lookups.

Written once with ``?`` placeholders (``_sql`` swaps in the backend's ``mark``). What differs stays in
``sqlite/documents.py`` and ``postgres/documents.py``: how a document is inserted (``lastrowid`` or
``RETURNING``, a duplicate checked in the write or by ``ON CONFLICT``), how passages go in (``executemany``
or ``COPY``), where the bytes live, lookups by a list of ids (``IN (…)`` in batches with SQLite's planner
hints, or ``= ANY(array)``), how a change is recorded and waited for, and how a row decodes (JSON text
in SQLite, ``jsonb`` and arrays in PostgreSQL).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from calypso.errors import NotFound
from calypso.models import (
    Chunk,
    Document,
    Listing,
    Order,
    Page,
    Section,
    StaticChunking,
    StoredChunk,
    WordBox,
)
from calypso.store.shared_sql import D, SharedSQL

DOC_COLUMNS = (
    "key, id, file_id, workspace, namespace, filename, media_type, bytes, sha256, created_at, "
    "page_count, chunk_count, title, source_url, metadata, status, last_error, chunk_max_tokens, chunk_overlap_tokens, "
    "purpose, expires_at"
)
CHUNK_COLUMNS = (
    'c.key, d.id, c.chunk_index, c.text, c.start, c."end", c.page_start, c.page_end, c.page_labels, c.heading_path, '
    "c.modality, c.sections, c.confidence, c.table_header"
)

# A passage and its document in one row (``get_passages``): the chunk's columns, then the document's.
PASSAGE_COLUMNS = CHUNK_COLUMNS + ", " + ", ".join("d." + c.strip() for c in DOC_COLUMNS.split(","))
_CHUNK_WIDTH = len(CHUNK_COLUMNS.split(","))


def chunking_columns(chunking: StaticChunking | None) -> tuple[int | None, int | None]:
    """A document's chunking as its two nullable columns (both backends)."""
    if chunking is None:
        return None, None
    return chunking.max_chunk_size_tokens, chunking.chunk_overlap_tokens


def chunking_from_columns(max_tokens: int | None, overlap_tokens: int | None) -> StaticChunking | None:
    return None if max_tokens is None else StaticChunking(int(max_tokens), int(overlap_tokens or 0))


def passages_from_rows(
    rows: Sequence[Sequence[Any]], loads: Callable[[Any], Any]
) -> dict[int, tuple[StoredChunk, Document]]:
    """``PASSAGE_COLUMNS`` rows as (chunk, document) by chunk key; each document decoded once."""
    documents: dict[str, Document] = {}
    found: dict[int, tuple[StoredChunk, Document]] = {}
    for row in rows:
        chunk = chunk_from_columns(row[:_CHUNK_WIDTH], loads)
        document = documents.get(chunk.document_id)
        if document is None:
            document = documents[chunk.document_id] = document_from_columns(row[_CHUNK_WIDTH:], loads)
        found[chunk.key] = (chunk, document)
    return found


def document_from_columns(row: Sequence[Any], loads: Callable[[Any], Any]) -> Document:
    """A document from its ``DOC_COLUMNS``; ``loads`` reads a JSON column as the backend returns it."""
    _key, doc_id, file_id, workspace, namespace, filename, media_type, size, sha256, created_at = row[:10]
    page_count, chunk_count, title, source_url, metadata, status, last_error = row[10:17]
    max_tokens, overlap_tokens, purpose, expires_at = row[17:]
    return Document(
        id=doc_id,
        file_id=file_id,
        workspace=workspace,
        namespace=namespace,
        filename=filename,
        media_type=media_type,
        bytes=size,
        sha256=sha256,
        created_at=created_at,
        page_count=page_count,
        chunk_count=chunk_count,
        title=title,
        source_url=source_url,
        metadata=loads(metadata),
        status=status,
        last_error=loads(last_error) if last_error is not None else None,
        chunking=chunking_from_columns(max_tokens, overlap_tokens),
        purpose=purpose,
        expires_at=expires_at,
    )


def chunk_from_columns(row: Sequence[Any], loads: Callable[[Any], Any]) -> StoredChunk:
    """A passage from its ``CHUNK_COLUMNS``; ``loads`` reads a JSON column as the backend returns it."""
    key, document_id, *columns = row
    index, text, start, end, page_start, page_end, labels, path, modality, sections, confidence, table_header = columns
    chunk = Chunk(
        index,
        text,
        start,
        end,
        page_start,
        page_end,
        tuple(loads(labels)),
        tuple(loads(path)),
        sections=tuple(Section(offset, tuple(p)) for offset, p in loads(sections)) if sections is not None else (),
        modality=modality,
        confidence=confidence,
        table_header=table_header or "",
    )
    return StoredChunk(key=key, document_id=document_id, chunk=chunk)


def sections_value(chunk: Chunk) -> list[list[Any]] | None:
    """A passage's sections as stored (JSON): ``[[offset, [heading, …]], …]``, None when it has none."""
    return [[s.offset, list(s.heading_path)] for s in chunk.sections] if chunk.sections else None


def layout_value(page: Page) -> dict[str, Any] | None:
    """What a page holds beyond its span, as stored (JSON); None for extracted text."""
    if page.modality == "text" and page.confidence is None and not page.words:
        return None
    words = [[w.start, w.end, w.x0, w.y0, w.x1, w.y1] for w in page.words]
    return {"modality": page.modality, "confidence": page.confidence, "words": words}


def page_from_columns(row: Sequence[Any], loads: Callable[[Any], Any]) -> Page:
    number, label, start, end, layout = row
    if layout is None:
        return Page(number, label, start, end)
    layout = loads(layout)
    words = tuple(WordBox(*word) for word in layout.get("words", ()))
    return Page(number, label, start, end, layout.get("modality", "text"), layout.get("confidence"), words)


class DocumentsSQL(SharedSQL[D]):
    """The ``DocumentStore`` methods whose SQL is the same on both backends.

    A backend sets ``database`` and ``mark`` and says how it returns a JSON column (``_loads``).
    """

    def _loads(self, value: Any) -> Any:
        raise NotImplementedError

    def _document(self, row: Any) -> Document:
        return document_from_columns(row, self._loads)

    def _chunk(self, row: Any) -> StoredChunk:
        return chunk_from_columns(row, self._loads)

    def _one_document(self, where: str, args: tuple[object, ...]) -> Document | None:
        row = self.database.row(self._sql(f"SELECT {DOC_COLUMNS} FROM documents WHERE {where}"), args)
        return self._document(row) if row else None

    def status_counts(self) -> dict[str, int]:
        return {
            status: int(n) for status, n in self.database.rows("SELECT status, COUNT(*) FROM documents GROUP BY status")
        }

    def find_duplicate(self, workspace: str, namespace: str, sha256: str) -> Document | None:
        return self._one_document("workspace = ? AND namespace = ? AND sha256 = ?", (workspace, namespace, sha256))

    def get_document(self, workspace: str, document_id: str) -> Document | None:
        return self._one_document("workspace = ? AND id = ?", (workspace, document_id))

    def get_document_by_file_id(self, workspace: str, file_id: str) -> Document | None:
        return self._one_document("workspace = ? AND file_id = ?", (workspace, file_id))

    def find_file(self, file_id: str) -> Document | None:
        """A file in any workspace: only for signed links, whose signature names the workspace."""
        return self._one_document("file_id = ?", (file_id,))

    def expired_files(self, now: int, limit: int = 100) -> list[tuple[str, str]]:
        """(workspace, file_id) of up to ``limit`` files whose expires_at has passed, for the sweep."""
        rows = self.database.rows(
            self._sql("SELECT workspace, file_id FROM documents WHERE expires_at <= ? ORDER BY expires_at LIMIT ?"),
            (now, limit),
        )
        return [(str(workspace), str(file_id)) for workspace, file_id in rows]

    def document_key(self, workspace: str, document_id: str) -> int | None:
        row = self.database.row(
            self._sql("SELECT key FROM documents WHERE workspace = ? AND id = ?"), (workspace, document_id)
        )
        return int(row[0]) if row else None

    def list_documents(
        self,
        workspace: str,
        namespace: str | None,
        limit: int,
        after: str | None,
        order: Order = "desc",
        *,
        without_copies: bool = False,
        purpose: str | None = None,
    ) -> Listing[Document]:
        # An expired file is gone for every list, whether or not the sweep deleted it yet.
        where = ["workspace = ?", "(expires_at IS NULL OR expires_at > ?)"]
        args: list[object] = [workspace, int(time.time())]
        if purpose is not None:
            where.append("COALESCE(purpose, 'assistants') = ?")
            args.append(purpose)
        if without_copies:
            where.append(
                "NOT EXISTS (SELECT 1 FROM vector_store_files l WHERE l.document_key = documents.key "
                "AND l.file_id <> documents.file_id)"
            )
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
        rows = self.database.rows(
            self._sql(
                f"SELECT {DOC_COLUMNS} FROM documents WHERE {' AND '.join(where)} ORDER BY key {direction} LIMIT ?"
            ),
            (*args, limit + 1),
        )
        return Listing([self._document(r) for r in rows[:limit]], has_more=len(rows) > limit)

    def list_chunks(self, workspace: str, document_id: str, limit: int, after: int | None) -> Listing[StoredChunk]:
        rows = self.database.rows(
            self._sql(
                f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN documents d ON d.key = c.document_key "
                "WHERE d.workspace = ? AND d.id = ? AND c.chunk_index > ? ORDER BY c.chunk_index LIMIT ?"
            ),
            (workspace, document_id, -1 if after is None else after, limit + 1),
        )
        return Listing([self._chunk(r) for r in rows[:limit]], has_more=len(rows) > limit)

    def get_pages(self, workspace: str, document_id: str) -> list[Page]:
        rows = self.database.rows(
            self._sql(
                'SELECT p.number, p.label, p.start, p."end", p.layout FROM pages p JOIN documents d ON d.key = p.document_key '
                "WHERE d.workspace = ? AND d.id = ? ORDER BY p.number"
            ),
            (workspace, document_id),
        )
        return [page_from_columns(row, self._loads) for row in rows]

    def namespaces(self, workspace: str) -> list[str]:
        rows = self.database.rows(
            self._sql("SELECT DISTINCT namespace FROM documents WHERE workspace = ? ORDER BY namespace"), (workspace,)
        )
        return [row[0] for row in rows]
