"""The OpenAPI document as the server really behaves: its error shape, its statuses, every JSON body.

FastAPI's generated document knows only what the route signatures say: a 422
``HTTPValidationError`` on every operation with parameters (we answer 400 in
OpenAI's shape instead), no other error, and no body for the routes that read
theirs with ``parse_body`` (chat completions, conversations, bots). ``install``
replaces ``app.openapi`` with a version that post-processes the generated
document once:

* ``ErrorResponse`` (OpenAI's ``{"error": {"message", "type", "param", "code"}}``)
  is the body of every error status;
* FastAPI's 422 goes; each operation gets the statuses it can return, by rule
  (400 for parameters and bodies, 404 for path ids and ``after`` cursors, 413
  for bodies, 500 everywhere, 401 when API keys are required) plus the
  per-operation facts in ``EXTRA`` (409 bots, 415/422 uploads, 502/504 when
  answering or crawling, 201 on creation);
* hand-read bodies get their pydantic model's schema (``HAND_READ``), and the
  answering ones named examples, plain and streamed (``EXAMPLES``); streams
  are declared as ``text/event-stream``, a file's content as any media type;
* links lead from what a POST creates to the operations that take its id
  (``LINKS``), for clients and for schemathesis' stateful tests;
* with API keys on (or an admin key set), the bearer security schemes.

The per-operation tables are ``openapi_operations.py``: adding a route that reads
its body by hand or returns another status means a line there;
``tests/api/test_openapi.py`` checks that every POST, PUT and PATCH declares a
body and that the tables name real operations, and
``tests/api/test_property_based.py`` that the server returns only what is
declared.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, TypeAdapter

from calypso.api.auth import auth_enabled
from calypso.api.openapi_operations import EXAMPLES, EXTRA, HAND_READ, LINKS, NEVER, NO_200, REF, STREAMING
from calypso.api.schemas.bounds import Attributes
from calypso.config import Settings

ERROR_SCHEMA = "ErrorResponse"

_DESCRIPTIONS = {
    400: "Invalid request: malformed JSON, a wrong or unknown parameter (`param` names it).",
    401: "Missing, malformed, unknown or revoked API key.",
    403: "Not allowed: the admin API is disabled, or a signed link is invalid or expired.",
    404: "Not found: an unknown id (`param` names it).",
    409: "Conflict: the bot id is taken, the bot is read-only (declared in the bots file or built in), "
    "or the document's ingestion already ended (cancel).",
    413: "The request body or uploaded file is over the size limit.",
    415: "Unsupported file type.",
    416: "The Range header selects no byte of the file (Content-Range gives its length).",
    422: "The file could not be read (corrupt, encrypted or undecodable).",
    500: "Unexpected server error; the message quotes the request id to find it in the log.",
    502: "The upstream (model or crawled site) failed.",
    503: "Temporarily unavailable: the database cannot be reached, or every upstream slot is busy; retry "
    "after the Retry-After header's seconds.",
    504: "The upstream (model or crawled site) timed out.",
    507: "Insufficient storage: the disk holding the data is full; deletes still work and free room.",
}


def error_response_schema() -> dict[str, Any]:
    """OpenAI's error body, as every error status carries it."""
    nullable = {"type": ["string", "null"]}
    return {
        "title": ERROR_SCHEMA,
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "param", "code"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": nullable,
                    "code": nullable,
                },
            }
        },
    }


def _add_model(components: dict[str, Any], name: str, model: type[BaseModel] | dict[str, Any]) -> None:
    if isinstance(model, dict):
        components[name] = model
        return
    schema = model.model_json_schema(ref_template=REF)
    for inner, definition in schema.pop("$defs", {}).items():
        components.setdefault(inner, definition)
    components[name] = schema


