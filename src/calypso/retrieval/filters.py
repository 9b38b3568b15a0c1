"""OpenAI's file-search attribute filters: a typed tree that is itself the predicate over one file's attributes.

A comparison is ``{"type": eq|ne|gt|gte|lt|lte|in|nin, "key": ..., "value": ...}``; a compound is
``{"type": "and"|"or", "filters": [...]}``, nested at most ``MAX_DEPTH`` levels. ``gt``..``lte``
compare numbers with numbers and strings with strings; ``in``/``nin`` take a list. A file without the
key matches no comparison (not even ``ne``/``nin``): a filter never selects files for what they lack.

The HTTP API validates filters at the edge (``api/schemas/filters.py``, which takes its operators and
depth from here) and hands services a ``Filter``; ``compile_filter`` reads the same tree from raw JSON
for callers without those models, raising InvalidRequest naming the exact part (``filters.filters[1].value``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from calypso.errors import InvalidRequest

Predicate = Callable[[Mapping[str, Any]], bool]
EqualityType = Literal["eq", "ne"]
OrderType = Literal["gt", "gte", "lt", "lte"]
MembershipType = Literal["in", "nin"]
ComparisonType = Literal[EqualityType, OrderType, MembershipType]
CompoundType = Literal["and", "or"]
COMPARISONS: tuple[ComparisonType, ...] = get_args(ComparisonType)
ORDERED: tuple[OrderType, ...] = get_args(OrderType)
MEMBERSHIP: tuple[MembershipType, ...] = get_args(MembershipType)
COMPOUNDS: tuple[CompoundType, ...] = get_args(CompoundType)
MAX_DEPTH = 10
Scalar = str | int | float | bool
_ORDER = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}


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


@dataclass(frozen=True)
class Comparison:
    """``key`` compared with ``value``: a tuple of scalars for in/nin, a string or number for gt..lte (as
    ``compile_filter`` and the API's models build it)."""

    type: ComparisonType
    key: str
    value: Scalar | tuple[Scalar, ...]

    def __call__(self, attributes: Mapping[str, Any]) -> bool:
        if self.key not in attributes:
            return False
        found, value = attributes[self.key], self.value
        if isinstance(value, tuple):  # in / nin
            listed = any(_equal(found, v) for v in value)
            return listed if self.type == "in" else not listed
        if self.type in ("eq", "ne"):
            equal = _equal(found, value)
            return equal if self.type == "eq" else not equal
        return _same_kind(found, value) and not isinstance(found, bool) and bool(_ORDER[self.type](found, value))


@dataclass(frozen=True)
class Compound:
    """All (``and``) or any (``or``) of ``filters``."""

    type: CompoundType
    filters: tuple[Filter, ...]

    def __call__(self, attributes: Mapping[str, Any]) -> bool:
        if self.type == "and":
            return all(f(attributes) for f in self.filters)
        return any(f(attributes) for f in self.filters)


Filter: TypeAlias = Comparison | Compound
"""A filter tree; each node is the predicate of the files it selects."""


def levels(tree: Filter) -> int:
    """How many levels ``tree`` nests (a comparison is one)."""
    if isinstance(tree, Comparison):
        return 1
    return 1 + max(levels(f) for f in tree.filters)


def compile_filter(raw: object, param: str = "filters", depth: int = 0) -> Filter:
    """The filter tree of raw JSON; InvalidRequest naming ``param`` (and the path below it) when invalid."""
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
    if kind in COMPOUNDS:
        extra = set(raw) - {"type", "filters"}
        if extra:
            raise InvalidRequest(f"Unknown field {sorted(extra)[0]!r} in a compound filter.", param=param)
        members = raw.get("filters")
        if not isinstance(members, list) or not members:
            raise InvalidRequest(
                f"A compound filter ({kind}) needs a non-empty list of filters.", param=f"{param}.filters"
            )
        parts = tuple(compile_filter(m, f"{param}.filters[{i}]", depth + 1) for i, m in enumerate(members))
        return Compound(kind, parts)
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
    problem = value_problem(kind, value)
    if problem:
        raise InvalidRequest(problem, param=f"{param}.value")
    checked: Any = value
    return Comparison(kind, key, tuple(checked) if isinstance(checked, list) else checked)


def value_problem(kind: ComparisonType, value: object) -> str | None:
    """What is wrong with ``value`` for a ``kind`` comparison (None: nothing), said how to fix it."""
    if kind in MEMBERSHIP:
        if not isinstance(value, list) or not all(_scalar(v) for v in value):
            return f"The value of a filter of type {kind} is a list of strings or numbers."
        return None
    if kind in ORDERED:
        if not _scalar(value) or isinstance(value, bool):
            return f"A filter of type {kind} compares numbers or strings: its value is a number or a string."
        return None
    if not _scalar(value):
        return f"The value of a filter of type {kind} is a string, number or boolean."
    return None
