"""Calypso objects as xAI protobuf messages (collections, documents, files), and the request enums back."""

from __future__ import annotations

from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from calypso.errors import InvalidRequest
from calypso.grpc_api.protos import collections_pb2, files_pb2, shared_pb2
from calypso.models import Document, Order, RankingOptions
from calypso.services.vector_stores import StoreFile, StoreState

# Documents are ingested in one step: there is no chunked/embedding/writing stage to show.
_STATUS = {
    "in_progress": collections_pb2.DOCUMENT_STATUS_PROCESSING,
    "completed": collections_pb2.DOCUMENT_STATUS_PROCESSED,
    "failed": collections_pb2.DOCUMENT_STATUS_FAILED,
    "cancelled": collections_pb2.DOCUMENT_STATUS_FAILED,
}


def timestamp(seconds: int | float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromSeconds(int(seconds))
    return stamp


def order(value: int, default: Order = "desc") -> Order:
    if value == shared_pb2.ORDERING_ASCENDING:
        return "asc"
    if value == shared_pb2.ORDERING_DESCENDING:
        return "desc"
    return default


def limit(value: int, default: int = 100, most: int = 100) -> int:
    if value < 0 or value > most:
        raise InvalidRequest(f"limit must be from 1 to {most} (0: the default, {default}).", param="limit")
    return value or default


def offset_token(token: str) -> int:
    """Pagination tokens are offsets into the sorted listing (what this server handed out)."""
    if not token:
        return 0
    if not token.isdigit():
        raise InvalidRequest(
            "pagination_token is not one this server gave out; pass the previous response's pagination_token.",
            param="pagination_token",
        )
    return int(token)


def ranking(message: Any) -> RankingOptions | None:
    """xAI's retrieval mode (a ``retrieval_mode`` oneof on CollectionsSearch or SearchRequest) as ranking weights:
    keyword is text only, semantic embeddings only, hybrid (the default) the server's fusion."""
    mode = message.WhichOneof("retrieval_mode")
    if mode == "keyword_retrieval":
        return RankingOptions(text_weight=1.0, embedding_weight=0.0)
    if mode == "semantic_retrieval":
        return RankingOptions(text_weight=0.0, embedding_weight=1.0)
    return None


def collection(state: StoreState) -> collections_pb2.CollectionMetadata:
    store = state.store
    return collections_pb2.CollectionMetadata(
        collection_id=store.id,
        collection_name=store.name or "",
        created_at=timestamp(store.created_at),
        documents_count=state.file_counts["total"],
        collection_description=str(store.metadata.get("description", "")),
        total_file_size=state.usage_bytes,
    )


def file_metadata(file_id: str, document: Document) -> collections_pb2.FileMetadata:
    return collections_pb2.FileMetadata(
        file_id=file_id,
        name=document.filename,
        size_bytes=document.bytes,
        content_type=document.media_type,
        created_at=timestamp(document.created_at),
        hash=document.sha256,
        upload_status="UPLOADED",
        processing_status=document.status,
    )


def document(found: StoreFile) -> collections_pb2.DocumentMetadata:
    doc = found.document
    error = (doc.last_error or {}).get("message", "") if doc.status == "failed" else ""
    if doc.status == "cancelled":
        error = "Ingestion was cancelled."
    return collections_pb2.DocumentMetadata(
        file_metadata=file_metadata(found.link.file_id, doc),
        fields={str(k): str(v) for k, v in found.link.attributes.items()},
        status=_STATUS[doc.status],
        error_message=error,
        chunk_count=doc.chunk_count,
        chunks_processed_count=doc.chunk_count if doc.status == "completed" else 0,
    )


def file(doc: Document) -> files_pb2.File:
    return files_pb2.File(id=doc.file_id, filename=doc.filename, size=doc.bytes, created_at=timestamp(doc.created_at))