def _error_statuses(method: str, path: str, operation: dict[str, Any], auth: bool, admin_key: bool) -> set[int]:
    parameters = operation.get("parameters", [])
    has_body = "requestBody" in operation
    # 503: the database away (or no upstream slot); 507: a write that meets a full disk (issue 26).
    statuses = {500, 503, *(s for s in EXTRA.get((method, path), ()) if s >= 400)}
    if method in ("post", "put", "patch", "delete"):
        statuses.add(507)
    if has_body or any(p["in"] == "query" for p in parameters):
        statuses.add(400)  # FastAPI's typed parameters and bodies, and the routes' own checks
    if has_body:
        statuses.add(413)
    if any(p["in"] == "path" for p in parameters) or any(
        p["in"] == "query" and p["name"] == "after" for p in parameters
    ):
        statuses.add(404)  # an unknown id, or an unknown cursor
    if path.startswith("/v1/admin/"):
        if admin_key:
            statuses.add(401)
        elif auth:
            statuses.add(403)
    elif path.startswith("/v1/") and auth:
        statuses.add(401)
    return statuses - NEVER.get((method, path), set())


def _error_response(status: int) -> dict[str, Any]:
    return {
        "description": _DESCRIPTIONS[status],
        "content": {"application/json": {"schema": {"$ref": REF.format(model=ERROR_SCHEMA)}}},
    }


_FILTER_REFS = [{"$ref": "#/components/schemas/ComparisonFilter"}, {"$ref": "#/components/schemas/CompoundFilter"}]


def _filters_as_any_of(node: Any) -> None:
    """A filter is a comparison or a compound: ``anyOf``, as OpenAI's document writes it. The two exclude each
    other by ``type`` (eq…nin against and/or), so it says what ``oneOf`` says, and a generator building a
    compound's nested filters need not try each alternative against the other (schemathesis gave up)."""
    if isinstance(node, dict):
        if node.get("oneOf") == _FILTER_REFS:
            node["anyOf"] = node.pop("oneOf")
        for value in node.values():
            _filters_as_any_of(value)
    elif isinstance(node, list):
        for value in node:
            _filters_as_any_of(value)


def declare(schema: dict[str, Any], *, auth: bool, admin_key: bool) -> dict[str, Any]:
    """A copy of FastAPI's document with the server's real bodies, statuses, error shape and links.

    ``auth``: API keys are required on /v1 (401s, the APIKey scheme); ``admin_key``: one is set (401s, AdminKey).
    """
    schema = copy.deepcopy(schema)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components[ERROR_SCHEMA] = error_response_schema()
    _uploads(components)
    for name, model in HAND_READ.values():
        _add_model(components, name, model)
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            _bodies(method, path, operation)
            _successes(method, path, operation["responses"])
            for status in sorted(_error_statuses(method, path, operation, auth, admin_key)):
                operation["responses"][str(status)] = _error_response(status)
            if path.startswith("/v1/admin/"):
                if admin_key:
                    operation["security"] = [{"AdminKey": []}]
            elif path.startswith("/v1/") and auth:
                operation["security"] = [{"APIKey": []}]
    _link(schema)
    _filters_as_any_of(schema)
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    schemes = {
        "APIKey": {"type": "http", "scheme": "bearer", "description": "A workspace API key."},
        "AdminKey": {"type": "http", "scheme": "bearer", "description": "The admin key (CALYPSO_ADMIN_KEY)."},
    }
    used = [name for name, on in (("APIKey", auth), ("AdminKey", admin_key)) if on]
    if used:
        schema["components"]["securitySchemes"] = {name: schemes[name] for name in used}
    return schema


def _bodies(method: str, path: str, operation: dict[str, Any]) -> None:
    key = (method, path)
    if key in HAND_READ:
        name, _model = HAND_READ[key]
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": REF.format(model=name)}}},
        }
    if key in EXAMPLES:
        examples = {name: {"value": value} for name, value in EXAMPLES[key].items()}
        operation["requestBody"]["content"]["application/json"]["examples"] = examples


