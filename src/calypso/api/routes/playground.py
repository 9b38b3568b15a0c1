"""GET / and /playground: the playground page; /playground/static/*: its assets (shipped in the package).

The page talks to the server only through the public /v1 API, so it needs no
route of its own beyond these files. It is outside /v1, so the auth middleware
lets it load without a key; every call it makes is authenticated as usual.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from calypso.playground import STATIC_DIR, STATIC_PACKAGE, index_html

router = APIRouter(include_in_schema=False)

# Only our own files run or load: no inline script, no third-party origin (the page must work offline).
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # signed source links must not leak through Referer
    "Cache-Control": "no-cache",
}


@router.get("/")
@router.get("/playground")
@router.head("/")  # a shared link to the page: unfurlers and link checkers send HEAD
@router.head("/playground")
def page() -> Response:
    return Response(index_html(), media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get("/playground/")
@router.head("/playground/")
def page_slash() -> RedirectResponse:
    return RedirectResponse("/playground")


def install(app: FastAPI) -> None:
    """The page's routes and its assets."""
    app.include_router(router)
    app.mount("/playground/static", StaticFiles(packages=[(STATIC_PACKAGE, STATIC_DIR)]), name="playground-static")
