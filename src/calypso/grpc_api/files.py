"""xAI's Files service: the streamed upload ``collections.upload_document`` starts with, and retrieve/delete.

A file is a document in the default namespace, as on ``/v1/files``; adding it
to a collection (``AddDocumentToCollection``) ingests it into that collection's
namespace. The upload answers at once; ingestion runs in the background workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from calypso.errors import EmptyDocument, InvalidRequest, PayloadTooLarge
from calypso.grpc_api import convert
from calypso.grpc_api.base import Servicer, authorization, complete
from calypso.grpc_api.errors import rpc
from calypso.grpc_api.protos import files_pb2, files_pb2_grpc
from calypso.grpc_api.staging import Intake, StagedFile, StagedUploads, StagingFull
from calypso.services import Services
from calypso.services.ingestion import Upload

Context: TypeAlias = grpc.aio.ServicerContext


@complete(files_pb2_grpc.FilesServicer, "xai_api.Files")
class FilesService(Servicer, files_pb2_grpc.FilesServicer):
    staging: StagedUploads

    def __init__(self, services: Services, auth_enabled: bool, staging: StagedUploads) -> None:
        super().__init__(services, auth_enabled)
        self.staging = staging

    @rpc
    async def UploadFile(  # noqa: N802
        self, request: AsyncIterator[files_pb2.UploadFileChunk], context: Context
    ) -> files_pb2.File:
        # xai-sdk sends no key on this call over an insecure channel: held until a keyed call claims it (staging.py).
        if self.auth_enabled and authorization(context) is None:
            staged = await self._stage(request, context)
            return files_pb2.File(
                id=staged.id,
                filename=staged.filename,
                size=len(staged.data),
                created_at=convert.timestamp(staged.created_at),
            )
        workspace = await self.workspace(context)  # a wrong key: refused before the body
        name, data = await self._receive(request, None)
        upload = Upload(data, name, workspace=workspace)
        result = await self.blocking(self.services.ingestion.submit, upload)
        return convert.file(result.document)

    async def _stage(self, request: AsyncIterator[files_pb2.UploadFileChunk], context: Context) -> StagedFile:
        """Receive a keyless upload into the staging buffer, its bytes counted as they arrive (staging.py)."""
        intake = self.staging.receiving(context.peer())
        try:
            async with asyncio.timeout(self.staging.receive_seconds):  # a trickled stream holds room: bounded
                name, data = await self._receive(request, intake)
            return intake.finish(name, data)
        except StagingFull as full:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(full))
            raise
        except TimeoutError:
            await context.abort(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"An upload without a key must arrive within {self.staging.receive_seconds:g} s; send it faster, "
                "or with the API key (a TLS channel).",
            )
            raise
        finally:
            intake.close()  # nothing left to release once finished

    async def _receive(
        self, request: AsyncIterator[files_pb2.UploadFileChunk], intake: Intake | None
    ) -> tuple[str, bytes]:
        """The file's name and bytes; keyless bytes are counted by ``intake`` as they arrive, before they pile up."""
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
            if intake is not None:
                intake.add(len(chunk.data))
            parts.append(chunk.data)
        if not name:
            raise InvalidRequest("The upload has no file name: its init chunk must name the file.", param="init.name")
        data = b"".join(parts)
        if not data:
            raise EmptyDocument(f"{name} is empty (0 bytes); upload a file with content.", param="data")
        return name, data

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