def _successes(method: str, path: str, responses: dict[str, Any]) -> None:
    key = (method, path)
    responses.pop("422", None)  # FastAPI's HTTPValidationError: we answer 400 in OpenAI's shape
    if 201 in EXTRA.get(key, ()):
        success = responses.pop("200", None) if key in NO_200 else responses.get("200")
        responses["201"] = {**copy.deepcopy(success or {}), "description": "Created"}
    if key == ("get", "/v1/files/{file_id}/content"):
        binary = {"type": "string", "format": "binary", "description": "The file as uploaded, with its media type."}
        responses["200"]["content"] = {"*/*": {"schema": binary}}
        partial = {"type": "string", "format": "binary", "description": "The bytes a Range header asked for."}
        responses["206"] = {"description": "Partial content (a Range request)", "content": {"*/*": {"schema": partial}}}
    if key in STREAMING:
        responses["200"].setdefault("content", {})["text/event-stream"] = {"schema": _events(key)}


def _json_data(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "string", "contentMediaType": "application/json", "contentSchema": schema}


def _events(key: tuple[str, str]) -> dict[str, Any]:
    """One server-sent event, as OpenAPI 3.1 describes an event stream (``schema`` is each event): Responses
    names each event and its data is the event object; Chat Completions sends chunks (or an ``error``
    object) and ends with ``[DONE]``."""
    if key == ("post", "/v1/responses"):
        payload = {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}
        return {
            "type": "object",
            "required": ["event", "data"],
            "properties": {"event": {"type": "string"}, "data": _json_data(payload)},
            "description": "A Responses streaming event (`response.created` … `response.completed`).",
        }
    chunk = {"type": "object", "anyOf": [{"required": ["object"]}, {"required": ["error"]}]}
    return {
        "type": "object",
        "required": ["data"],
        "properties": {"data": {"anyOf": [{"const": "[DONE]"}, _json_data(chunk)]}},
        "description": "A `chat.completion.chunk` (or an `error` object), then `[DONE]`.",
    }


def _uploads(components: dict[str, Any]) -> None:
    """Multipart bodies as the routes read them: a file of at least one byte (an empty one is a 400),
    ``metadata`` a JSON object in text (``api/schemas/bounds.Attributes``), and no null: a form part is text,
    and an optional one is left out (``expires_after[seconds]`` is an integer or absent, never "null")."""
    for name, body in components.items():
        if not name.startswith("Body_"):
            continue
        properties = body.get("properties", {})
        for field, schema in properties.items():
            kinds = schema.get("anyOf", [])
            if len(kinds) == 2 and {"type": "null"} in kinds:
                (kind,) = (k for k in kinds if k != {"type": "null"})
                properties[field] = {**{k: v for k, v in schema.items() if k != "anyOf"}, **kind}
        if "file" in properties:
            properties["file"] = {**properties["file"], "minLength": 1}
        if "metadata" in properties:
            attributes = TypeAdapter(Attributes).json_schema()
            properties["metadata"] = {"anyOf": [_json_data(attributes), {"type": "null"}], "title": "Metadata"}


def _link(schema: dict[str, Any]) -> None:
    paths = schema.get("paths", {})
    for (method, path, status), (target_method, target_path), parameter, value in LINKS:
        target = paths[target_path][target_method]
        # FastAPI's operationId is the route function's name, then the path and method: get_bot_v1_bots_…
        name = "".join(part.capitalize() for part in target["operationId"].split("_v1_")[0].split("_"))
        links = paths[path][method]["responses"][status].setdefault("links", {})
        links[name] = {"operationId": target["operationId"], "parameters": {parameter: value}}


def install(app: FastAPI, settings: Settings) -> None:
    """Serve ``declare``'s document at /openapi.json (built once, on first request)."""
    generate = app.openapi
    auth, admin_key = auth_enabled(settings), bool(settings.admin_key)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = declare(generate(), auth=auth, admin_key=admin_key)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
