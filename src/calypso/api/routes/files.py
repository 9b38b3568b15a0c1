"""/v1/files in OpenAI's Files API shape; every file is a document in the default namespace."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi.responses import Response

from calypso.api.deps import check_limit, check_order, knowledge_base, read_upload
from calypso.api.serialize import file_object, list_object
from calypso.errors import InvalidRequest
from calypso.knowledge import KnowledgeBase

router = APIRouter(prefix="/v1/files", tags=["files"])

ACCEPTED_PURPOSES = ("assistants", "user_data")


@router.post("")
def create_file(
    file: UploadFile | None = File(None),
    purpose: str | None = Form(None),
    kb: KnowledgeBase = Depends(knowledge_base),
) -> dict:
    if purpose not in ACCEPTED_PURPOSES:
        raise InvalidRequest(
            f"purpose must be one of {', '.join(ACCEPTED_PURPOSES)}; got {purpose!r}.", param="purpose"
        )
    data, filename = read_upload(file, kb.settings.max_upload_bytes)
    result = kb.ingest(data, filename, None, media_type=file.content_type if file else None)
    return file_object(result.document)


@router.get("")
def list_files(
    purpose: str | None = None,
    limit: int = Query(20),
    after: str | None = None,
    order: str = "desc",
    kb: KnowledgeBase = Depends(knowledge_base),
) -> dict:
    if purpose is not None and purpose not in ACCEPTED_PURPOSES:
        return list_object([], False)
    after_document = kb.get_by_file_id(after).id if after else None
    page = kb.store.list_documents("default", None, check_limit(limit), after_document, check_order(order))
    return list_object([file_object(d) for d in page.items], page.has_more)


@router.get("/{file_id}")
def get_file(file_id: str, kb: KnowledgeBase = Depends(knowledge_base)) -> dict:
    return file_object(kb.get_by_file_id(file_id))


@router.get("/{file_id}/content")
def file_content(file_id: str, kb: KnowledgeBase = Depends(knowledge_base)) -> Response:
    """The original bytes, with the stored media type."""
    doc = kb.get_by_file_id(file_id)
    content = kb.store.read_content(doc.workspace, doc.id)
    disposition = f"inline; filename*=UTF-8''{_quote(doc.filename)}"
    return Response(content, media_type=doc.media_type, headers={"Content-Disposition": disposition})


@router.delete("/{file_id}")
def delete_file(file_id: str, kb: KnowledgeBase = Depends(knowledge_base)) -> dict:
    doc = kb.get_by_file_id(file_id)
    kb.delete(doc.id)
    return {"id": file_id, "object": "file", "deleted": True}


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name.rsplit("/", 1)[-1] or "file", safe="")
