"""OpenAI attribute filters compiled to predicates (``retrieval/filters.py``)."""

from __future__ import annotations

import pytest

from calypso.errors import InvalidRequest
from calypso.retrieval.filters import MAX_DEPTH, compile_filter

FILE = {"year": 2024, "topic": "refunds", "public": True, "score": 0.5}


@pytest.mark.parametrize(
    ("filters", "matches"),
    [
        ({"type": "eq", "key": "year", "value": 2024}, True),
        ({"type": "eq", "key": "year", "value": 2024.0}, True),
        ({"type": "eq", "key": "year", "value": "2024"}, False),  # a string never equals a number
        ({"type": "eq", "key": "public", "value": 1}, False),  # nor a boolean a number
        ({"type": "ne", "key": "topic", "value": "office"}, True),
        ({"type": "ne", "key": "missing", "value": "x"}, False),  # a missing key matches nothing
        ({"type": "gt", "key": "score", "value": 0.25}, True),
        ({"type": "gte", "key": "year", "value": 2024}, True),
        ({"type": "lt", "key": "topic", "value": "zebra"}, True),  # strings compare with strings
        ({"type": "lt", "key": "topic", "value": 5}, False),
        ({"type": "lte", "key": "year", "value": 2023}, False),
        ({"type": "in", "key": "topic", "value": ["office", "refunds"]}, True),
        ({"type": "nin", "key": "topic", "value": ["office", "refunds"]}, False),
        (
            {
                "type": "and",
                "filters": [
                    {"type": "eq", "key": "public", "value": True},
                    {
                        "type": "or",
                        "filters": [
                            {"type": "eq", "key": "year", "value": 1},
                            {"type": "gt", "key": "year", "value": 2000},
                        ],
                    },
                ],
            },
            True,
        ),
    ],
)
def test_comparisons_and_compounds(filters: dict, matches: bool) -> None:
    assert compile_filter(filters)(FILE) is matches


@pytest.mark.parametrize(
    ("filters", "param"),
    [
        ("x", "filters"),
        ({"type": "between", "key": "a", "value": 1}, "filters.type"),
        ({"type": "eq", "value": 1}, "filters.key"),
        ({"type": "eq", "key": "a", "value": None}, "filters.value"),
        ({"type": "in", "key": "a", "value": "x"}, "filters.value"),
        ({"type": "gt", "key": "a", "value": True}, "filters.value"),
        ({"type": "eq", "key": "a", "value": 1, "extra": 1}, "filters"),
        ({"type": "or", "filters": []}, "filters.filters"),
        ({"type": "and", "filters": [{"type": "eq", "key": "a", "value": 1}, 5]}, "filters.filters[1]"),
    ],
)
def test_invalid_filters_name_the_part(filters: object, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        compile_filter(filters)
    assert info.value.param == param


def test_nesting_is_bounded() -> None:
    deep: dict = {"type": "eq", "key": "a", "value": 1}
    for _ in range(MAX_DEPTH + 1):
        deep = {"type": "and", "filters": [deep]}
    with pytest.raises(InvalidRequest):
        compile_filter(deep)
