"""From pydantic's validation errors to OpenAI's 400s: one translator for every boundary.

The HTTP API (``calypso.api.validation``) and the services (bot settings)
both call it, so one fault gets one ``code`` and ``param`` everywhere:

    fault                                  code                          param
    malformed JSON, empty body, non-JSON   invalid_json                  null
      content type
    body is JSON but not an object         invalid_type                  null
    unknown field                          unknown_parameter             tools[0].bogus
    missing required field                 missing_required_parameter    messages[0].role
    wrong JSON type                        invalid_type                  messages
    value not in an enum                   invalid_value                 messages[0].role
    number out of range                    integer_below_min_value, integer_above_max_value,
                                           decimal_below_min_value, decimal_above_max_value
    string or array too short / too long   string_below_min_length, string_above_max_length,
                                           array_below_min_length, array_above_max_length
    anything else a validator refuses      invalid_value (or the custom error's own type)

The codes and messages follow OpenAI's API ("Invalid type for 'x': expected an
object, but got a string instead."), except that OpenAI sends ``code: null``
for a body it cannot parse; ``invalid_json`` says what happened.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, BeforeValidator, StrictInt, ValidationError
from pydantic_core import core_schema

from calypso.errors import InvalidRequest


def _whole(value: Any) -> Any:
    # JSON Schema's "integer" includes 5.0; a string or a boolean stays an error.
    return int(value) if isinstance(value, float) and value.is_integer() else value


WHOLE = BeforeValidator(_whole)
WholeNumber = typing.Annotated[StrictInt, WHOLE]
"""An integer as JSON Schema reads one (``5`` or ``5.0``, never ``"5"`` or ``true``): what the document says.
Bounded and optional, write ``Annotated[StrictInt, Field(ge=..), WHOLE] | None``: bounds given after ``WHOLE``
reach the JSON schema as raw ``ge``/``le`` keys instead of ``minimum``/``maximum``."""

# For JSON schemas of text that must not be blank (the servers check ``text.strip()``): a character Python's
# ``str.isspace`` does not count; ECMA's ``\s`` misses the ASCII separators \x1c-\x1f and NEL.
NON_BLANK = r"[^\s\x1c-\x1f\x85]"

_MISSING: Any = object()
_SOURCES = ("body", "query", "path", "header", "cookie", "form")
_FORM_NESTED = re.compile(r"^(\w+)\[(\w+)\]$")
_BUILTIN = frozenset(typing.get_args(core_schema.ErrorType))

# Pydantic's type errors, by what they expected (OpenAI's wording).
_EXPECTED = {
    "string_type": "a string",
    "bytes_type": "a string",
    "url_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_parsing_size": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "decimal_type": "a number",
    "decimal_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "list_type": "an array",
    "tuple_type": "an array",
    "set_type": "an array",
    "frozen_set_type": "an array",
    "iterable_type": "an array",
    "dict_type": "an object",
    "mapping_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dataclass_type": "an object",
    "none_required": "null",
}
_RANGE = {
    "greater_than_equal": ("below_min_value", "below minimum", ">=", "ge"),
    "greater_than": ("below_min_value", "below minimum", ">", "gt"),
    "less_than_equal": ("above_max_value", "above maximum", "<=", "le"),
    "less_than": ("above_max_value", "above maximum", "<", "lt"),
}
_LENGTH = {
    "string_too_short": ("string", "below_min_length", "minimum", "min_length"),
    "string_too_long": ("string", "above_max_length", "maximum", "max_length"),
    "too_short": ("array", "below_min_length", "minimum", "min_length"),
    "too_long": ("array", "above_max_length", "maximum", "max_length"),
}


def json_kind(value: Any) -> str:
    """The JSON type of a decoded value, as OpenAI's messages name it ("an array", "null")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def param_path(loc: Sequence[str | int], body: Any = _MISSING, *, missing: bool = False) -> str | None:
    """OpenAI's name for a pydantic location: ``("messages", 0, "role")`` -> ``messages[0].role``.

    With ``body`` (the decoded input), parts that are not in it are dropped: those
    are pydantic's union-member labels (``"str"``, ``"list[dict[str,any]]"``), which a
    client never wrote. ``missing`` keeps the last part, the absent field's name.
    """
    if loc[:1] and loc[0] in _SOURCES and loc[0] != "body":
        body = _MISSING  # a query, path or header parameter: the body says nothing about it
    parts = _field_loc(loc)
    kept: list[str | int] = []
    value = body
    for n, part in enumerate(parts):
        if body is _MISSING:
            kept.append(part)
        elif isinstance(part, int) and isinstance(value, (list, tuple)) and -len(value) <= part < len(value):  # noqa: SIM114 - an index, then a key: two cases
            kept.append(part)
            value = value[part]
        elif isinstance(part, str) and _has_key(value, part):
            kept.append(part)
            value = value[part]
        elif missing and n == len(parts) - 1:
            kept.append(part)
    out = ""
    for part in kept:
        # A form field "expires_after[seconds]" is how OpenAI's SDKs send a nested object in a multipart form.
        nested = _FORM_NESTED.match(part) if isinstance(part, str) else None
        part = ".".join(nested.groups()) if nested else part
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out if kept else None  # an empty key ("") is still a name


