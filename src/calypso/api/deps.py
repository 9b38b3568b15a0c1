"""Request-scoped helpers shared by the routes."""

from __future__ import annotations

import json

from fastapi import Request, UploadFile

from calypso.citations.links import LinkSigner
from calypso.errors import InvalidRequest, PayloadTooLarge
from calypso.knowledge import KnowledgeBase
from calypso.store.policies import PolicyStore


def knowledge_base(request: Request) -> KnowledgeBase:
    return request.app.state.kb


def read_upload(upload: UploadFile | str | None, limit: int) -> tuple[bytes, str]:
    """The uploaded bytes and filename, refusing a missing file or one over ``limit`` bytes."""
    if upload is None or isinstance(upload, str):
        raise InvalidRequest("No file in the request: send it as the multipart field 'file'.", param="file")
    data = upload.file.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(
            f"{upload.filename} is larger than the {limit:,}-byte limit (setting CALYPSO_MAX_UPLOAD_BYTES).",
            param="file",
        )
    return data, upload.filename or "upload"


def parse_metadata(raw: str | None) -> dict | None:
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(f"metadata is not valid JSON: {exc}.", param="metadata") from exc
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise InvalidRequest("metadata must be a JSON object with string keys.", param="metadata")
    return value


def check_limit(limit: int) -> int:
    if not 1 <= limit <= 100:
        raise InvalidRequest(f"limit must be between 1 and 100, got {limit}.", param="limit")
    return limit


def check_order(order: str) -> str:
    if order not in ("asc", "desc"):
        raise InvalidRequest(f"order must be 'asc' or 'desc', got {order!r}.", param="order")
    return order


def answerer(request: Request):
    return request.app.state.answerer


def bots(request: Request):
    return request.app.state.bots


def public_base_url(request: Request) -> str:
    """Where clients reach us: the configured public URL, else this request's base URL."""
    configured = request.app.state.settings.public_base_url
    return configured.rstrip("/") if configured else str(request.base_url).rstrip("/")


def link_signer(request: Request) -> LinkSigner:
    """Signs source links with the server secret, for this request's public base URL."""
    settings = request.app.state.settings
    return LinkSigner(request.app.state.signing_secret, public_base_url(request), settings.source_link_ttl_seconds)


def sources_hidden(request: Request, workspace: str, bot_policy: str) -> bool:
    """Sources are hidden when the bot's or the workspace's policy says so (grounding state ``hidden``)."""
    if bot_policy == "hidden":
        return True
    return PolicyStore(request.app.state.kb.store).sources_policy(workspace) == "hidden"
