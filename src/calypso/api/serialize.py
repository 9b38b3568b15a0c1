"""Wire shapes of documents, files, chunks and search results."""

from __future__ import annotations

from typing import Any

from calypso.locators import extent
from calypso.models import Document, IngestJob, Passage, StoredChunk

# OpenAI's FileObject status for each document status.
_FILE_STATUS = {"in_progress": "uploaded", "completed": "processed", "failed": "error", "cancelled": "error"}


def _last_error(doc: Document) -> dict[str, Any] | None:
    # Only OpenAI's two fields: the store keeps more (the original error, for callers that waited).
    error = doc.last_error
    return {"code": error.get("code"), "message": error.get("message")} if error else None


NO_WORKER = (
    "No ingestion worker runs (CALYPSO_INGEST_WORKERS=0 on SQLite): this upload waits until a server with "
    "workers starts on this data directory, or upload it again with ?wait=true."
)


def document_object(
    doc: Document,
    job: IngestJob | None = None,
    embedded: int | None = None,
    model: str | None = None,
    *,
    workers: bool = True,
) -> dict[str, Any]:
    """A document; ``job`` (its ingestion job, if in progress) gives ``progress``; ``embedded`` passages of
    ``model`` give ``embeddings`` (null when search is keyword-only or the document is not completed).
    ``workers`` False: nothing can take a queued job, and its progress says so."""
    embeddings = None
    if model is not None and embedded is not None and doc.status == "completed":
        embeddings = {
            "model": model,
            "status": "completed" if embedded >= doc.chunk_count else "in_progress",
            "passages_embedded": embedded,
            "passages": doc.chunk_count,
        }
    progress = None
    if doc.status == "in_progress":
        queued = job is None or job.lease_owner is None
        progress = {
            "state": "queued" if queued else "parsing",
            "pages_parsed": job.pages_parsed if job else 0,
            "passages_written": job.passages_written if job else 0,
            **({"detail": NO_WORKER} if queued and not workers else {}),
        }
    return {
        "id": doc.id,
        "object": "document",
        "file_id": doc.file_id,
        "namespace": doc.namespace,
        "filename": doc.filename,
        "title": doc.title,
        "media_type": doc.media_type,
        "bytes": doc.bytes,
        "sha256": doc.sha256,
        "page_count": doc.page_count,
        "chunk_count": doc.chunk_count,
        # "12 slides", "3 sheets", "4 sections", "15 pages" ("" when nothing a reader could count): the playground
        # and the CLI say a document's size in its own units, never "1 page" for a Markdown file.
        "extent": extent(doc.media_type, doc.page_count, doc.metadata) if doc.status == "completed" else "",
        "source_url": doc.source_url,
        "status": doc.status,
        "last_error": _last_error(doc),
        "progress": progress,
        "embeddings": embeddings,
        "created_at": doc.created_at,
        "metadata": doc.metadata,
    }


def file_object(doc: Document) -> dict[str, Any]:
    """OpenAI's FileObject; the document behind it is named in ``document_id``."""
    return {
        "id": doc.file_id,
        "object": "file",
        "bytes": doc.bytes,
        "created_at": doc.created_at,
        "filename": doc.filename,
        "purpose": doc.purpose or "assistants",
        "status": _FILE_STATUS[doc.status],
        "status_details": (doc.last_error or {}).get("message")
        if doc.status == "failed"
        else ("Ingestion was cancelled." if doc.status == "cancelled" else None),
        "expires_at": doc.expires_at,
        "document_id": doc.id,
        "namespace": doc.namespace,
    }


def chunk_object(stored: StoredChunk, document: Document | None = None) -> dict[str, Any]:
    """A stored passage; with its ``document``, ``locator_label`` says where it is, as a search result's does."""
    chunk = stored.chunk
    located = {} if document is None else {"locator_label": Passage(document, chunk, 0.0).locator_label}
    return {
        "object": "document.chunk",
        "document_id": stored.document_id,
        "chunk_index": chunk.chunk_index,
        "text": chunk.text,
        "start_index": chunk.start,
        "end_index": chunk.end,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "page_labels": list(chunk.page_labels),
        "heading_path": list(chunk.heading_path),
        **located,
        **({"table_header": chunk.table_header} if chunk.table_header else {}),
    }


def passage_object(passage: Passage) -> dict[str, Any]:
    """A search hit, in the shape of OpenAI's vector store search result."""
    doc, chunk = passage.document, passage.chunk
    return {
        "file_id": doc.file_id,
        "filename": doc.filename,
        "score": round(passage.score, 6),
        "attributes": {
            "document_id": doc.id,
            "namespace": doc.namespace,
            "chunk_index": chunk.chunk_index,
            # Page fields only where the document has pages: a DOCX or web page is located by headings.
            **({"page_number": chunk.page_start, "page_end": chunk.page_end} if passage.has_pages else {}),
            **({"page_label": passage.page_label} if passage.has_pages else {}),
            "locator_label": passage.locator_label,
            "label": passage.display_label,
            "heading_path": list(chunk.heading_path),
            "modality": chunk.modality,  # "ocr": recognised from a scan or image, so a quote may hold misreadings
            **({"ocr_confidence": chunk.confidence} if chunk.confidence is not None else {}),
            **({"table_header": chunk.table_header} if chunk.table_header else {}),
            "start_index": chunk.start,
            "end_index": chunk.end,
            # The raw values ``score`` (0..1) comes from, for debugging and tuning a score_threshold.
            **({"bm25": round(passage.keyword_score, 6)} if passage.keyword_score is not None else {}),
            **({"cosine": round(passage.vector_score, 6)} if passage.vector_score is not None else {}),
        },
        "content": [{"type": "text", "text": chunk.text}],
    }


def list_object(data: list[dict[str, Any]], has_more: bool, id_key: str = "id") -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0][id_key] if data else None,
        "last_id": data[-1][id_key] if data else None,
        "has_more": has_more,
    }
