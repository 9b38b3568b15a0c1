"""The validation translator on its own: what bots.py and the routes call."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from calypso.api.validation import form_json_object
from calypso.errors import InvalidRequest
from calypso.validation import invalid_request_from, param_path


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text", "image"]
    text: str = ""


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str | list[Part]
    weight: float = Field(1.0, ge=0, le=2)
    tags: list[str] = Field(default_factory=list, max_length=2)


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Item]
    count: int = Field(1, ge=1, le=10)
    name: str | None = None

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value == "reserved":
            raise PydanticCustomError("name_taken", "The name 'reserved' is taken; pick another.")
        if value == "bad":
            raise ValueError("names cannot be 'bad'")
        return value


def _error(body: dict[str, Any], **kwargs: Any) -> InvalidRequest:
    with pytest.raises(ValidationError) as info:
        Request.model_validate(body)
    return invalid_request_from(info.value, body, **kwargs)


_NO_BODY = object()


@pytest.mark.parametrize(
    ("loc", "body", "missing", "expected"),
    [
        (("messages", 0, "role"), _NO_BODY, False, "messages[0].role"),
        (("body", "tools", 1, "type"), _NO_BODY, False, "tools[1].type"),
        (("body",), _NO_BODY, False, None),
        # union labels are not in the input, so they are dropped
        (("content", "str"), {"content": 5}, False, "content"),
        (("content", "list[Part]", 0, "type"), {"content": [{"text": "x"}]}, True, "content[0].type"),
        (("metadata", "str"), {"metadata": {"str": 1}}, False, "metadata.str"),  # a real key stays
    ],
)
def test_param_path(loc: tuple, body: Any, missing: bool, expected: str | None) -> None:
    if body is _NO_BODY:
        assert param_path(loc, missing=missing) == expected
    else:
        assert param_path(loc, body, missing=missing) == expected


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"items": [], "bogus": 1}, "unknown_parameter", "bogus"),
        ({"items": [{"role": "user", "content": "x", "bogus": 1}]}, "unknown_parameter", "items[0].bogus"),
        ({}, "missing_required_parameter", "items"),
        ({"items": [{"content": "x"}]}, "missing_required_parameter", "items[0].role"),
        ({"items": "x"}, "invalid_type", "items"),
        ({"items": [{"role": "user", "content": 5}]}, "invalid_type", "items[0].content"),
        ({"items": [{"role": "user", "content": [5]}]}, "invalid_type", "items[0].content[0]"),
        ({"items": [{"role": "user", "content": [{"type": "video"}]}]}, "invalid_value", "items[0].content[0].type"),
        ({"items": [{"role": "robot", "content": "x"}]}, "invalid_value", "items[0].role"),
        ({"items": [], "count": 0}, "integer_below_min_value", "count"),
        ({"items": [], "count": 11}, "integer_above_max_value", "count"),
        ({"items": [{"role": "user", "content": "x", "weight": -1}]}, "decimal_below_min_value", "items[0].weight"),
        (
            {"items": [{"role": "user", "content": "x", "tags": ["a", "b", "c"]}]},
            "array_above_max_length",
            "items[0].tags",
        ),
        ({"items": [], "name": "reserved"}, "name_taken", "name"),
        ({"items": [], "name": "bad"}, "invalid_value", "name"),
    ],
)
def test_codes_and_params(body: dict, code: str, param: str) -> None:
    error = _error(body, model=Request)
    assert (error.code, error.param, error.status, error.type) == (code, param, 400, "invalid_request_error")


def test_messages() -> None:
    assert _error({"items": [], "bogus": 1}, model=Request).message == (
        "Unknown parameter: 'bogus'. Remove it (accepted: items, count, name)."
    )
    nested = _error({"items": [{"role": "user", "content": "x", "zz": 1}]}, model=Request).message
    assert nested.endswith("(accepted: role, content, weight, tags).")
    assert _error({"items": [], "name": "reserved"}).message == "The name 'reserved' is taken; pick another."
    assert _error({"items": [], "name": "bad"}).message == "names cannot be 'bad'."
    union = _error({"items": [{"role": "user", "content": 5}]}).message
    assert (
        union
        == "Invalid type for 'items[0].content': expected one of a string or an array, but got an integer instead."
    )
    assert _error({"items": [], "count": 11}).message == (
        "Invalid 'count': integer above maximum value. Expected a value <= 10, but got 11 instead."
    )


def test_without_the_body_the_location_is_kept_as_is() -> None:
    # What a caller that has only the exception gets (bots.py today): union labels stay in.
    with pytest.raises(ValidationError) as info:
        Request.model_validate({"items": [{"role": "user", "content": 5}]})
    assert invalid_request_from(info.value).param == "items[0].content.str"


def test_form_json_object() -> None:
    assert form_json_object(None, "metadata") is None and form_json_object("", "metadata") is None
    assert form_json_object('{"a": 1}', "metadata") == {"a": 1}
    with pytest.raises(InvalidRequest) as bad:
        form_json_object("{nope", "metadata")
    assert (bad.value.code, bad.value.param) == ("invalid_json", "metadata")
    with pytest.raises(InvalidRequest) as listed:
        form_json_object("[1]", "metadata")
    assert (listed.value.code, listed.value.param) == ("invalid_type", "metadata")


def test_accepted_names_only_the_top_level_fields() -> None:
    top = _error({"items": [], "bogus": 1}, accepted=["items", "count", "name"])
    assert top.message.endswith("(accepted: items, count, name).")
    nested = _error({"items": [{"role": "user", "content": "x", "zz": 1}]}, accepted=["items", "count", "name"])
    assert "accepted: items" not in nested.message and nested.param == "items[0].zz"