def _field_loc(loc: Sequence[str | int]) -> list[str | int]:
    # FastAPI prefixes where the value came from: ("body", "messages", 0) is the field path ("messages", 0).
    parts = list(loc)
    return parts[1:] if parts[:1] and parts[0] in _SOURCES else parts


def _has_key(value: Any, key: str) -> bool:
    return isinstance(value, Mapping) and key in value  # a JSON object, or FastAPI's FormData


def _model_fields_at(model: type[BaseModel] | None, loc: Sequence[str | int]) -> list[str] | None:
    """The field names of the (nested) model that holds the last part of ``loc``, if one can be found."""
    current: Any = model
    for part in list(loc)[:-1]:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return None
        current = _inner_model(fields[part].annotation)
    fields = getattr(current, "model_fields", None)
    return [f.alias or name for name, f in fields.items()] if fields else None


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, tuple, set, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None


def _pick(
    errors: Sequence[Mapping[str, Any]], body: Any
) -> tuple[Mapping[str, Any], str | None, list[Mapping[str, Any]]]:
    """The error to report, its param, and the errors at the same param (a union's failed branches)."""
    chosen = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    param = param_path(chosen["loc"], body, missing=chosen["type"] == "missing")
    while chosen["type"] in _EXPECTED and param is not None:
        # A union whose container type matched fails deeper down: report that, not the sibling branch
        # (and again below, for a union inside it: ``input[0].content[0].text``).
        deeper = [
            e
            for e in errors
            if (p := param_path(e["loc"], body, missing=e["type"] == "missing"))
            and p.startswith(param)
            and p[len(param) : len(param) + 1] in ("[", ".")
        ]
        if not deeper:
            break
        chosen = deeper[0]
        param = param_path(chosen["loc"], body, missing=chosen["type"] == "missing")
    same = [e for e in errors if param_path(e["loc"], body, missing=e["type"] == "missing") == param]
    return chosen, param, same


def _number(limit: Any) -> str:
    # Pydantic stores the bound in the field's type: an int bound means an integer field.
    return "integer" if isinstance(limit, int) and not isinstance(limit, bool) else "decimal"


