"""Typed dependencies: the services built at start, and request-scoped helpers the routes share."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Query, Request, UploadFile

from calypso.citations.links import LinkSigner
from calypso.errors import PayloadTooLarge
from calypso.services import Services
from calypso.services.answering import Answerer
from calypso.services.bots import BotService
from calypso.services.conversations import ConversationService
from calypso.services.documents import DocumentService
from calypso.services.ingestion import IngestionService
from calypso.services.keys import KeyService, PolicyService
from calypso.services.responses import ResponseService
from calypso.services.search import SearchService
from calypso.services.vector_stores import VectorStoreService
from calypso.services.vectors import VectorService


def services(request: Request) -> Services:
    built: Services = request.app.state.services
    return built


# The getters below are ``async``: FastAPI runs a plain ``def`` dependency on its thread pool, and each of those
# hops cost a request about 0.1-0.3 ms (three per search over HTTP, docs/benchmarks/hybrid.md, issue 30).


async def _documents(request: Request) -> DocumentService:
    return services(request).documents


async def _ingestion(request: Request) -> IngestionService:
    return services(request).ingestion


async def _vectors(request: Request) -> VectorService:
    return services(request).vectors


async def _search(request: Request) -> SearchService:
    return services(request).search


async def _answering(request: Request) -> Answerer:
    return services(request).answering


async def _bots(request: Request) -> BotService:
    return services(request).bots


async def _conversations(request: Request) -> ConversationService:
    return services(request).conversations


async def _responses(request: Request) -> ResponseService:
    return services(request).responses


async def _keys(request: Request) -> KeyService:
    return services(request).keys


async def _policies(request: Request) -> PolicyService:
    return services(request).policies


async def _vector_stores(request: Request) -> VectorStoreService:
    return services(request).vector_stores


Documents = Annotated[DocumentService, Depends(_documents)]
Ingestion = Annotated[IngestionService, Depends(_ingestion)]
Vectors = Annotated[VectorService, Depends(_vectors)]
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


MAX_PAGE = 100
# A page of any list: the one definition of OpenAI's 1..100, for the server and the OpenAPI document alike.
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="How many to return, 1 to 100.")]
OrderParam = Annotated[Literal["asc", "desc"], Query(description="By creation time: `asc` or `desc`.")]


def public_base_url(request: Request) -> str:
    """Where clients reach us: the configured public URL, else this request's base URL."""
    configured = services(request).settings.public_base_url
    return configured.rstrip("/") if configured else str(request.base_url).rstrip("/")


def link_signer(request: Request) -> LinkSigner:
    """Signs source links with the server secret, for this request's public base URL."""
    found = services(request)
    return LinkSigner(found.signing_secret, public_base_url(request), found.settings.source_link_ttl_seconds)
