"""/v1/vector_stores in OpenAI's Vector Stores API shape (``services/vector_stores.py``: a store is a namespace).

Stores: create, list, retrieve, update, delete. Search: ``query``, ``filters``, ``max_num_results`` (1-50),
``ranking_options``, ``rewrite_query``. A store's files and file batches are ``vector_store_files.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from calypso.api.auth import Workspace
from calypso.api.deps import Limit, OrderParam, VectorStores
from calypso.api.schemas.bounds import Description, Metadata, Name
from calypso.api.schemas.filters import Filters, to_filter
from calypso.api.schemas.ranking import SearchRankingOptions
from calypso.api.schemas.vector_stores import ChunkingStrategy, ExpiresAfter, SearchQuery, chunking_request
from calypso.api.serialize import list_object, passage_object
from calypso.errors import InvalidRequest
from calypso.services.vector_stores import MAX_SEARCH_RESULTS, StoreState

router = APIRouter(prefix="/v1/vector_stores", tags=["vector_stores"])


def store_object(state: StoreState) -> dict[str, Any]:
    store = state.store
    expires = store.expires_after
    return {
        "id": store.id,
        "object": "vector_store",
        "created_at": store.created_at,
        "name": store.name,
        "usage_bytes": state.usage_bytes,
        "file_counts": state.file_counts,
        "status": state.status,
        "expires_after": expires,
        "expires_at": state.expires_at,
        "last_active_at": store.last_active_at,
        "metadata": store.metadata,
        "description": store.description,
    }


class CreateStore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name | None = None
    description: Description | None = None
    file_ids: list[str] = Field(default_factory=list, max_length=500)
    metadata: Metadata | None = None
    expires_after: ExpiresAfter | None = None
    chunking_strategy: ChunkingStrategy | None = None


class UpdateStore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name | None = None
    metadata: Metadata | None = None
    expires_after: ExpiresAfter | None = None


class SearchStore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: SearchQuery | Annotated[list[SearchQuery], Field(min_length=1)]
    filters: Filters | None = None
    max_num_results: int = Field(10, ge=1, le=MAX_SEARCH_RESULTS)
    ranking_options: SearchRankingOptions | None = None
    rewrite_query: bool = False


# -- stores -----------------------------------------------------------------------------------


@router.post("")
def create_store(body: CreateStore, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    chunking = chunking_request(body.chunking_strategy, "chunking_strategy")
    metadata = dict(body.metadata or {})
    expires_after = body.expires_after.model_dump() if body.expires_after else None
    state = stores.create(
        workspace,
        body.name,
        metadata,
        expires_after,
        body.file_ids,
        description=body.description,
        chunking=chunking,
    )
    return store_object(state)


@router.get("")
def list_stores(
    stores: VectorStores,
    workspace: Workspace,
    limit: Limit = 20,
    order: OrderParam = "desc",
    after: str | None = None,
    before: str | None = None,
) -> dict[str, Any]:
    page = stores.list_stores(workspace, limit, after, before, order)
    return list_object([store_object(s) for s in page.items], page.has_more)


@router.get("/{vector_store_id}")
def get_store(vector_store_id: str, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    return store_object(stores.state(stores.get(workspace, vector_store_id)))


@router.post("/{vector_store_id}")
def update_store(vector_store_id: str, body: UpdateStore, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    changes = body.model_dump(include=body.model_fields_set)  # null expires_after: never expire
    return store_object(stores.update(workspace, vector_store_id, changes))


@router.delete("/{vector_store_id}")
def delete_store(vector_store_id: str, stores: VectorStores, workspace: Workspace) -> dict[str, Any]:
    """Delete the store and every file in it (the namespace's documents)."""
    stores.delete(workspace, vector_store_id)
    return {"id": vector_store_id, "object": "vector_store.deleted", "deleted": True}


# -- search -----------------------------------------------------------------------------------


@router.post("/{vector_store_id}/search")
def search_store(
    vector_store_id: str, body: SearchStore, request: Request, stores: VectorStores, workspace: Workspace
) -> JSONResponse:
    """Search the store's files. A list query is searched as one query of all its parts; ``rewrite_query``
    is accepted and changes nothing: every query is already searched by its content words."""
    queries = [body.query] if isinstance(body.query, str) else body.query
    if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
        raise InvalidRequest("query is empty; send the text to search for.", param="query")
    hits = stores.search(
        workspace,
        vector_store_id,
        " ".join(queries),
        filters=to_filter(body.filters),
        max_results=body.max_num_results,
        ranking=body.ranking_options.to_options() if body.ranking_options else None,
    )
    data = []
    for passage, file in hits:
        result = passage_object(passage)
        result["_aicore"] = result["attributes"]
        result["attributes"] = file.attributes
        data.append(result)
    return JSONResponse(
        {
            "object": "vector_store.search_results.page",
            "search_query": queries,
            "data": data,
            "has_more": False,
            "next_page": None,
        }
    )