def _expected_list(errors: Sequence[Mapping[str, Any]]) -> str:
    kinds = list(dict.fromkeys(_EXPECTED[e["type"]] for e in errors if e["type"] in _EXPECTED))
    return kinds[0] if len(kinds) == 1 else "one of " + ", ".join(kinds[:-1]) + " or " + kinds[-1]


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def invalid_request_from(
    exc: ValidationError | Sequence[Mapping[str, Any]],
    body: Any = _MISSING,
    *,
    model: type[BaseModel] | None = None,
    accepted: Iterable[str] | None = None,
) -> InvalidRequest:
    """The 400 for a validation failure, in OpenAI's codes (see the module docstring).

    ``body`` is the decoded input that was validated; it lets ``param`` skip pydantic's union labels. ``model`` or
    ``accepted`` (field names) let an unknown-parameter message list what is accepted.
    """
    errors: Sequence[Mapping[str, Any]]  # pydantic's ErrorDetails, or FastAPI's plain dicts
    if isinstance(exc, ValidationError):
        # A model validated directly: its locations are field paths. Prefixed as FastAPI's are, so that a field
        # named like a source ("query", "path") is not taken for one and dropped from ``param``.
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
    else:
        errors = list(exc)
    if not errors:
        return InvalidRequest("The request is invalid.", code="invalid_value")
    first = errors[0]
    loc = tuple(first.get("loc", ()))
    if first["type"] == "json_invalid" and loc[:1] == ("body",):
        error = (first.get("ctx") or {}).get("error", first.get("msg"))
        return not_json(f"it is not valid JSON ({error})")
    if len(loc) <= 1 and loc[:1] in ((), ("body",)):
        if first["type"] == "missing":
            return not_json("it is empty")
        if first["type"] == "model_attributes_type":
            if isinstance(first.get("input"), bytes):
                return not_json("it was not sent as Content-Type: application/json")
            return not_an_object(first.get("input"))
    error, param, same = _pick(errors, body)
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    where = f"'{param}'" if param is not None else "the request body"

    if kind == "extra_forbidden":
        field_loc = _field_loc(error["loc"])
        names = list(accepted) if accepted is not None and len(field_loc) == 1 else None
        names = names or _model_fields_at(model, field_loc)
        hint = f"accepted: {', '.join(names)}" if names else "see the API reference for the accepted fields"
        return InvalidRequest(f"Unknown parameter: {where}. Remove it ({hint}).", param=param, code="unknown_parameter")
    if kind == "missing":
        return InvalidRequest(f"Missing required parameter: {where}.", param=param, code="missing_required_parameter")
    if kind in _EXPECTED:
        expected = _expected_list([e for e in same if e["type"] in _EXPECTED] or [error])
        message = f"Invalid type for {where}: expected {expected}, but got {json_kind(value)} instead."
        return InvalidRequest(message, param=param, code="invalid_type")
    if kind in ("literal_error", "enum"):
        shown = f"'{value}'" if isinstance(value, str) else json.dumps(value, default=str)
        message = f"Invalid value for {where}: {shown}. Supported values are: {ctx.get('expected')}."
        return InvalidRequest(message, param=param, code="invalid_value")
    if kind in _RANGE:
        suffix, words, op, key = _RANGE[kind]
        number = _number(ctx.get(key))
        message = (
            f"Invalid {where}: {number} {words} value. "
            f"Expected a value {op} {ctx.get(key)}, but got {json.dumps(value, default=str)} instead."
        )
        return InvalidRequest(message, param=param, code=f"{number}_{suffix}")
    if kind in _LENGTH:
        noun, suffix, bound, key = _LENGTH[kind]
        size = len(value) if isinstance(value, (str, list, tuple)) else ctx.get("actual_length")
        short = "too short" if "below" in suffix else "too long"
        message = (
            f"Invalid {where}: {noun} {short}. Expected {'a' if noun == 'string' else 'an'} {noun} with {bound} "
            f"length {ctx.get(key)}, but got one with length {size} instead."
        )
        return InvalidRequest(message, param=param, code=f"{noun}_{suffix}")
    if kind == "value_error" and "Expected UploadFile" in str(error.get("msg")):
        message = f"Invalid type for {where}: expected a file (a multipart file part), but got {json_kind(value)}."
        return InvalidRequest(message, param=param, code="invalid_type")
    msg = str(error.get("msg", "invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if kind not in _BUILTIN:
        # A custom error (PydanticCustomError) carries a full sentence; its type is the code.
        return InvalidRequest(_sentence(msg), param=param, code=kind)
    if kind in ("value_error", "assertion_error"):
        return InvalidRequest(_sentence(msg), param=param, code="invalid_value")
    return InvalidRequest(f"Invalid value for {where}: {_sentence(msg)}", param=param, code="invalid_value")


def not_json(reason: str, hint: str = "a JSON object") -> InvalidRequest:
    """400 ``invalid_json``: the body could not be read as JSON."""
    return InvalidRequest(
        f"We could not parse the JSON body of your request: {reason}. Send {hint} with Content-Type: application/json.",
        code="invalid_json",
    )


def not_an_object(value: Any, hint: str = "a JSON object") -> InvalidRequest:
    """400 ``invalid_type``: the body is JSON, but not the object every POST takes."""
    return InvalidRequest(
        f"Invalid type for the request body: expected {hint}, but got {json_kind(value)} instead.", code="invalid_type"
    )
