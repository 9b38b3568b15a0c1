"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from calypso import __version__
from calypso.api import openapi, tracing
from calypso.api.auth import AuthMiddleware, auth_enabled
from calypso.api.body_guard import BodyLimitMiddleware
from calypso.api.db_wait import DatabaseWaitMiddleware
from calypso.api.errors import UnexpectedErrorMiddleware, install_error_handlers
from calypso.api.expiry import sweep_expired_files
from calypso.api.mcp import http as mcp_http
from calypso.api.metrics import Metrics, MetricsMiddleware
from calypso.api.request_ids import RequestIdMiddleware
from calypso.api.routes import (
    admin,
    bots,
    chat,
    conversation_items,
    conversations,
    documents,
    files,
    health,
    models,
    playground,
    responses,
    search,
    sources,
    vector_store_files,
    vector_stores,
    viewer,
)
from calypso.config import Settings
from calypso.services import Services, open_services
from calypso.services.embed_worker import EmbedWorkers


def create_app(
    settings: Settings | None = None,
    services: Services | None = None,
    *,
    grpc_port: int = 0,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The HTTP API over ``services``; without them it opens its own at start and closes them at shutdown.

    ``grpc_port``: also serve xAI's gRPC API there, on this app's event loop and services, for the
    app's lifetime (``calypso.grpc_api``; needs the ``xai`` extra). 0: HTTP only. ``on_shutdown`` runs
    last at shutdown: after SIGTERM uvicorn re-raises the signal, so code after ``uvicorn.run`` never runs.
    """
    settings = settings or (services.settings if services is not None else Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = services is None
        app.state.services = open_services(settings) if owned else services
        # Uploads return at once; these threads finish their jobs (and any left by a process that died).
        workers = app.state.services.ingestion.workers(settings.ingest_workers, role="serve")
        workers.start()
        embedders = EmbedWorkers(app.state.services.vectors, settings.embed_workers, role="serve")
        embedders.start()  # a document is searchable by keywords first; its vectors follow from here
        syncers = app.state.services.sources.workers(settings.source_workers, role="serve")
        syncers.start()  # source syncs asked for or scheduled (services/sources.py)
        app.state.ingest_workers, app.state.embed_workers = workers, embedders  # for /readyz
        await app.state.services.storage.open_on_loop()  # PostgreSQL: searches await their reads on this loop
        sweeper = asyncio.create_task(sweep_expired_files(app.state.services, settings.file_expiry_sweep_seconds))
        grpc_server = None
        try:
            if grpc_port:
                from calypso.grpc_api.server import start_grpc

                try:
                    grpc_server = await start_grpc(app.state.services, app.state.auth_enabled, grpc_port)
                    app.state.grpc_server = grpc_server  # for tests that look at its keyless-upload buffer
                except RuntimeError as exc:  # the port is taken: HTTP still serves, and says why gRPC does not
                    logging.getLogger("calypso.grpc").warning("gRPC listener off: %s", exc)
            async with mcp.run():  # the stateless MCP endpoint's task group (api/mcp/http.py)
                yield
        finally:
            sweeper.cancel()
            if grpc_server is not None:
                await grpc_server.stop(grace=2)  # in-flight calls get 2 s, as uvicorn's own shutdown
            await app.state.services.storage.close_on_loop()
            await asyncio.to_thread(embedders.stop)
            await asyncio.to_thread(syncers.stop, settings.job_lease_seconds)
            await asyncio.to_thread(workers.stop, settings.job_lease_seconds)
            # Upstream connections belong to this server's event loop, whoever owns the services.
            await app.state.services.answering.aclose()
            if owned:
                app.state.services.close()
            if app.state.tracer_provider is not None:
                app.state.tracer_provider.shutdown()  # sends the spans still batched
            if on_shutdown is not None:
                on_shutdown()

    app = FastAPI(title="Calypso", version=__version__, lifespan=lifespan)
    app.state.services = services
    app.state.auth_enabled = auth_enabled(settings)
    install_error_handlers(app)
    openapi.install(app, settings)  # the statuses and bodies the server really has
    # The last added is the outermost. From the outside in: every response (a 401, 413 or 500 too)
    # carries x-request-id; unexpected errors are logged with it; an oversized body is refused
    # before anything reads it; then the caller is authenticated.
    app.add_middleware(AuthMiddleware)
    app.add_middleware(DatabaseWaitMiddleware)  # outside auth: a key lookup waits out of the same budget
    app.add_middleware(
        BodyLimitMiddleware, json_limit=settings.max_request_bytes, upload_limit=settings.max_upload_bytes
    )
    app.add_middleware(UnexpectedErrorMiddleware)
    app.state.tracer_provider = tracing.install(app, settings.otlp_endpoint) if settings.otlp_endpoint else None
    app.state.metrics = Metrics()
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)  # outside the rest: 401s and 413s count too
    app.add_middleware(RequestIdMiddleware)
    # A request's path is matched against the routes in this order (on FastAPI 0.165 a bare route answered in 0.08 ms
    # first in the list, 0.28 ms last, behind 70), so the busiest come first: search and the answer endpoints.
    # Routers sharing a prefix keep their order (files then viewer, conversations then their items).
    for module in (
        search,
        responses,
        chat,
        documents,
        files,
        viewer,
        sources,
        vector_stores,
        vector_store_files,
        models,
        bots,
        conversations,
        conversation_items,
        admin,
        health,
    ):
        app.include_router(module.router)
    mcp = mcp_http.mount(app, settings)  # MCP at /mcp: the same keys and services as /v1
    playground.install(app)  # the web page at / (outside /v1: it loads without a key)

    @app.get("/health", tags=["meta"])
    def process_health() -> dict[str, str]:
        """The same as ``/healthz`` (kept for clients of earlier versions)."""
        return {"status": "ok", "version": __version__}

    return app
