"""The body of ``POST /v1/responses``: OpenAI's fields plus Calypso's citation controls (seed 000)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic_core import PydanticCustomError

from calypso.api.schemas.bounds import BOUNDED_OBJECT_SCHEMA, MAX_VALUE_CHARS, BoundedObject, Key, MetadataValue, Name
from calypso.api.schemas.content import MAX_OUTPUT_TOKENS
from calypso.api.schemas.filters import Filters
from calypso.api.schemas.ranking import FileSearchRankingOptions
from calypso.bots import DEFAULT_BOT_ID
from calypso.scope import MAX_PASSAGES, NAME_SCHEMA
from calypso.validation import NON_BLANK, WHOLE

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
    Field(
        json_schema_extra={
            "additionalProperties": {"type": "string", "maxLength": MAX_VALUE_CHARS},
            "properties": {"_aicore": {"type": "object"}},
        }
    ),
]


class InputPart(BaseModel):
    """One part of an input message's content; its ``text``, when given, is a string (other fields pass unread)."""

    model_config = ConfigDict(extra="allow")
    type: StrictStr
    text: StrictStr = ""  # absent stays absent: the translation reads the parts as sent (``exclude_unset``)


class InputMessage(BaseModel):
    """One item of ``input``: a message (other item types are a 400); fields such as ``id`` pass unread."""

    model_config = ConfigDict(extra="allow")
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: StrictStr | list[InputPart]


# Text with something in it, or one message or more (the translation checks both: its 400s say how to fix it).
Input = (
    Annotated[str, Field(json_schema_extra={"pattern": NON_BLANK})]
    | Annotated[list[InputMessage], Field(json_schema_extra={"minItems": 1})]
)
_INCLUDE_SCHEMA: dict[str, Any] = {"items": {"enum": sorted(KNOWN_INCLUDES)}}  # others: a 400 naming them
StoreId = Annotated[str, Field(json_schema_extra=NAME_SCHEMA)]


class FileSearchTool(BaseModel):
    """The one tool this server runs: search the bot's namespaces, or these vector stores, for passages."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["file_search"]
    # Each id a namespace name (the translation checks it, code invalid_namespace) and then a store (or a 404).
    vector_store_ids: Annotated[list[StoreId], Field(min_length=1)] | None = None
    max_num_results: Annotated[StrictInt, Field(ge=1, le=MAX_PASSAGES), WHOLE] | None = None
    filters: Filters | None = None
    ranking_options: FileSearchRankingOptions | None = None


class ResponsesRequest(BaseModel):
    """Unknown fields are a 400 naming them; the semantic checks are in ``api.translate.responses``."""

    model_config = ConfigDict(extra="forbid")
    model: str = DEFAULT_BOT_ID  # a bot id
    input: Input
    instructions: str | None = None
    tools: list[FileSearchTool] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    include: list[str] | None = Field(None, json_schema_extra=_INCLUDE_SCHEMA)
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
