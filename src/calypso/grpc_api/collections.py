"""xAI's Collections service (the SDK's management channel) over ``VectorStoreService``.

A collection is a namespace, which the HTTP side shows as an OpenAI vector
store (same id); a document is a document, named by the file id it was added
under. What one surface writes the others read: a collection made here is a
vector store on ``/v1/vector_stores``, and a file attached there is a document here.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from google.protobuf import empty_pb2
from pydantic import TypeAdapter, ValidationError

from calypso.api.schemas.bounds import Attributes, MetadataValue, Name
from calypso.errors import InvalidRequest
from calypso.grpc_api import convert
from calypso.grpc_api.base import Servicer, complete
from calypso.grpc_api.errors import rpc
from calypso.grpc_api.protos import collections_pb2, collections_pb2_grpc
from calypso.grpc_api.staging import StagedUploads
from calypso.services import Services
from calypso.services.vector_stores import StoreState
from calypso.validation import invalid_request_from

# The HTTP API's bounds (api/schemas/bounds.py), so a collection holds what a vector store may.
_NAME: TypeAdapter[str] = TypeAdapter(Name)
_DESCRIPTION: TypeAdapter[str] = TypeAdapter(MetadataValue)
_FIELDS: TypeAdapter[dict[str, Any]] = TypeAdapter(Attributes)


def _bounded(kind: TypeAdapter[Any], value: Any, param: str) -> Any:
    try:
        return kind.validate_python(value)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", param, *e["loc"])} for e in exc.errors()]
        raise invalid_request_from(errors, {param: value}) from exc


Context: TypeAlias = grpc.aio.ServicerContext
_PAGE = 100  # stores read per listing page while sorting a workspace's collections


def _no_filter(value: str) -> None:
    if value:
        raise InvalidRequest(
            "filter expressions are not supported by Calypso; list without filter and select on the client.",
            param="filter",
        )


@complete(collections_pb2_grpc.CollectionsServicer, "collections.Collections")
class CollectionsService(Servicer, collections_pb2_grpc.CollectionsServicer):
    staging: StagedUploads

    def __init__(self, services: Services, auth_enabled: bool, staging: StagedUploads) -> None:
        super().__init__(services, auth_enabled)
        self.staging = staging

    @rpc
    async def CreateCollection(  # noqa: N802
        self, request: collections_pb2.CreateCollectionRequest, context: Context
    ) -> collections_pb2.CollectionMetadata:
        workspace = await self.workspace(context)
        if not request.collection_name.strip():
            raise InvalidRequest("collection_name is empty; give the collection a name.", param="collection_name")
        name = _bounded(_NAME, request.collection_name, "collection_name")
        description = _bounded(_DESCRIPTION, request.collection_description, "collection_description")
        metadata = {"description": description} if description else {}
        state = await self.blocking(self.services.vector_stores.create, workspace, name, metadata, None)
        return convert.collection(state)

    @rpc
    async def ListCollections(  # noqa: N802
        self, request: collections_pb2.ListCollectionsRequest, context: Context
    ) -> collections_pb2.ListCollectionsResponse:
        workspace = await self.workspace(context)
        _no_filter(request.filter)
        limit = convert.limit(request.limit)
        start = convert.offset_token(request.pagination_token)
        states = await self.blocking(self._all_collections, workspace)
        if request.sort_by == collections_pb2.COLLECTIONS_SORT_BY_AGE:
            states.sort(key=lambda s: (s.store.created_at, s.store.id))
        else:
            states.sort(key=lambda s: ((s.store.name or "").casefold(), s.store.id))
        if (
            convert.order(
                request.order, "asc" if request.sort_by != collections_pb2.COLLECTIONS_SORT_BY_AGE else "desc"
            )
            == "desc"
        ):
            states.reverse()
        page = states[start : start + limit]
        more = start + limit < len(states)
        return collections_pb2.ListCollectionsResponse(
            collections=[convert.collection(s) for s in page],
            pagination_token=str(start + limit) if more else "",
        )

    def _all_collections(self, workspace: str) -> list[StoreState]:
        states: list[StoreState] = []
        after: str | None = None
        while True:
            listing = self.services.vector_stores.list_stores(workspace, _PAGE, after, None, "asc")
            states.extend(listing.items)
            if not listing.has_more or not listing.items:
                return states
            after = listing.items[-1].store.id

    @rpc
    async def GetCollectionMetadata(  # noqa: N802
        self, request: collections_pb2.GetCollectionMetadataRequest, context: Context
    ) -> collections_pb2.CollectionMetadata:
        workspace = await self.workspace(context)
        stores = self.services.vector_stores
        store = await self.blocking(stores.get, workspace, request.collection_id, "collection_id")
        return convert.collection(await self.blocking(stores.state, store))

    @rpc
    async def DeleteCollection(  # noqa: N802
        self, request: collections_pb2.DeleteCollectionRequest, context: Context
    ) -> empty_pb2.Empty:
        workspace = await self.workspace(context)
        await self.blocking(self.services.vector_stores.delete, workspace, request.collection_id)
        return empty_pb2.Empty()

    @rpc
    async def AddDocumentToCollection(  # noqa: N802
        self, request: collections_pb2.AddDocumentToCollectionRequest, context: Context
    ) -> empty_pb2.Empty:
        """Attach an uploaded file: the collection's namespace ingests it (poll GetDocumentMetadata to see it end)."""
        workspace = await self.workspace(context)
        fields: dict[str, Any] = _bounded(_FIELDS, dict(request.fields), "fields")
        stores = self.services.vector_stores
        staged = self.staging.take(request.file_id)
        if staged is None:
            await self.blocking(stores.attach, workspace, request.collection_id, request.file_id, fields)
            return empty_pb2.Empty()
        try:  # a keyless upload (staging.py): ingested straight into the collection, in this caller's workspace
            await self.blocking(
                stores.attach_upload, workspace, request.collection_id, staged.id, staged.data, staged.filename, fields
            )
        except BaseException:
            self.staging.restore(staged)
            raise
        return empty_pb2.Empty()

    @rpc
    async def ListDocuments(  # noqa: N802
        self, request: collections_pb2.ListDocumentsRequest, context: Context
    ) -> collections_pb2.ListDocumentsResponse:
        workspace = await self.workspace(context)
        _no_filter(request.filter)
        limit = convert.limit(request.limit)
        start = convert.offset_token(request.pagination_token)
        stores = self.services.vector_stores
        store = await self.blocking(stores.get, workspace, request.collection_id, "collection_id")
        # Every file of the collection, then sorted as asked (a collection's files fit in memory: they are rows).
        listing = await self.blocking(stores.list_files, workspace, store.id, 10**9, None, None, "asc", None)
        files = list(listing.items)
        if request.name:
            files = [f for f in files if request.name.casefold() in f.document.filename.casefold()]
        sort_by = request.sort_by
        if sort_by == collections_pb2.DOCUMENTS_SORT_BY_SIZE:
            files.sort(key=lambda f: (f.document.bytes, f.link.file_id))
        elif sort_by == collections_pb2.DOCUMENTS_SORT_BY_AGE:
            files.sort(key=lambda f: (f.document.created_at, f.link.file_id))
        else:
            files.sort(key=lambda f: (f.document.filename.casefold(), f.link.file_id))
        if convert.order(request.order, "asc") == "desc":
            files.reverse()
        page = files[start : start + limit]
        more = start + limit < len(files)
        return collections_pb2.ListDocumentsResponse(
            documents=[convert.document(f) for f in page], pagination_token=str(start + limit) if more else ""
        )

    @rpc
    async def GetDocumentMetadata(  # noqa: N802
        self, request: collections_pb2.GetDocumentMetadataRequest, context: Context
    ) -> collections_pb2.DocumentMetadata:
        workspace = await self.workspace(context)
        found = await self.blocking(
            self.services.vector_stores.get_file, workspace, request.collection_id, request.file_id
        )
        return convert.document(found)

    @rpc
    async def RemoveDocumentFromCollection(  # noqa: N802
        self, request: collections_pb2.RemoveDocumentFromCollectionRequest, context: Context
    ) -> empty_pb2.Empty:
        workspace = await self.workspace(context)
        await self.blocking(self.services.vector_stores.delete_file, workspace, request.collection_id, request.file_id)
        return empty_pb2.Empty()
