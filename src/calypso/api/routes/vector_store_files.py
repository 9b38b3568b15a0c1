"""/v1/vector_stores/{id}/files and /file_batches in OpenAI's shape: a store's files and batches of them.

Files: attach a ``/v1/files`` id (with attributes), list (``filter`` by status), retrieve, update attributes,
delete, read the passages' text. File batches: create (``file_ids`` or ``files``), retrieve, cancel, list files.
The stores themselves and their search are ``vector_stores.py``.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from calypso.api.auth import Workspace
from calypso.api.deps import Limit, OrderParam, VectorStores
from calypso.api.schemas.bounds import Attributes
from calypso.api.schemas.vector_stores import ChunkingStrategy, chunking_request
from calypso.api.serialize import list_object
from calypso.errors import InvalidRequest, NotFound
from calypso.models import DocumentStatus, StaticChunking
from calypso.services.vector_stores import BatchState, StoreFile

router = APIRouter(prefix="/v1/vector_stores", tags=["vector_stores"])

# A file chunked by the server's own settings (characters, CALYPSO_CHUNK_SIZE; what "auto" means here)
# says so with OpenAI's "other" strategy: reporting OpenAI's auto (static 800/400 tokens) would be untrue.
OWN_CHUNKING = {"type": "other"}
MAX_BATCH_FILES = 2000  # OpenAI's limit per batch
POLL_AFTER_MS = 100  # small documents ingest in well under a second: the SDK's default is 1000
_ERROR_CODES = ("server_error", "unsupported_file", "invalid_file")


def chunking_object(chunking: StaticChunking | None) -> dict[str, Any]:
    if chunking is None:
        return OWN_CHUNKING
    return {
        "type": "static",
        "static": {
            "max_chunk_size_tokens": chunking.max_chunk_size_tokens,
            "chunk_overlap_tokens": chunking.chunk_overlap_tokens,
        },
    }


def file_object(found: StoreFile) -> dict[str, Any]:
    doc, link = found.document, found.link
    error = None
    if doc.status == "failed":
        code = (doc.last_error or {}).get("code")
        error = {
            "code": code if code in _ERROR_CODES else "server_error",
            "message": (doc.last_error or {}).get("message") or "Ingestion failed.",
        }
    return {
        "id": link.file_id,
        "object": "vector_store.file",
        "usage_bytes": doc.bytes,
        "created_at": doc.created_at,
        "vector_store_id": link.vector_store_id,
        "status": doc.status,
        "last_error": error,
        "chunking_strategy": chunking_object(doc.chunking),
        "attributes": link.attributes,
        "document_id": doc.id,
    }


class AttachFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file_id: str = Field(min_length=1)
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None


class UpdateFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    attributes: Attributes | None


# -- files ------------------------------------------------------------------------------------


@router.post("/{vector_store_id}/files")
def attach_file(vector_store_id: str, body: AttachFile, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    """Attach a file, chunked as ``chunking_strategy`` asks (``static`` in tokens; ``auto``: the server's own)."""
    chunking = chunking_request(body.chunking_strategy, "chunking_strategy")
    attributes = dict(body.attributes or {})
    return file_object(stores.attach(workspace, vector_store_id, body.file_id, attributes, chunking))


@router.get("/{vector_store_id}/files")
def list_files(
    vector_store_id: str,
    stores: VectorStores,
    workspace: Workspace,
    limit: Limit = 20,
    order: OrderParam = "desc",
    after: str | None = None,
    before: str | None = None,
    filter: Literal["in_progress", "completed", "failed", "cancelled"] | None = None,
) -> dict[str, Any]:
    status: DocumentStatus | None = filter
    page = stores.list_files(workspace, vector_store_id, limit, after, before, order, status)
    return list_object([file_object(f) for f in page.items], page.has_more)


@router.get("/{vector_store_id}/files/{file_id}")
def get_file(vector_store_id: str, file_id: str, stores: VectorStores, workspace: Workspace) -> JSONResponse:
    """The file; while it is in progress, ``openai-poll-after-ms`` tells the SDK's pollers to look again soon."""
    found = stores.get_file(workspace, vector_store_id, file_id)
    headers = {"openai-poll-after-ms": str(POLL_AFTER_MS)} if found.document.status == "in_progress" else None
    return JSONResponse(file_object(found), headers=headers)


@router.post("/{vector_store_id}/files/{file_id}")
def update_file(
    vector_store_id: str, file_id: str, body: UpdateFile, stores: VectorStores, workspace: Workspace
) -> dict[str, Any]:
    attributes = dict(body.attributes or {})
    return file_object(stores.update_file(workspace, vector_store_id, file_id, attributes))


@router.delete("/{vector_store_id}/files/{file_id}")
def delete_file(vector_store_id: str, file_id: str, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    """Remove the file from the store; its passages leave the store's search at once."""
    stores.delete_file(workspace, vector_store_id, file_id)
    return {"id": file_id, "object": "vector_store.file.deleted", "deleted": True}


@router.get("/{vector_store_id}/files/{file_id}/content")
def file_content(vector_store_id: str, file_id: str, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    """The file's passages' text, in order (one page)."""
    texts = stores.file_content(workspace, vector_store_id, file_id)
    return {
        "object": "vector_store.file_content.page",
        "data": [{"type": "text", "text": t} for t in texts],
        "has_more": False,
        "next_page": None,
    }


# -- file batches -----------------------------------------------------------------------------


def _list_given(name: str) -> dict[str, Any]:
    return {"required": [name], "properties": {name: {"type": "array"}}}


class CreateBatch(BaseModel):
    # Exactly one of the two lists (the route's 400 says so too).
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"oneOf": [_list_given("file_ids"), _list_given("files")]}
    )
    file_ids: list[str] | None = Field(None, min_length=1, max_length=MAX_BATCH_FILES)
    files: list[AttachFile] | None = Field(None, min_length=1, max_length=MAX_BATCH_FILES)  # each as attached alone
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None


def batch_object(state: BatchState) -> dict[str, Any]:
    batch = state.batch
    return {
        "id": batch.id,
        "object": "vector_store.files_batch",
        "created_at": batch.created_at,
        "vector_store_id": batch.vector_store_id,
        "status": state.status,
        "file_counts": state.file_counts,
    }


@router.post("/{vector_store_id}/file_batches")
def create_batch(vector_store_id: str, body: CreateBatch, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    """Attach several files: ``file_ids`` sharing ``attributes`` and ``chunking_strategy``, or ``files``
    each with its own (a file's chunking_strategy overrides the batch's)."""
    shared_chunking = chunking_request(body.chunking_strategy, "chunking_strategy")
    if (body.file_ids is None) == (body.files is None):
        raise InvalidRequest("Send either file_ids or files (not both).", param="file_ids")
    if body.files is not None:
        files = []
        for i, f in enumerate(body.files):
            param = f"files[{i}].chunking_strategy"
            own = chunking_request(f.chunking_strategy, param)
            chunking, chunking_param = (own, param) if own is not None else (shared_chunking, "chunking_strategy")
            files.append((f.file_id, dict(f.attributes or {}), chunking, chunking_param))
    else:
        shared = dict(body.attributes or {})
        files = [(file_id, dict(shared), shared_chunking, "chunking_strategy") for file_id in body.file_ids or []]
    return batch_object(stores.create_batch(workspace, vector_store_id, files))


@router.get("/{vector_store_id}/file_batches/{batch_id}")
def get_batch(vector_store_id: str, batch_id: str, stores: VectorStores, workspace: Workspace) -> JSONResponse:
    state = stores.get_batch(workspace, vector_store_id, batch_id)
    headers = {"openai-poll-after-ms": str(POLL_AFTER_MS)} if state.status == "in_progress" else None
    return JSONResponse(batch_object(state), headers=headers)


@router.post("/{vector_store_id}/file_batches/{batch_id}/cancel")
def cancel_batch(vector_store_id: str, batch_id: str, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    """Cancel the batch's files still in progress."""
    return batch_object(stores.cancel_batch(workspace, vector_store_id, batch_id))


@router.get("/{vector_store_id}/file_batches/{batch_id}/files")
def list_batch_files(
    vector_store_id: str,
    batch_id: str,
    stores: VectorStores,
    workspace: Workspace,
    limit: Limit = 20,
    order: OrderParam = "desc",
    after: str | None = None,
    before: str | None = None,
    filter: Literal["in_progress", "completed", "failed", "cancelled"] | None = None,
) -> dict[str, Any]:
    """The batch's files still in the store, paged like the store's files."""
    state = stores.get_batch(workspace, vector_store_id, batch_id)
    files = state.files if order == "asc" else list(reversed(state.files))
    ids = [f.link.file_id for f in files]
    for cursor, name in ((after, "after"), (before, "before")):
        if cursor is not None and cursor not in ids:
            raise NotFound(f"No file {cursor!r} in this batch to page from.", param=name)
    window = files[ids.index(after) + 1 if after else 0 : ids.index(before) if before else len(files)]
    window = [f for f in window if filter is None or f.document.status == filter]
    page = window[-limit:] if before and not after else window[:limit]
    return list_object([file_object(f) for f in page], len(window) > limit)
