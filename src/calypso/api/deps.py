"""Typed dependencies: the services built at start, and request-scoped helpers the routes share."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, UploadFile

from calypso.citations.links import LinkSigner
from calypso.errors import InvalidRequest, PayloadTooLarge
from calypso.models import Order
from calypso.services import Services
from calypso.services.answering import Answerer
from calypso.services.bots import BotService
from calypso.services.conversations import ConversationService
from calypso.services.documents import DocumentService
from calypso.services.keys import KeyService, PolicyService
from calypso.services.responses import ResponseService
from calypso.services.search import SearchService
from calypso.services.vector_stores import VectorStoreService


def services(request: Request) -> Services:
    built: Services = request.app.state.services
    return built


def _documents(request: Request) -> DocumentService:
    return services(request).documents


def _search(request: Request) -> SearchService:
    return services(request).search


def _answering(request: Request) -> Answerer:
    return services(request).answering


def _bots(request: Request) -> BotService:
    return services(request).bots


def _conversations(request: Request) -> ConversationService:
    return services(request).conversations


def _responses(request: Request) -> ResponseService:
    return services(request).responses


def _keys(request: Request) -> KeyService:
    return services(request).keys


def _policies(request: Request) -> PolicyService:
    return services(request).policies


def _vector_stores(request: Request) -> VectorStoreService:
    return services(request).vector_stores


Documents = Annotated[DocumentService, Depends(_documents)]
Search = Annotated[SearchService, Depends(_search)]
Answering = Annotated[Answerer, Depends(_answering)]
Bots = Annotated[BotService, Depends(_bots)]
Conversations = Annotated[ConversationService, Depends(_conversations)]
Responses = Annotated[ResponseService, Depends(_responses)]
Keys = Annotated[KeyService, Depends(_keys)]
Policies = Annotated[PolicyService, Depends(_policies)]
VectorStores = Annotated[VectorStoreService, Depends(_vector_stores)]


def read_upload(upload: UploadFile, limit: int) -> tuple[bytes, str]:
    """The uploaded bytes and filename, refusing a file over ``limit`` bytes."""
    data = upload.file.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(
            f"{upload.filename} is larger than the {limit:,}-byte limit (setting CALYPSO_MAX_UPLOAD_BYTES).",
            param="file",
        )
    return data, upload.filename or "upload"


def check_limit(limit: int) -> int:
    if not 1 <= limit <= 100:
        raise InvalidRequest(f"limit must be between 1 and 100, got {limit}.", param="limit")
    return limit


def check_order(order: str) -> Order:
    if order == "asc":
        return "asc"
    if order == "desc":
        return "desc"
    raise InvalidRequest(f"order must be 'asc' or 'desc', got {order!r}.", param="order")


def public_base_url(request: Request) -> str:
    """Where clients reach us: the configured public URL, else this request's base URL."""
    configured = services(request).settings.public_base_url
    return configured.rstrip("/") if configured else str(request.base_url).rstrip("/")


def link_signer(request: Request) -> LinkSigner:
    """Signs source links with the server secret, for this request's public base URL."""
    found = services(request)
    return LinkSigner(found.signing_secret, public_base_url(request), found.settings.source_link_ttl_seconds)
