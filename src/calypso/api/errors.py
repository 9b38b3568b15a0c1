"""One JSON error shape for every failure: OpenAI's ``{"error": {"message", "type", "param", "code"}}``.

Request validation goes through ``api/validation.py``; an unexpected exception
is logged once, with the request id, and answered with a 500 that quotes it
(``UnexpectedErrorMiddleware``). Streams end with the same body through
``api/streaming.failure``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import HTTPConnection
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calypso.api.request_ids import HEADER, request_id
from calypso.errors import CalypsoError
from calypso.validation import invalid_request_from

log = logging.getLogger("calypso.api")
_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})


def error_body(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def internal_error(rid: str) -> dict[str, Any]:
    """The body of an unexpected failure: nothing internal, only the id to find it in the log."""
    return error_body(f"Internal server error; see the server log (request id {rid}).", "server_error")


def log_unexpected(exc: BaseException, rid: str, where: str) -> None:
    log.exception("unexpected error in %s (request id %s)", where, rid, exc_info=exc)


def log_server_error(exc: CalypsoError, rid: str, where: str) -> None:
    """A 5xx CalypsoError (upstream down, storage failure) is ours to notice, though it says what happened."""
    if exc.status >= 500:
        log.warning("%s failed (request id %s): %s %s", where, rid, exc.status, exc.message)


def _body_model(request: Request) -> type[BaseModel] | None:
    # The pydantic model of the route's JSON body, to list accepted fields in an unknown-parameter message.
    field = getattr(request.scope.get("route"), "body_field", None)
    annotation = getattr(getattr(field, "field_info", None), "annotation", None)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def allowed_methods(request: Request, exc: StarletteHTTPException) -> list[str]:
    """Every method some operation takes at this path. FastAPI makes a route per method, and the 405 it
    raises names only the methods of the first route whose path matched; the OpenAPI document has them all."""
    methods = {m.strip() for m in (exc.headers or {}).get("Allow", "").split(",") if m.strip()}
    path = request.url.path
    for template, item in request.app.openapi().get("paths", {}).items():
        regex, _, _ = compile_path(template)
        if regex.match(path):
            methods |= {m.upper() for m in item if m in _METHODS}
    if "GET" in methods:
        methods.add("HEAD")  # Starlette answers HEAD wherever GET is routed
    return sorted(methods)


def _either(names: list[str]) -> str:
    return " or ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " or " + names[-1]


def _from_form_parser(exc: StarletteHTTPException) -> bool:
    # Starlette turns python-multipart's failures (a header past its size limit: a 10,000-character file
    # name) into a bare HTTPException(400); it raises no other 400 of its own.
    return exc.__context__ is not None and isinstance(exc.__context__, MultiPartException)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CalypsoError)
    async def calypso_error(request: Request, exc: CalypsoError) -> JSONResponse:
        log_server_error(exc, request_id(request), f"{request.method} {request.url.path}")
        return JSONResponse(exc.to_dict(), status_code=exc.status, headers=exc.headers() or None)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = invalid_request_from(list(exc.errors()), exc.body, model=_body_model(request))
        return JSONResponse(error.to_dict(), status_code=error.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers: dict[str, str] = {}
        if exc.status_code == 404:
            message = f"Unknown path {request.method} {request.url.path}; see /openapi.json for the API."
            code = "not_found"
        elif exc.status_code == 405:
            allowed = allowed_methods(request, exc)
            headers["Allow"] = ", ".join(allowed)  # RFC 9110: a 405 lists what the resource does take
            message = f"Method {request.method} is not allowed on {request.url.path}; use {_either(allowed)}."
            code = "method_not_allowed"
        elif exc.status_code == 400 and _from_form_parser(exc):
            message = (
                f"We could not read the multipart/form-data body ({exc.detail}). Send each part with a "
                "Content-Disposition header under 8 KB: a file name of at most 255 characters."
            )
            code = "invalid_multipart"
        else:
            message, code = str(exc.detail), None
        body = error_body(message, "invalid_request_error", None, code)
        return JSONResponse(body, status_code=exc.status_code, headers=headers or None)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        # Starlette runs this outside every middleware: the request id header is set here.
        rid = request_id(request)
        log_unexpected(exc, rid, f"{request.method} {request.url.path}")
        return JSONResponse(internal_error(rid), status_code=500, headers={HEADER: rid})


class UnexpectedErrorMiddleware:
    """Answers an unexpected exception with the 500 body and logs it once, with the request id.

    Starlette's last resort (the ``Exception`` handler, run by ServerErrorMiddleware)
    re-raises after answering: the server then logs the error again without the
    id and drops the keep-alive connection. This runs inside it and does neither.
    A response that had already started cannot become a 500: the failure is
    logged and the connection ends (streams report their own failures, see
    ``api/streaming.failure``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:  # noqa: BLE001 - logged here, answered as the one 500 shape
            rid = request_id(HTTPConnection(scope))
            log_unexpected(exc, rid, f"{scope.get('method')} {scope.get('path')}")
            if not started:
                await JSONResponse(internal_error(rid), status_code=500)(scope, receive, send)
