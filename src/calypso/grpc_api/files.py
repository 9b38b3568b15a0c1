"""xAI's Files service: the streamed upload ``collections.upload_document`` starts with, and retrieve/delete.

A file is a document in the default namespace, as on ``/v1/files``; adding it
to a collection (``AddDocumentToCollection``) ingests it into that collection's
namespace. The upload answers at once; ingestion runs in the background workers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc
from xai_sdk.proto import files_pb2, files_pb2_grpc

from calypso.errors import EmptyDocument, InvalidRequest, PayloadTooLarge
from calypso.grpc_api import convert
from calypso.grpc_api.base import Servicer, authorization, complete
from calypso.grpc_api.errors import rpc
from calypso.grpc_api.staging import StagedUploads, StagingFull
from calypso.services import Services

Context: TypeAlias = grpc.aio.ServicerContext


@complete(files_pb2_grpc.FilesServicer, "xai_api.Files")
class FilesService(Servicer, files_pb2_grpc.FilesServicer):
    def __init__(self, services: Services, auth_enabled: bool, staging: StagedUploads) -> None:
        super().__init__(services, auth_enabled)
        self.staging = staging

    @rpc
    async def UploadFile(  # noqa: N802
        self, request: AsyncIterator[files_pb2.UploadFileChunk], context: Context
    ) -> files_pb2.File:
        # xai-sdk sends no key on this call over an insecure channel: held until a keyed call claims it (staging.py).
        keyless = self.auth_enabled and authorization(context) is None
        workspace = None if keyless else await self.workspace(context)  # a wrong key: refused before the body
        limit = self.services.settings.max_upload_bytes
        name: str | None = None
        parts: list[bytes] = []
        size = 0
        async for chunk in request:
            if chunk.WhichOneof("chunk") == "init":
                if name is not None:
                    raise InvalidRequest("The upload sent two init chunks; send one, first.", param="init")
                name = chunk.init.name
                continue
            if name is None:
                raise InvalidRequest("The upload must start with an init chunk naming the file.", param="init")
            size += len(chunk.data)
            if size > limit:
                raise PayloadTooLarge(
                    f"{name} is over the upload limit of {limit:,} bytes (setting CALYPSO_MAX_UPLOAD_BYTES).",
                    param="data",
                )
            parts.append(chunk.data)
        if not name:
            raise InvalidRequest("The upload has no file name: its init chunk must name the file.", param="init.name")
        data = b"".join(parts)
        if not data:
            raise EmptyDocument(f"{name} is empty (0 bytes); upload a file with content.", param="data")
        if workspace is None:
            try:
                staged = self.staging.put(name, data)
            except StagingFull:
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "Too many uploads are waiting to be added to a collection; add them "
                    "(collections.add_existing_document) or retry in a few minutes.",
                )
                raise
            return files_pb2.File(
                id=staged.id, filename=name, size=len(data), created_at=convert.timestamp(staged.created_at)
            )
        result = await self.blocking(self.services.documents.ingest, data, name, None, workspace=workspace, wait=False)
        return convert.file(result.document)

    @rpc
    async def RetrieveFile(  # noqa: N802
        self, request: files_pb2.RetrieveFileRequest, context: Context
    ) -> files_pb2.File:
        workspace = await self.workspace(context)
        return convert.file(await self.blocking(self.services.documents.get_by_file_id, request.file_id, workspace))

    @rpc
    async def DeleteFile(  # noqa: N802
        self, request: files_pb2.DeleteFileRequest, context: Context
    ) -> files_pb2.DeleteFileResponse:
        """Delete the file and remove it from every collection, as ``/v1/files`` does."""
        workspace = await self.workspace(context)
        await self.blocking(self.services.vector_stores.delete_everywhere, workspace, request.file_id)
        return files_pb2.DeleteFileResponse(id=request.file_id, deleted=True)
