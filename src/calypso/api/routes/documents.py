"""/v1/documents: upload, crawl, list, read, chunks, cancel, delete.

An upload or crawl answers at once with the document ``in_progress``; ``?wait=true`` answers only when
its ingestion ended (``completed``, or the error a failed one raised, nothing stored).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, File, Form, Query, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from calypso.api.auth import Workspace
from calypso.api.deps import Documents, Ingestion, Limit, OrderParam, read_upload
from calypso.api.schemas.bounds import Attributes
from calypso.api.serialize import chunk_object, document_object, list_object
from calypso.api.validation import form_json_field
from calypso.models import Document
from calypso.scope import NAME_SCHEMA, check_namespace
from calypso.services.documents import DocumentService
from calypso.services.ingestion import Upload

router = APIRouter(prefix="/v1/documents", tags=["documents"])


_ATTRIBUTES: TypeAdapter[dict[str, Any]] = TypeAdapter(Attributes)
WAIT = Query(False, description="Answer only when ingestion ended: completed, or the error that failed it.")


def _document_json(documents: DocumentService, doc: Document) -> dict[str, Any]:
    return _documents_json(documents, [doc])[0]


def _documents_json(documents: DocumentService, docs: list[Document]) -> list[dict[str, Any]]:
    return [
        document_object(s.document, s.job, s.embedded, s.model, workers=s.workers) for s in documents.statuses(docs)
    ]


class CrawlRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(pattern=r"^[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#]+")  # the host's address is checked when fetched
    namespace: str | None = Field(None, json_schema_extra=NAME_SCHEMA)
    metadata: Attributes | None = None


@router.post("")
def upload_document(
    documents: Documents,
    ingestion: Ingestion,
    workspace: Workspace,
    file: UploadFile = File(...),
    namespace: str | None = Form(None, json_schema_extra=NAME_SCHEMA),
    metadata: str | None = Form(None),
    wait: bool = WAIT,
) -> JSONResponse:
    """Upload one file into a namespace (default `general`); identical bytes return the existing document."""
    check_namespace(ingestion.settings.namespace_or_default(namespace))  # before reading a large body
    data, filename = read_upload(file, ingestion.settings.max_upload_bytes)
    attributes = form_json_field(metadata, "metadata", _ATTRIBUTES) or {}
    upload = Upload(data, filename, namespace, media_type=file.content_type, metadata=attributes, workspace=workspace)
    result = ingestion.ingest(upload, wait=wait)
    return JSONResponse(_document_json(documents, result.document), status_code=201 if result.created else 200)


@router.post("/crawl")
def crawl_document(
    body: CrawlRequest, documents: Documents, ingestion: Ingestion, workspace: Workspace, wait: bool = WAIT
) -> JSONResponse:
    """Fetch one http(s) page (now) and store it with its URL as the filename (in a job)."""
    result = ingestion.crawl(body.url, body.namespace, metadata=body.metadata, workspace=workspace, wait=wait)
    return JSONResponse(_document_json(documents, result.document), status_code=201 if result.created else 200)


@router.get("")
def list_documents(
    documents: Documents,
    workspace: Workspace,
    namespace: str | None = Query(None, json_schema_extra=NAME_SCHEMA),
    limit: Limit = 20,
    after: str | None = None,
    order: OrderParam = "desc",
) -> dict[str, Any]:
    page = documents.list_documents(namespace, limit, after, order, workspace=workspace)
    return list_object(_documents_json(documents, page.items), page.has_more)


@router.head("/{document_id}", include_in_schema=False)  # the file's link in the documents dialect
@router.get("/{document_id}")
def get_document(document_id: str, documents: Documents, workspace: Workspace) -> dict[str, Any]:
    return _document_json(documents, documents.get(document_id, workspace))


@router.get("/{document_id}/chunks")
def list_chunks(
    document_id: str,
    documents: Documents,
    workspace: Workspace,
    limit: Limit = 100,
    after: int | None = Query(None, ge=-1, le=2**62),
) -> dict[str, Any]:
    """Chunks in `chunk_index` order; page with `after` = the last `chunk_index` seen. Each says where it is
    (`locator_label`: "p. 4", "slide 3", `'Segments'!A4:F19`, a heading path) as search results do."""
    document = documents.get(document_id, workspace)
    page = documents.chunks(document_id, limit, after, workspace=workspace)
    return list_object([chunk_object(c, document) for c in page.items], page.has_more, id_key="chunk_index")


@router.post("/{document_id}/cancel")
def cancel_document(document_id: str, ingestion: Ingestion, workspace: Workspace) -> dict[str, Any]:
    """Cancel an in-progress document (it stays, `cancelled`); 409 when its ingestion already ended."""
    return document_object(ingestion.cancel(document_id, workspace))


@router.delete("/{document_id}")
def delete_document(document_id: str, documents: Documents, workspace: Workspace) -> dict[str, Any]:
    """Delete a document (an in-progress one with its job); its chunks leave retrieval at once."""
    deleted = documents.delete(document_id, workspace)
    return {"id": deleted.id, "object": "document.deleted", "deleted": True}
