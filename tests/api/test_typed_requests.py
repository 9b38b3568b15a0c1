"""Typed request fields (issue 29): filters (``api/schemas/filters.py``), the file_search tool and Responses
``input`` (``api/schemas/responses.py``): what they accept, and the 400 each fault is."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from calypso.api.schemas.filters import Filters, to_filter
from calypso.api.schemas.responses import ResponsesRequest
from calypso.api.translate.responses import input_messages
from calypso.retrieval.filters import MAX_DEPTH, Comparison, Compound, compile_filter
from calypso.validation import invalid_request_from


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filters: Filters | None = None


def _error(body: dict[str, Any], model: type[BaseModel] = Body) -> tuple[str | None, str | None]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(body)
    error = invalid_request_from(info.value, body, model=model)
    return error.param, error.code


TREE = {
    "type": "and",
    "filters": [
        {"type": "eq", "key": "year", "value": 2024},
        {"type": "or", "filters": [{"type": "in", "key": "topic", "value": ["a", 1, True]}]},
    ],
}


def test_a_valid_tree_becomes_the_same_retrieval_filter_as_raw_json() -> None:
    typed = to_filter(Body.model_validate({"filters": TREE}).filters)
    assert typed == compile_filter(TREE)
    assert typed == Compound(
        "and", (Comparison("eq", "year", 2024), Compound("or", (Comparison("in", "topic", ("a", 1, True)),)))
    )
    assert typed({"year": 2024, "topic": 1}) and not typed({"year": 2024, "topic": "b"})


@pytest.mark.parametrize(
    ("filters", "param", "code"),
    [
        ("x", "filters", "invalid_type"),
        ({"type": "or", "filters": [5]}, "filters.filters[0]", "invalid_type"),
        (
            {"type": "and", "filters": [TREE, {"type": "between", "key": "a", "value": 1}]},
            "filters.filters[1].type",
            "invalid_value",
        ),
        ({"key": "a", "value": 1}, "filters.type", "missing_required_parameter"),
        ({"type": "eq", "value": 1}, "filters.key", "missing_required_parameter"),
        ({"type": "eq", "key": "", "value": 1}, "filters.key", "string_below_min_length"),
        ({"type": "eq", "key": "a", "value": None}, "filters.value", "invalid_type"),
        ({"type": "eq", "key": "a", "value": [1]}, "filters.value", "invalid_type"),
        ({"type": "in", "key": "a", "value": "x"}, "filters.value", "invalid_type"),
        ({"type": "gt", "key": "a", "value": True}, "filters.value", "invalid_type"),
        ({"type": "eq", "key": "a", "value": 1, "extra": 1}, "filters.extra", "unknown_parameter"),
        ({"type": "or", "filters": []}, "filters.filters", "array_below_min_length"),
    ],
)
def test_each_fault_names_its_part(filters: object, param: str, code: str) -> None:
    assert _error({"filters": filters}) == (param, code)


def test_nesting_is_bounded_as_in_retrieval() -> None:
    tree: dict[str, Any] = {"type": "eq", "key": "a", "value": 1}
    for _ in range(MAX_DEPTH - 1):
        tree = {"type": "and", "filters": [tree]}
    Body.model_validate({"filters": tree})  # MAX_DEPTH levels
    assert _error({"filters": {"type": "or", "filters": [tree]}}) == ("filters", "invalid_value")


@pytest.mark.parametrize(
    ("tool", "param", "code"),
    [
        ({"type": "web_search"}, "tools[0].type", "invalid_value"),
        ({"type": "file_search", "vector_store_ids": ["general"], "bogus": 1}, "tools[0].bogus", "unknown_parameter"),
        ({"type": "file_search", "vector_store_ids": []}, "tools[0].vector_store_ids", "array_below_min_length"),
        (
            {"type": "file_search", "vector_store_ids": ["general"], "max_num_results": 51},
            "tools[0].max_num_results",
            "integer_above_max_value",
        ),
        (
            {"type": "file_search", "vector_store_ids": ["general"], "max_num_results": True},
            "tools[0].max_num_results",
            "invalid_type",
        ),
        (
            {
                "type": "file_search",
                "vector_store_ids": ["general"],
                "filters": {"type": "gt", "key": "x", "value": [1]},
            },
            "tools[0].filters.value",
            "invalid_type",
        ),
    ],
)
def test_the_file_search_tool_is_typed(tool: dict[str, Any], param: str, code: str) -> None:
    assert _error({"input": "refund", "tools": [tool]}, ResponsesRequest) == (param, code)


@pytest.mark.parametrize(
    ("item", "param", "code"),
    [
        ({"role": "wizard", "content": "x"}, "input[0].role", "invalid_value"),
        ({"type": "computer_call", "role": "user", "content": "x"}, "input[0].type", "invalid_value"),
        ({"type": "function_call_output", "output": "x"}, "input[0].call_id", "missing_required_parameter"),
        ({"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}, "input[0].arguments", "invalid_type"),
        ({"role": "user", "content": 5}, "input[0].content", "invalid_type"),
        ({"role": "user"}, "input[0].content", "missing_required_parameter"),
        # A union inside a union: the fault deepest down is named, not the sibling branch.
        ({"role": "user", "content": [{"type": "input_text", "text": 5}]}, "input[0].content[0].text", "invalid_type"),
        ({"role": "user", "content": [{"text": "x"}]}, "input[0].content[0].type", "missing_required_parameter"),
    ],
)
def test_input_messages_are_typed(item: dict[str, Any], param: str, code: str) -> None:
    assert _error({"input": [item]}, ResponsesRequest) == (param, code)


def test_input_parts_reach_the_model_as_sent() -> None:
    item = {
        "role": "developer",
        "id": "msg_1",
        "content": [{"type": "input_text", "text": "hi"}, {"type": "input_image"}],
    }
    parsed = ResponsesRequest.model_validate({"input": [item]})
    assert input_messages(parsed.input) == [{"role": "system", "content": "hi"}]
