"""What ``calypso serve`` says when it starts: what answers, what searches, where data lives, where to connect.

A user reads this first: the generator in use (the built-in extractive answerer, or the upstream model
and whether it answered a probe), the embedding model and the languages it covers, the data directory
or database, the OCR engine, the HTTP, gRPC and MCP addresses, and whether API keys are required.
"""

from __future__ import annotations

import errno
import socket
from urllib.parse import urlsplit, urlunsplit

import httpx

from calypso.config import Settings, revealed
from calypso.embeddings.base import Embedder

PROBE_SECONDS = 2.0  # a start-up probe of the upstream; the server starts whatever it finds


def generator_line(settings: Settings) -> str:
    """Which answerer answers, and for an upstream whether it answered ``GET /models`` just now."""
    upstream = settings.generator == "upstream" or (settings.generator == "auto" and settings.llm_base_url)
    if not upstream or not settings.llm_base_url:
        return (
            "Answers: the built-in extractive answerer (quotes the documents; set CALYPSO_LLM_BASE_URL for a model, "
            "or try `calypso dev-upstream`)."
        )
    model = settings.llm_model or "(no CALYPSO_LLM_MODEL: the upstream's default)"
    return f"Answers: {model} at {settings.llm_base_url} ({probe_upstream(settings)})."


def probe_upstream(settings: Settings) -> str:
    key = revealed(settings.llm_api_key)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = f"{(settings.llm_base_url or '').rstrip('/')}/models"
    try:
        response = httpx.get(url, headers=headers, timeout=PROBE_SECONDS)
    except httpx.HTTPError as exc:
        return f"not answering: {type(exc).__name__}; answers fail with 502 until it does"
    if response.status_code >= 400:
        return f"answered {response.status_code} to GET /models"
    return "answering"


def search_summary(embedder: Embedder | None) -> str:
    """How search works here: keywords in every language, the embedding model's vectors in those it covers."""
    if embedder is None:
        return "Search: keywords, every language analysed by its own (CALYPSO_EMBEDDING_MODEL=none)."
    if embedder.languages is None:
        return (
            f"Search: keywords in every language, with {embedder.name}'s vectors for any language; a question finds "
            "passages in other languages too (docs/languages.md)."
        )
    covered = ", ".join(sorted(embedder.languages))
    crossing = "; a question finds passages in the others among them" if len(embedder.languages) > 1 else ""
    return (
        f"Search: keywords in every language, with {embedder.name}'s vectors for {covered}{crossing} "
        "(other languages by keywords alone: docs/languages.md)."
    )


def ocr_line(settings: Settings) -> str:
    """Which engine reads scans and images (CALYPSO_OCR_ENGINE), or that OCR is off."""
    if not settings.ocr_enabled:
        return "OCR: off (CALYPSO_OCR_ENABLED=false): images and scans without a text layer are refused."
    from calypso.ingest.ocr import describe

    return f"OCR: {describe(settings.ocr_engine, settings.ocr_languages)}."


def storage_line(settings: Settings) -> str:
    if settings.database_url:
        parts = urlsplit(settings.database_url)
        user = f"{parts.username}@" if parts.username else ""
        port = f":{parts.port}" if parts.port else ""
        shown = urlunsplit((parts.scheme, f"{user}{parts.hostname or ''}{port}", parts.path, "", ""))  # no password
        return f"Data: PostgreSQL {shown} (files and index snapshots in {settings.home.resolve()})."
    return f"Data: {settings.home.resolve()} (SQLite)."


def port_in_use(host: str, port: int) -> bool:
    """Whether another process already listens on ``host:port`` (gRPC would then be refused the bind)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed socket's TIME_WAIT is not a listener
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False
