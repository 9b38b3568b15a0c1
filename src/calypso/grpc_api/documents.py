"""xAI's Documents service: ``Search`` (the SDK's ``collections.search``) over the collections' namespaces."""

from __future__ import annotations

import grpc

from calypso.dialects.xai import chunk_id
from calypso.errors import InvalidRequest
from calypso.grpc_api import convert
from calypso.grpc_api.base import Servicer, complete
from calypso.grpc_api.errors import rpc
from calypso.grpc_api.protos import documents_pb2, documents_pb2_grpc
from calypso.models import Passage
from calypso.services.vector_stores import MAX_SEARCH_RESULTS

DEFAULT_LIMIT = 10  # xAI's default for collections search


@complete(documents_pb2_grpc.DocumentsServicer, "xai_api.Documents")
class DocumentsService(Servicer, documents_pb2_grpc.DocumentsServicer):
    @rpc
    async def Search(  # noqa: N802
        self, request: documents_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> documents_pb2.SearchResponse:
        workspace = await self.workspace(context)
        ids = list(dict.fromkeys(request.source.collection_ids))
        if not ids:
            raise InvalidRequest("source.collection_ids is empty; name the collections to search.", param="source")
        limit = request.limit if request.HasField("limit") else DEFAULT_LIMIT
        if not 1 <= limit <= MAX_SEARCH_RESULTS:
            raise InvalidRequest(f"limit must be from 1 to {MAX_SEARCH_RESULTS}.", param="limit")
        ranking = convert.ranking(request)
        stores = self.services.vector_stores
        found: list[tuple[Passage, str]] = []
        for collection_id in ids:
            hits = await self.blocking(
                stores.search, workspace, collection_id, request.query, max_results=limit, ranking=ranking
            )
            found += [(passage, collection_id) for passage, _ in hits]
        # Scores are in [0, 1] in every namespace (the share of the query matched), so collections merge by score.
        found.sort(key=lambda hit: -hit[0].score)
        return documents_pb2.SearchResponse(
            matches=[
                documents_pb2.SearchMatch(
                    file_id=passage.document.file_id,
                    chunk_id=chunk_id(passage),
                    chunk_content=passage.chunk.text,
                    score=round(passage.score, 6),
                    collection_ids=[collection_id],
                )
                for passage, collection_id in found[:limit]
            ]
        )
