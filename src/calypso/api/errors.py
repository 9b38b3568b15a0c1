"""One JSON error shape for every failure: OpenAI's ``{"error": {...}}``."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from calypso.errors import CalypsoError

log = logging.getLogger("calypso.api")


def error_body(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _validation_param(error: dict) -> str | None:
    # FastAPI locations look like ("body", "max_num_results") or ("query", "limit").
    loc = [str(part) for part in error.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path", "form", "header"):
        loc = loc[1:]
    return ".".join(loc) or None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CalypsoError)
    async def calypso_error(_: Request, exc: CalypsoError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        param = _validation_param(first)
        message = first.get("msg", "Invalid request.")
        if param:
            message = f"Invalid value for '{param}': {message}."
        return JSONResponse(error_body(message, "invalid_request_error", param, "invalid_value"), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = f"Unknown path {request.method} {request.url.path}; see /openapi.json for the API."
            code = "not_found"
        elif exc.status_code == 405:
            message = f"Method {request.method} is not allowed on {request.url.path}."
            code = "method_not_allowed"
        else:
            message, code = str(exc.detail), None
        return JSONResponse(error_body(message, "invalid_request_error", None, code), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(error_body("Internal server error; see the server log.", "server_error"), status_code=500)
