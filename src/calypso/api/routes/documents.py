"""/v1/documents: upload, crawl, list, read, chunks, delete."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from calypso.api.auth import current_workspace
from calypso.api.deps import check_limit, check_order, knowledge_base, read_upload
from calypso.api.serialize import chunk_object, document_object, list_object
from calypso.api.validation import form_json_object
from calypso.ingest.crawl import fetch_page
from calypso.knowledge import KnowledgeBase, check_namespace

router = APIRouter(prefix="/v1/documents", tags=["documents"])


class CrawlRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str
    namespace: str | None = None
    metadata: dict | None = None


@router.post("")
def upload_document(
    file: UploadFile = File(...),
    namespace: str | None = Form(None),
    metadata: str | None = Form(None),
    kb: KnowledgeBase = Depends(knowledge_base),
    workspace: str = Depends(current_workspace),
) -> JSONResponse:
    """Upload one file into a namespace (default `general`); identical bytes return the existing document."""
    check_namespace(namespace or kb.settings.default_namespace)
    data, filename = read_upload(file, kb.settings.max_upload_bytes)
    result = kb.ingest(
        data,
        filename,
        namespace,
        media_type=file.content_type,
        metadata=form_json_object(metadata, "metadata"),
        workspace=workspace,
    )
    return JSONResponse(document_object(result.document), status_code=201 if result.created else 200)


@router.post("/crawl")
def crawl_document(
    body: CrawlRequest, kb: KnowledgeBase = Depends(knowledge_base), workspace: str = Depends(current_workspace)
) -> JSONResponse:
    """Fetch one http(s) page and store it with its URL as the filename."""
    namespace = check_namespace(body.namespace or kb.settings.default_namespace)
    settings = kb.settings
    page = fetch_page(
        body.url,
        timeout=settings.crawl_timeout_seconds,
        max_bytes=settings.max_upload_bytes,
        allow_private=settings.crawl_allow_private,
    )
    result = kb.ingest(
        page.content,
        page.url,
        namespace,
        media_type=page.media_type,
        metadata=body.metadata,
        source_url=page.url,
        workspace=workspace,
    )
    return JSONResponse(document_object(result.document), status_code=201 if result.created else 200)


@router.get("")
def list_documents(
    namespace: str | None = None,
    limit: int = Query(20),
    after: str | None = None,
    order: str = "desc",
    kb: KnowledgeBase = Depends(knowledge_base),
    workspace: str = Depends(current_workspace),
) -> dict:
    if namespace is not None:
        check_namespace(namespace)
    page = kb.store.list_documents(workspace, namespace, check_limit(limit), after, check_order(order))
    return list_object([document_object(d) for d in page.items], page.has_more)


@router.get("/{document_id}")
def get_document(
    document_id: str, kb: KnowledgeBase = Depends(knowledge_base), workspace: str = Depends(current_workspace)
) -> dict:
    return document_object(kb.get(document_id, workspace))


@router.get("/{document_id}/chunks")
def list_chunks(
    document_id: str,
    limit: int = Query(100),
    after: int | None = None,
    kb: KnowledgeBase = Depends(knowledge_base),
    workspace: str = Depends(current_workspace),
) -> dict:
    """Chunks in `chunk_index` order; page with `after` = the last `chunk_index` seen."""
    kb.get(document_id, workspace)
    page = kb.store.list_chunks(workspace, document_id, min(check_limit(limit), 100), after)
    data = [chunk_object(c) for c in page.items]
    return list_object(data, page.has_more, id_key="chunk_index")


@router.delete("/{document_id}")
def delete_document(
    document_id: str, kb: KnowledgeBase = Depends(knowledge_base), workspace: str = Depends(current_workspace)
) -> dict:
    """Delete a document; its chunks leave retrieval at once."""
    deleted = kb.delete(document_id, workspace)
    return {"id": deleted.id, "object": "document.deleted", "deleted": True}
