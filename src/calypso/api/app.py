"""The FastAPI application factory."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from calypso import __version__
from calypso.answering import Answerer
from calypso.api.auth import AuthMiddleware, auth_enabled
from calypso.api.errors import UnexpectedErrorMiddleware, install_error_handlers
from calypso.api.request_ids import RequestIdMiddleware
from calypso.api.routes import admin, bots, chat, conversations, documents, files, models, responses, search
from calypso.bots import BotDirectory
from calypso.citations.links import load_secret
from calypso.config import Settings
from calypso.knowledge import KnowledgeBase


def create_app(settings: Settings | None = None, kb: KnowledgeBase | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        owned = app.state.kb is None
        if owned:
            app.state.kb = KnowledgeBase(settings)
        app.state.answerer = Answerer(app.state.kb, settings)
        app.state.bots = BotDirectory(settings, app.state.kb.store)
        try:
            yield
        finally:
            await app.state.answerer.aclose()
            if owned:
                app.state.kb.close()
                app.state.kb = None

    app = FastAPI(title="Calypso", version=__version__, lifespan=lifespan)
    app.state.settings = settings
    app.state.auth_enabled = auth_enabled(settings)
    app.state.signing_secret = load_secret(settings.signing_secret, settings.home)
    app.state.kb = kb
    install_error_handlers(app)
    # The last added is the outermost: every response, a 401 or a 500 too, carries x-request-id.
    app.add_middleware(AuthMiddleware)
    app.add_middleware(UnexpectedErrorMiddleware)
    app.add_middleware(RequestIdMiddleware)
    for module in (documents, files, search, models, bots, responses, chat, conversations, admin):
        app.include_router(module.router)

    @app.get("/health", tags=["meta"])
    def health() -> dict:
        return {"status": "ok", "version": __version__}

    return app
