"""POST /v1/search: the retrieval the answer endpoints use, exposed for apps and debugging."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from calypso.api.auth import Workspace
from calypso.api.deps import Search
from calypso.api.schemas.ranking import SearchRankingOptions
from calypso.api.serialize import passage_object
from calypso.bots import MAX_DOCUMENT_IDS
from calypso.scope import NAME_SCHEMA
from calypso.validation import NON_BLANK

router = APIRouter(prefix="/v1", tags=["search"])


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, json_schema_extra={"pattern": NON_BLANK})  # blank: "The query is empty"
    namespace: str | None = Field(None, json_schema_extra=NAME_SCHEMA)
    document_ids: list[str] | None = Field(None, max_length=MAX_DOCUMENT_IDS)
    max_num_results: int = Field(10, ge=1, le=100)
    ranking_options: SearchRankingOptions | None = None


@router.post("/search")
async def search(body: SearchRequest, searcher: Search, workspace: Workspace) -> JSONResponse:
    scope = searcher.scope(
        body.namespace,
        document_ids=body.document_ids,
        max_results=body.max_num_results,
        ranking=body.ranking_options.to_options() if body.ranking_options else None,
    )
    # On the event loop when it reads only memory, else a thread.
    passages = await searcher.search_async(body.query, scope, workspace)
    # A JSONResponse skips FastAPI's generic encoder: about 0.6 ms less per search.
    return JSONResponse(
        {
            "object": "vector_store.search_results.page",
            "search_query": body.query,
            "data": [passage_object(p) for p in passages],
            "has_more": False,
            "next_page": None,
        }
    )
