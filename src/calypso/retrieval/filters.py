"""OpenAI's file-search attribute filters, compiled to a predicate over one file's attributes.

A comparison is ``{"type": eq|ne|gt|gte|lt|lte|in|nin, "key": ..., "value": ...}``; a compound is
``{"type": "and"|"or", "filters": [...]}``, nested to any depth up to ``MAX_DEPTH``. ``gt``..``lte``
compare numbers with numbers and strings with strings; ``in``/``nin`` take a list. A file without the
key matches no comparison (not even ``ne``/``nin``): a filter never selects files for what they lack.
Invalid filters raise InvalidRequest naming the exact part (``filters.filters[1].value``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from calypso.errors import InvalidRequest

Predicate = Callable[[Mapping[str, Any]], bool]
COMPARISONS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")
MAX_DEPTH = 10
_ORDERED = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}


def _scalar(value: object) -> bool:
    return isinstance(value, (str, int, float, bool))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same_kind(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    return (_number(a) and _number(b)) or (isinstance(a, str) and isinstance(b, str))


def _equal(a: object, b: object) -> bool:
    return _same_kind(a, b) and a == b


def compile_filter(raw: object, param: str = "filters", depth: int = 0) -> Predicate:
    """The predicate of one filter tree; InvalidRequest naming ``param`` (and the path below it) when invalid."""
    if not isinstance(raw, dict):
        raise InvalidRequest(
            f"Invalid type for '{param}': expected a filter object such as "
            '{"type": "eq", "key": "author", "value": "Ada"}.',
            param=param,
            code="invalid_type",
        )
    if depth >= MAX_DEPTH:
        raise InvalidRequest(f"Filters nest deeper than {MAX_DEPTH} levels; flatten them.", param=param)
    kind = raw.get("type")
    if kind in ("and", "or"):
        extra = set(raw) - {"type", "filters"}
        if extra:
            raise InvalidRequest(f"Unknown field {sorted(extra)[0]!r} in a compound filter.", param=param)
        members = raw.get("filters")
        if not isinstance(members, list) or not members:
            raise InvalidRequest(
                f"A compound filter ({kind}) needs a non-empty list of filters.", param=f"{param}.filters"
            )
        parts = [compile_filter(m, f"{param}.filters[{i}]", depth + 1) for i, m in enumerate(members)]
        if kind == "and":
            return lambda attributes: all(p(attributes) for p in parts)
        return lambda attributes: any(p(attributes) for p in parts)
    if kind not in COMPARISONS:
        raise InvalidRequest(
            f"Unknown filter type {kind!r}; use one of {', '.join(COMPARISONS)}, and or or.", param=f"{param}.type"
        )
    extra = set(raw) - {"type", "key", "value"}
    if extra:
        raise InvalidRequest(f"Unknown field {sorted(extra)[0]!r} in a comparison filter.", param=param)
    key, value = raw.get("key"), raw.get("value")
    if not isinstance(key, str) or not key:
        raise InvalidRequest("A comparison filter needs a key (an attribute name).", param=f"{param}.key")
    if kind in ("in", "nin"):
        if not isinstance(value, list) or not all(_scalar(v) for v in value):
            raise InvalidRequest(
                f"The value of an {kind} filter is a list of strings or numbers.", param=f"{param}.value"
            )
        options = list(value)
        if kind == "in":
            return lambda a: key in a and any(_equal(a[key], v) for v in options)
        return lambda a: key in a and not any(_equal(a[key], v) for v in options)
    if not _scalar(value):
        raise InvalidRequest(f"The value of an {kind} filter is a string, number or boolean.", param=f"{param}.value")
    if kind == "eq":
        return lambda a: key in a and _equal(a[key], value)
    if kind == "ne":
        return lambda a: key in a and not _equal(a[key], value)
    if isinstance(value, bool):
        raise InvalidRequest(f"A {kind} filter compares numbers or strings, not booleans.", param=f"{param}.value")
    compare = _ORDERED[kind]
    bound: Any = value
    return lambda a: key in a and _same_kind(a[key], value) and not isinstance(a[key], bool) and compare(a[key], bound)
