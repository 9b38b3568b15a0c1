"""What every servicer shares: the services, who is calling, blocking calls off the event loop, and
``UNIMPLEMENTED`` naming the method for whatever Calypso does not serve."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from calypso.api.auth import workspace_for_header
from calypso.grpc_api.staging import StagedUploads
from calypso.scope import DEFAULT_WORKSPACE
from calypso.services import Services

T = TypeVar("T")

SUPPORTED = (
    "Chat/GetCompletion, Chat/GetCompletionChunk, Documents/Search, Files/UploadFile, Files/RetrieveFile, "
    "Files/DeleteFile and the Collections methods CreateCollection, ListCollections, GetCollectionMetadata, "
    "DeleteCollection, AddDocumentToCollection, ListDocuments, GetDocumentMetadata, RemoveDocumentFromCollection"
)


def unimplemented_message(method: str) -> str:
    return f"{method} is not implemented by Calypso. Its xAI gRPC surface serves {SUPPORTED} (see docs/xai.md)."


def authorization(context: grpc.aio.ServicerContext) -> str | None:
    """The ``authorization`` metadata of a call (gRPC metadata keys are lower case)."""
    return next((str(v) for k, v in context.invocation_metadata() or () if k == "authorization"), None)


class Servicer:
    """Base of the servicers: ``workspace(context)`` authenticates as the HTTP API does."""

    staging: StagedUploads | None = None  # set by the server: keyed calls vouch for their peer there

    def __init__(self, services: Services, auth_enabled: bool) -> None:
        self.services = services
        self.auth_enabled = auth_enabled

    async def workspace(self, context: grpc.aio.ServicerContext) -> str:
        """The caller's workspace from ``authorization: Bearer KEY`` metadata; ``default`` with auth off."""
        if not self.auth_enabled:
            return DEFAULT_WORKSPACE
        workspace = await self.blocking(workspace_for_header, self.services.keys, authorization(context))
        if self.staging is not None:  # this address holds a key: its keyless uploads may use the reserved room
            self.staging.vouch(context.peer())
        return workspace

    @staticmethod
    async def blocking(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a store-touching service call in a thread: the event loop also serves HTTP."""
        return await asyncio.to_thread(function, *args, **kwargs)


def complete(base: type, service: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: every method of the generated ``base`` servicer the class leaves out answers
    ``UNIMPLEMENTED`` naming ``service/method`` (the generated default says only "Method not implemented!")."""

    def decorate(cls: type[T]) -> type[T]:
        for name, member in vars(base).items():
            if name.startswith("_") or not callable(member) or name in vars(cls):
                continue
            setattr(cls, name, _unimplemented(f"{service}/{name}"))
        return cls

    return decorate


def _unimplemented(method: str) -> Callable[..., Any]:
    async def handler(self: Any, request: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, unimplemented_message(method))

    handler.__name__ = method.rsplit("/", 1)[-1]
    return handler


class UnknownMethods(grpc.GenericRpcHandler):
    """Last handler: any method of a service Calypso does not register (Models, Image, Auth…) is
    ``UNIMPLEMENTED`` naming it, instead of gRPC's bare "Method not found!"."""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = str(handler_call_details.method).lstrip("/")

        async def behavior(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, unimplemented_message(method))

        return grpc.stream_stream_rpc_method_handler(behavior)
