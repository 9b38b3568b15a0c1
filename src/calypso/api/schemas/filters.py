"""OpenAI's attribute filters (``ComparisonFilter``, ``CompoundFilter``) as typed models: one definition for
``POST /v1/vector_stores/{id}/search`` and the ``file_search`` tool of ``/v1/responses``.

The operators, the value each takes and the nesting limit are ``retrieval/filters.py``'s; here they are a
400 naming the exact part (``filters.filters[1].type``) and a JSON schema that says the same: ``in``/``nin``
take a list, the other comparisons a scalar, ``gt``..``lte`` no boolean. A validated filter becomes the
retrieval ``Filter`` (``to_filter``) that services take. One rule JSON Schema cannot state, the nesting
limit, is checked on the whole tree (``Filters``) and said in its description.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from calypso.retrieval.filters import (
    COMPARISONS,
    COMPOUNDS,
    MAX_DEPTH,
    MEMBERSHIP,
    ORDERED,
    Comparison,
    ComparisonType,
    Compound,
    CompoundType,
    Filter,
    levels,
    value_problem,
)


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise PydanticCustomError(
            "invalid_value", "Filter values must be finite numbers, not {value}.", {"value": value}
        )
    return value


FilterScalar = StrictStr | StrictBool | StrictInt | Annotated[StrictFloat, AfterValidator(_finite)]


def _known_comparison(value: Any) -> Any:
    if value not in COMPARISONS:  # and/or are compounds: the discriminator sent those elsewhere
        raise PydanticCustomError(
            "invalid_value",
            "Unknown filter type {type}; use one of {types}, and or or.",
            {"type": repr(value), "types": ", ".join(COMPARISONS)},
        )
    return value


# What ``ComparisonFilter._value_fits_type`` enforces, in the schema: a list for in/nin only, no boolean to order.
_VALUE_BY_TYPE: list[Any] = [
    {
        "if": {"properties": {"type": {"enum": list(MEMBERSHIP)}}},
        "then": {"properties": {"value": {"type": "array"}}},
        "else": {"properties": {"value": {"not": {"type": "array"}}}},
    },
    {
        "if": {"properties": {"type": {"enum": list(ORDERED)}}},
        "then": {"properties": {"value": {"not": {"type": "boolean"}}}},
    },
]


class ComparisonFilter(BaseModel):
    """Compare the attribute ``key`` with ``value``; a file without the key never matches."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"allOf": _VALUE_BY_TYPE})
    type: Annotated[ComparisonType, BeforeValidator(_known_comparison)]
    key: StrictStr = Field(min_length=1, description="The attribute to compare (also file_id, document_id).")
    value: FilterScalar | list[FilterScalar]

    @field_validator("value")
    @classmethod
    def _value_fits_type(cls, value: Any, info: ValidationInfo) -> Any:
        kind = info.data.get("type")
        problem = value_problem(kind, value) if kind is not None else None
        if problem:
            raise PydanticCustomError("invalid_type", problem)
        return value

    def to_filter(self) -> Comparison:
        return Comparison(self.type, self.key, tuple(self.value) if isinstance(self.value, list) else self.value)


class CompoundFilter(BaseModel):
    """All (``and``) or any (``or``) of ``filters``, comparisons or compounds."""

    model_config = ConfigDict(extra="forbid")
    type: CompoundType
    filters: list[AnyFilter] = Field(min_length=1)

    def to_filter(self) -> Compound:
        return Compound(self.type, tuple(f.to_filter() for f in self.filters))


def _kind(value: Any) -> str:
    # By ``type``: and/or are compounds; anything else is read as a comparison, whose errors name the field.
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "compound" if kind in COMPOUNDS else "comparison"


AnyFilter = Annotated[
    Annotated[ComparisonFilter, Tag("comparison")] | Annotated[CompoundFilter, Tag("compound")],
    Discriminator(_kind),
]
CompoundFilter.model_rebuild()


def _within_depth(tree: ComparisonFilter | CompoundFilter) -> ComparisonFilter | CompoundFilter:
    depth = levels(tree.to_filter())
    if depth > MAX_DEPTH:
        raise PydanticCustomError(
            "invalid_value",
            "The filters nest {depth} levels deep; the limit is {limit}: flatten them (an and of ands is one and).",
            {"depth": depth, "limit": MAX_DEPTH},
        )
    return tree


Filters = Annotated[
    AnyFilter,
    AfterValidator(_within_depth),
    Field(description=f"A comparison or a compound of filters, nested at most {MAX_DEPTH} levels."),
]
"""A request's ``filters``: one filter tree, at most ``MAX_DEPTH`` levels deep."""


def to_filter(filters: ComparisonFilter | CompoundFilter | None) -> Filter | None:
    """The retrieval filter of a request's ``filters`` (None: no filter)."""
    return filters.to_filter() if filters is not None else None
