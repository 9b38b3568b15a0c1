"""OpenAI's bounds on what a client may store, as types: one definition for every route that takes them.

    metadata      at most 16 pairs; keys up to 64 characters; values strings up to 512 characters
    attributes    the same, but a value may also be a boolean or a (finite) number
    names         up to 256 characters (a vector store's name, a Responses ``user``)
    descriptions  up to 512 characters

Unbounded, a 1 MB name or a 10,000-key object was stored as sent and sent back in every listing
(ten stores with 3.9 MB names made one page 39 MB; issue 26). Each fault is a 400 with OpenAI's code:
``object_above_max_properties`` (too many pairs), ``string_above_max_length`` (a key, value or name too
long, ``param`` naming it), ``invalid_type`` (a value that is not a string). The JSON schema of each
type says the same, so the OpenAPI document is as strict as the server.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic_core import PydanticCustomError

MAX_PAIRS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512
MAX_NAME_CHARS = 256
MAX_DESCRIPTION_CHARS = 512


def _bounded_object(value: Any) -> Any:
    """The pair count, checked before the pairs: 10,000 of them are refused without reading them."""
    if isinstance(value, dict) and len(value) > MAX_PAIRS:
        raise PydanticCustomError(
            "object_above_max_properties",
            "Too many properties: expected an object with at most {limit} properties, but got one with {count} "
            "properties instead; keep the {limit} that matter.",
            {"limit": MAX_PAIRS, "count": len(value)},
        )
    return value  # anything else: the dict type reports it


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise PydanticCustomError(
            "invalid_value", "Attribute values must be finite numbers, not {value}.", {"value": value}
        )
    return value


BoundedObject = BeforeValidator(_bounded_object)
"""The pair-count rule, for an object whose values follow a rule of their own (Responses ``metadata``,
whose ``_aicore`` value is an object)."""
BOUNDED_OBJECT_SCHEMA = Field(json_schema_extra={"maxProperties": MAX_PAIRS})

Key = Annotated[str, Field(max_length=MAX_KEY_CHARS)]  # a long key's error names it: ``metadata.<key>``
MetadataValue = Annotated[StrictStr, Field(max_length=MAX_VALUE_CHARS)]
AttributeValue = MetadataValue | StrictBool | StrictInt | Annotated[StrictFloat, AfterValidator(_finite)]

Metadata = Annotated[dict[Key, MetadataValue], BoundedObject, BOUNDED_OBJECT_SCHEMA]
"""OpenAI's ``metadata``: up to 16 string pairs."""

Attributes = Annotated[dict[Key, AttributeValue], BoundedObject, BOUNDED_OBJECT_SCHEMA]
"""OpenAI's file ``attributes`` (and an upload's ``metadata``): up to 16 pairs of strings, booleans, numbers."""

Name = Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)]
Description = Annotated[StrictStr, Field(max_length=MAX_DESCRIPTION_CHARS)]
