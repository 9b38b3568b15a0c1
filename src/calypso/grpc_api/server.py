"""The gRPC listener of ``calypso serve``: a ``grpc.aio`` server on the HTTP server's event loop.

Why grpc.aio on the same loop rather than a grpc thread-pool server: answering
is async end to end (``Answerer.stream`` awaits the upstream model over httpx
connections that belong to the loop that opened them, see ``Services.aclose``),
so a thread-pool server would need an event loop per worker thread and its own
set of upstream connections. On one loop, gRPC and HTTP share the generators,
their connection pool and its concurrency limit, and a streamed answer costs a
coroutine, not a thread. Blocking store calls go to threads (``Servicer.blocking``),
as the HTTP routes' sync handlers do.
"""

from __future__ import annotations

import logging
import weakref

import grpc

from calypso.citations.links import LinkSigner
from calypso.config import Settings
from calypso.grpc_api.base import UnknownMethods
from calypso.grpc_api.chat import ChatService
from calypso.grpc_api.collections import CollectionsService
from calypso.grpc_api.documents import DocumentsService
from calypso.grpc_api.files import FilesService
from calypso.grpc_api.protos import chat_pb2_grpc, collections_pb2_grpc, documents_pb2_grpc, files_pb2_grpc
from calypso.grpc_api.staging import StagedUploads
from calypso.services import Services

log = logging.getLogger("calypso.grpc")

# Each started server's keyless-upload buffer, for tests and metrics (grpc.aio.Server takes no attributes of ours).
_STAGING: weakref.WeakKeyDictionary[grpc.aio.Server, StagedUploads] = weakref.WeakKeyDictionary()


def staging_of(server: grpc.aio.Server) -> StagedUploads:
    """The keyless-upload buffer (staging.py) of a server ``start_grpc`` started."""
    return _STAGING[server]


_MIB = 1 << 20
# As xai-sdk's channel: 20 MiB messages both ways (file uploads arrive in chunks below that).
# No SO_REUSEPORT: a second server on a taken port must fail, not silently share it.
_OPTIONS = [
    ("grpc.max_receive_message_length", 20 * _MIB),
    ("grpc.max_send_message_length", 20 * _MIB),
    ("grpc.so_reuseport", 0),
]


def http_base_url(settings: Settings) -> str:
    """Where source links point: the public URL, else the HTTP listener beside this one."""
    if settings.public_base_url:
        return settings.public_base_url.rstrip("/")
    host = settings.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    return f"http://{host}:{settings.port}"


def keyless_staging(settings: Settings) -> StagedUploads:
    """The keyless-upload buffer (staging.py): 4 uploads' worth in all, half of it kept for addresses that
    made a keyed call, one upload's worth per address, a minute to be claimed, two to arrive."""
    limit = settings.max_upload_bytes
    return StagedUploads(4 * limit, per_peer_bytes=limit, reserved_bytes=2 * limit, ttl_seconds=60.0)


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


async def start_grpc(services: Services, auth_enabled: bool, port: int, host: str | None = None) -> grpc.aio.Server:
    """Serve xAI's Chat, Collections, Documents and Files services on ``host:port``; raises when it cannot bind."""
    settings = services.settings
    links = LinkSigner(services.signing_secret, http_base_url(settings), settings.source_link_ttl_seconds)
    server = grpc.aio.server(options=_OPTIONS)
    staging = keyless_staging(settings)
    _STAGING[server] = staging
    chat, documents = ChatService(services, auth_enabled, links), DocumentsService(services, auth_enabled)
    collections = CollectionsService(services, auth_enabled, staging)
    files = FilesService(services, auth_enabled, staging)
    for servicer in (chat, documents, collections, files):
        servicer.staging = staging  # every keyed call vouches for its address (staging.py)
    chat_pb2_grpc.add_ChatServicer_to_server(chat, server)
    collections_pb2_grpc.add_CollectionsServicer_to_server(collections, server)
    documents_pb2_grpc.add_DocumentsServicer_to_server(documents, server)
    files_pb2_grpc.add_FilesServicer_to_server(files, server)
    server.add_generic_rpc_handlers((UnknownMethods(),))  # after the services: only what they do not serve
    address = _address(host or settings.host, port)
    try:
        server.add_insecure_port(address)
    except RuntimeError as exc:
        raise RuntimeError(f"gRPC cannot listen on {address}; pick another port with --grpc-port (0: off).") from exc
    await server.start()
    log.info("gRPC (xAI API) listening on %s", address)
    return server
