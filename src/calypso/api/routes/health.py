"""``/healthz`` (the process answers), ``/readyz`` (it can serve: database, indexes, workers) and ``/metrics``.

Outside ``/v1``, so they need no API key: a load balancer or an orchestrator probes them. ``/metrics``
can ask for its own bearer token (``CALYPSO_METRICS_TOKEN``) or be turned off (``CALYPSO_METRICS_ENABLED``).
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from calypso import __version__
from calypso.api.metrics import CONTENT_TYPE, Metrics
from calypso.config import revealed
from calypso.errors import AuthenticationFailed, NotFound
from calypso.ingest.ocr import describe
from calypso.services import Services

router = APIRouter(tags=["meta"])
READY_TIMEOUT_SECONDS = 2.0  # a probe that waits longer than this is a failed probe anyway


@router.head("/healthz", include_in_schema=False)  # uptime monitors probe with HEAD
@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up and its event loop answers."""
    return {"status": "ok", "version": __version__}


def _workers(request: Request, name: str) -> dict[str, Any]:
    workers = getattr(request.app.state, name, None)
    if workers is None:
        return {"ok": True, "running": 0, "started": 0}
    running, started = workers.alive()
    return {"ok": running == started, "running": running, "started": started}


def _ingestion(request: Request, services: Services, queued: int | None) -> dict[str, Any]:
    """The ingestion workers; not ok when uploads wait and nothing can take them."""
    check = _workers(request, "ingest_workers")
    if queued and not services.ingestion.jobs_can_be_taken:
        check.update(
            ok=False,
            error=f"{queued} upload(s) wait and no ingestion worker runs (CALYPSO_INGEST_WORKERS=0 on SQLite).",
        )
    return check


def _vectors(services: Services) -> dict[str, Any]:
    """Informative: the embedding model, the languages its vectors cover (None: any) and whether a question
    finds passages in another language (``crosses_languages``); no model: keyword search only."""
    embedder = services.search.embedder
    if embedder is None:
        return {"ok": True, "model": None, "languages": [], "crosses_languages": False, "pending_documents": 0}
    covered = embedder.languages
    return {
        "ok": True,
        "model": embedder.name,
        "languages": None if covered is None else sorted(covered),
        "crosses_languages": covered is None or len(covered) > 1,
        "pending_documents": services.vectors.pending(),  # waiting for vectors, e.g. re-embedding after a change
    }


@router.head("/readyz", include_in_schema=False)
@router.get("/readyz", responses={503: {"description": "Not ready: the failing checks say why."}})
async def readyz(request: Request) -> JSONResponse:
    """Ready to serve: the database answers, the index follower runs, the ingestion and embedding workers live;
    ``ocr`` names the engine that reads scans, ``vectors`` the embedding model and the languages it covers."""
    services: Services = request.app.state.services
    checks: dict[str, dict[str, Any]] = {}
    queued: int | None = None
    try:
        queue = await asyncio.wait_for(asyncio.to_thread(services.ingestion.queue_stats), timeout=READY_TIMEOUT_SECONDS)
        checks["database"] = {"ok": True, "backend": "postgresql" if services.settings.database_url else "sqlite"}
        checks["ingest_queue"] = {"ok": True, "queued": queue.queued, "running": queue.running}
        queued = queue.queued
    except Exception as exc:  # noqa: BLE001 - any failure to reach the database is "not ready"
        reason = "timed out" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        checks["database"] = {"ok": False, "error": reason}
    search = services.search
    checks["indexes"] = {"ok": search.following, "namespaces_loaded": len(search.index_sizes())}
    checks["ingest_workers"] = _ingestion(request, services, queued)
    checks["embed_workers"] = _workers(request, "embed_workers")
    checks["vectors"] = _vectors(services)
    settings = services.settings
    # Which engine reads scans; informative: a server without OCR still serves text documents.
    engine = (
        await asyncio.to_thread(describe, settings.ocr_engine, settings.ocr_languages)
        if settings.ocr_enabled
        else "off"
    )
    checks["ocr"] = {"ok": True, "engine": engine}
    ready = all(check["ok"] for check in checks.values())
    body = {"status": "ready" if ready else "not_ready", "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE: {}}}})
def metrics(request: Request) -> Response:
    """Prometheus text format (``api/metrics.py`` lists the series)."""
    settings = request.app.state.services.settings
    if not settings.metrics_enabled:
        raise NotFound("Metrics are turned off (setting CALYPSO_METRICS_ENABLED).")
    token = revealed(settings.metrics_token)
    if token:
        sent = request.headers.get("authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            raise AuthenticationFailed("/metrics needs the metrics token (CALYPSO_METRICS_TOKEN) as a Bearer token.")
    registry: Metrics = request.app.state.metrics
    registry.watch(request.app.state.services)
    return Response(registry.render(), media_type=CONTENT_TYPE)
