"""The body of ``POST /v1/responses``: OpenAI's fields plus Calypso's citation controls (seed 000)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError

from calypso.api.schemas.bounds import BOUNDED_OBJECT_SCHEMA, BoundedObject, Key, MetadataValue, Name
from calypso.api.schemas.content import MAX_OUTPUT_TOKENS
from calypso.bots import DEFAULT_BOT_ID

KNOWN_INCLUDES = frozenset(
    {"file_search_call.results", "inline_citations", "no_inline_citations", "message.output_text.logprobs"}
)


def _aicore_is_an_object(value: Any) -> Any:
    if isinstance(value, dict) and "_aicore" in value and not isinstance(value["_aicore"], dict):
        raise PydanticCustomError("invalid_type", "metadata._aicore must be an object of citation controls.")
    return value


def _only_aicore_is_an_object(value: dict[str, Any]) -> dict[str, Any]:
    for key, item in value.items():
        if isinstance(item, dict) and key != "_aicore":
            raise PydanticCustomError(
                "invalid_type", "metadata.{key} must be a string; only metadata._aicore is an object.", {"key": key}
            )
    return value


# OpenAI's 16 string pairs (bounds.py), plus seed 000's ``_aicore`` object of citation controls.
ResponsesMetadata = Annotated[
    dict[Key, MetadataValue | dict[str, Any]],
    BoundedObject,
    BeforeValidator(_aicore_is_an_object),
    AfterValidator(_only_aicore_is_an_object),
    BOUNDED_OBJECT_SCHEMA,
]


class ResponsesRequest(BaseModel):
    """Unknown fields are a 400 naming them; the semantic checks are in ``api.translate.responses``."""

    model_config = ConfigDict(extra="forbid")
    model: str = DEFAULT_BOT_ID  # a bot id
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    include: list[str] | None = None
    metadata: ResponsesMetadata | None = None
    citation_compat: Literal["legacy", "native"] | None = None  # also read from metadata (and metadata._aicore)
    sources_appendix: Literal["omit", "include"] | None = None  # likewise
    stream: StrictBool = False
    store: StrictBool = True
    previous_response_id: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1, le=MAX_OUTPUT_TOKENS)
    parallel_tool_calls: StrictBool | None = None
    user: Name | None = None
    truncation: Literal["auto", "disabled"] | None = None
    text: dict[str, Any] | None = None
