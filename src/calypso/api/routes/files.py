"""/v1/files in OpenAI's Files API shape; every file is a document in the default namespace.

``files.create`` answers at once (``status: uploaded``); the file is ``processed`` once its ingestion
job completed, or ``error`` with ``status_details`` when it failed. The SDK has no way to wait: poll
``files.retrieve``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import Response

from calypso.api.auth import Workspace, current_workspace
from calypso.api.deps import Documents, Ingestion, OrderParam, VectorStores, read_upload
from calypso.api.file_headers import user_file_headers
from calypso.api.ranges import byte_range
from calypso.api.serialize import file_object, list_object
from calypso.errors import InvalidRequest
from calypso.services.ingestion import Upload

router = APIRouter(prefix="/v1/files", tags=["files"])

Purpose = Literal["assistants", "user_data"]
ACCEPTED_PURPOSES = get_args(Purpose)
MIN_EXPIRY, MAX_EXPIRY = 3600, 2_592_000  # OpenAI's bounds on expires_after.seconds: an hour, 30 days
# OpenAI's files.list pages up to 10,000 files at a time (other lists stop at 100).
FilesLimit = Annotated[int, Query(ge=1, le=10_000, description="How many to return, 1 to 10,000.")]


@router.post("")
def create_file(
    ingestion: Ingestion,
    workspace: Workspace,
    file: UploadFile = File(...),
    purpose: Purpose = Form(...),
    # OpenAI's expires_after, as its SDKs send it in a multipart form (expires_after[anchor], [seconds]).
    anchor: Literal["created_at"] | None = Form(None, alias="expires_after[anchor]"),
    seconds: int | None = Form(
        None,
        alias="expires_after[seconds]",
        ge=MIN_EXPIRY,
        le=MAX_EXPIRY,
        description="With expires_after[anchor]: the file is deleted this many seconds after upload.",
    ),
) -> dict[str, Any]:
    expires_after = expiry_seconds(anchor, seconds)
    data, filename = read_upload(file, ingestion.settings.max_upload_bytes)
    upload = Upload(
        data,
        filename,
        media_type=file.content_type,
        workspace=workspace,
        purpose=purpose,
        expires_after_seconds=expires_after,
    )
    result = ingestion.submit(upload)
    return file_object(result.document)


def expiry_seconds(anchor: str | None, seconds: int | None) -> int | None:
    """OpenAI's ``expires_after {anchor, seconds}``: both or neither (the form fields' types check each)."""
    if anchor is None and seconds is None:
        return None
    for name, value in (("anchor", anchor), ("seconds", seconds)):
        if value is None:
            raise InvalidRequest(
                f"Missing required parameter: 'expires_after.{name}'.",
                param=f"expires_after.{name}",
                code="missing_required_parameter",
            )
    return seconds


@router.get("")
def list_files(
    documents: Documents,
    workspace: Workspace,
    purpose: str | None = None,
    limit: FilesLimit = 10_000,
    after: str | None = None,
    order: OrderParam = "desc",
) -> dict[str, Any]:
    if purpose is not None and purpose not in ACCEPTED_PURPOSES:
        return list_object([], False)  # OpenAI lists nothing for a purpose no file here can have
    page = documents.list_files(limit, after, order, workspace=workspace, purpose=purpose)
    return list_object([file_object(d) for d in page.items], page.has_more)


@router.head("/{file_id}", include_in_schema=False)  # a link to a file: HEAD as link checkers send it
@router.get("/{file_id}")
def get_file(file_id: str, documents: Documents, workspace: Workspace) -> dict[str, Any]:
    return file_object(documents.get_by_file_id(file_id, workspace))


@router.head("/{file_id}/content", include_in_schema=False)  # the GET below, without its body
@router.get("/{file_id}/content")
def file_content(
    file_id: str,
    request: Request,
    documents: Documents,
    expires: int | None = None,
    signature: str | None = None,
) -> Response:
    """The original bytes, with the stored media type: with an API key, or with a signed link's expires+signature.

    HEAD answers the same headers without the body; a ``Range`` request gets 206 with those bytes.
    """
    if expires is not None or signature is not None:
        document = documents.signed_file(file_id, expires, signature)
    else:
        document = documents.get_by_file_id(file_id, current_workspace(request))
    data = documents.content(document)
    headers = {**user_file_headers(document.filename, document.media_type), "Accept-Ranges": "bytes"}
    status = 200
    selected = byte_range(request.headers.get("range"), len(data))
    if selected is not None:
        start, end = selected
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
        data, status = data[start:end], 206
    if request.method == "HEAD":
        # Starlette sends no body for HEAD but would compute Content-Length from the empty one.
        headers["Content-Length"] = str(len(data))
        return Response(None, status_code=status, media_type=document.media_type, headers=headers)
    return Response(data, status_code=status, media_type=document.media_type, headers=headers)


@router.delete("/{file_id}")
def delete_file(file_id: str, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    """Delete the file and remove it from every vector store it was attached to, as OpenAI does."""
    stores.delete_everywhere(workspace, file_id)
    return {"id": file_id, "object": "file", "deleted": True}
