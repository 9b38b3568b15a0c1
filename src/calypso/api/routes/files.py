"""/v1/files in OpenAI's Files API shape; every file is a document in the default namespace."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi.responses import Response

from calypso.api.auth import current_workspace
from calypso.api.deps import check_limit, check_order, knowledge_base, read_upload
from calypso.api.file_headers import user_file_headers
from calypso.api.serialize import file_object, list_object
from calypso.citations.links import verify
from calypso.errors import InvalidRequest, PermissionDenied
from calypso.knowledge import KnowledgeBase

router = APIRouter(prefix="/v1/files", tags=["files"])

ACCEPTED_PURPOSES = ("assistants", "user_data")


@router.post("")
def create_file(
    file: UploadFile | None = File(None),
    purpose: str | None = Form(None),
    kb: KnowledgeBase = Depends(knowledge_base),
    workspace: str = Depends(current_workspace),
) -> dict:
    if purpose not in ACCEPTED_PURPOSES:
        raise InvalidRequest(
            f"purpose must be one of {', '.join(ACCEPTED_PURPOSES)}; got {purpose!r}.", param="purpose"
        )
    data, filename = read_upload(file, kb.settings.max_upload_bytes)
    result = kb.ingest(data, filename, None, media_type=file.content_type if file else None, workspace=workspace)
    return file_object(result.document)


@router.get("")
def list_files(
    purpose: str | None = None,
    limit: int = Query(20),
    after: str | None = None,
    order: str = "desc",
    kb: KnowledgeBase = Depends(knowledge_base),
    workspace: str = Depends(current_workspace),
) -> dict:
    if purpose is not None and purpose not in ACCEPTED_PURPOSES:
        return list_object([], False)
    after_document = kb.get_by_file_id(after, workspace).id if after else None
    page = kb.store.list_documents(workspace, None, check_limit(limit), after_document, check_order(order))
    return list_object([file_object(d) for d in page.items], page.has_more)


@router.get("/{file_id}")
def get_file(
    file_id: str, kb: KnowledgeBase = Depends(knowledge_base), workspace: str = Depends(current_workspace)
) -> dict:
    return file_object(kb.get_by_file_id(file_id, workspace))


@router.get("/{file_id}/content")
def file_content(
    file_id: str,
    request: Request,
    expires: int | None = None,
    signature: str | None = None,
    kb: KnowledgeBase = Depends(knowledge_base),
) -> Response:
    """The original bytes, with the stored media type: with an API key, or with a signed link's expires+signature."""
    if expires is not None or signature is not None:
        doc = kb.store.find_file(file_id)
        secret = request.app.state.signing_secret
        if (
            doc is None
            or expires is None
            or not signature
            or not verify(secret, file_id, doc.workspace, expires, signature)
        ):
            raise PermissionDenied(
                "This source link is invalid or has expired; ask for the answer again to get a fresh link.",
                code="invalid_signature",
            )
    else:
        doc = kb.get_by_file_id(file_id, current_workspace(request))
    content = kb.store.read_content(doc.workspace, doc.id)
    return Response(content, media_type=doc.media_type, headers=user_file_headers(doc.filename, doc.media_type))


@router.delete("/{file_id}")
def delete_file(
    file_id: str, kb: KnowledgeBase = Depends(knowledge_base), workspace: str = Depends(current_workspace)
) -> dict:
    doc = kb.get_by_file_id(file_id, workspace)
    kb.delete(doc.id, workspace)
    return {"id": file_id, "object": "file", "deleted": True}


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(name.rsplit("/", 1)[-1] or "file", safe="")
