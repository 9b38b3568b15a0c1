"""Reading request bodies: JSON objects and multipart JSON fields, validated by ``calypso.validation``.

A JSON body reaches a route either as a pydantic parameter (FastAPI raises
``RequestValidationError``, which ``api/errors.py`` hands to the translator)
or through ``parse_body`` (same translator), so one fault gets one ``code``
and ``param`` on every endpoint; the table is in ``calypso.validation``.
"""

from __future__ import annotations

import email.message
import json
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, TypeAdapter, ValidationError

from calypso import json_limits
from calypso.errors import InvalidRequest
from calypso.validation import invalid_request_from, json_kind, not_an_object, not_json

T = TypeVar("T")


def _is_json_content_type(value: str | None) -> bool:
    # The rule FastAPI applies to pydantic body parameters: no header, application/json or application/*+json.
    if not value:
        return True
    message = email.message.Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


async def json_object(request: Request, hint: str = "a JSON object") -> dict[str, Any]:
    """The request body as a JSON object, or a 400 that says what to send."""
    raw = await request.body()
    if not _is_json_content_type(request.headers.get("content-type")):
        raise not_json("it was not sent as Content-Type: application/json", hint)
    if not raw:
        raise not_json("it is empty", hint)
    try:
        body = json_limits.load(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise not_json(f"it is not valid JSON ({exc})", hint) from exc
    except json_limits.UnacceptableJSON as exc:
        raise unacceptable_json(exc) from exc
    if not isinstance(body, dict):
        raise not_an_object(body, hint)
    return body


async def parse_body(request: Request, model: type[BaseModel]) -> Any:
    """Validate a JSON body with ``model``; every problem is a 400 in OpenAI's shape naming the parameter."""
    body = await json_object(request)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise invalid_request_from(exc, body, model=model) from exc


def unacceptable_json(exc: json_limits.UnacceptableJSON) -> InvalidRequest:
    """400 for a body that parses but is not JSON this server takes (depth, huge integers, bad Unicode)."""
    where = f"'{exc.path}'" if exc.path else "the request body"
    return InvalidRequest(f"Invalid value for {where}: {exc.reason}.", param=exc.path, code="invalid_value")


def form_json_object(raw: str | None, param: str) -> dict[str, Any] | None:
    """A multipart field that holds a JSON object (``metadata``): None when absent, else the object or a 400."""
    if raw is None or raw == "":
        return None
    try:
        value = json_limits.load(raw)
        if value is None:
            return None  # JSON null: no metadata, as an absent field
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"Invalid value for '{param}': not valid JSON ({exc}); send a JSON object string.",
            param=param,
            code="invalid_json",
        ) from exc
    except json_limits.UnacceptableJSON as exc:
        inner = f"{param}.{exc.path}" if exc.path else param
        raise InvalidRequest(f"Invalid value for '{inner}': {exc.reason}.", param=inner, code="invalid_value") from exc
    if not isinstance(value, dict):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected a JSON object, but got {json_kind(value)} instead.",
            param=param,
            code="invalid_type",
        )
    return value


def form_json_field(raw: str | None, param: str, kind: TypeAdapter[T]) -> T | None:
    """A multipart JSON-object field validated as ``kind`` (``api/schemas/bounds.Attributes``): a 400 names the part."""
    value = form_json_object(raw, param)
    if value is None:
        return None
    try:
        return kind.validate_python(value)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", param, *e["loc"])} for e in exc.errors()]
        raise invalid_request_from(errors, {param: value}) from exc
