"""The body of ``POST /v1/responses``: OpenAI's fields plus Calypso's citation controls (seed 000)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic_core import PydanticCustomError

from calypso.api.schemas.bounds import BOUNDED_OBJECT_SCHEMA, MAX_VALUE_CHARS, BoundedObject, Key, MetadataValue, Name
from calypso.api.schemas.content import MAX_OUTPUT_TOKENS
from calypso.api.schemas.items import InputItem, Tool, ToolChoice
from calypso.bots import DEFAULT_BOT_ID
from calypso.validation import NON_BLANK, WHOLE

KNOWN_INCLUDES = frozenset(
    {
        "file_search_call.results",
        "inline_citations",
        "no_inline_citations",
        "message.output_text.logprobs",
        # OpenAI's other includables: accepted, with nothing to add (no such tools or reasoning items here;
        # agent frameworks send reasoning.encrypted_content by default with store=false).
        "reasoning.encrypted_content",
        "message.input_image.image_url",
        "computer_call_output.output.image_url",
        "web_search_call.results",
        "web_search_call.action.sources",
        "code_interpreter_call.outputs",
    }
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


# Text with something in it, or one item or more (the translation checks both: its 400s say how to fix it).
Input = (
    Annotated[str, Field(json_schema_extra={"pattern": NON_BLANK})]
    | Annotated[list[InputItem], Field(json_schema_extra={"minItems": 1})]
)
_INCLUDE_SCHEMA: dict[str, Any] = {"items": {"enum": sorted(KNOWN_INCLUDES)}}  # others: a 400 naming them


class JsonSchemaFormat(BaseModel):
    """``text.format`` json_schema: the reply is JSON valid against ``schema`` (the upstream constrains it)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: Literal["json_schema"]
    name: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    json_schema: dict[str, Any] = Field(alias="schema")
    description: StrictStr | None = None
    strict: StrictBool | None = None

    def response_format(self) -> dict[str, Any]:
        """Chat Completions' ``response_format`` for the same schema."""
        inner: dict[str, Any] = {"name": self.name, "schema": self.json_schema}
        if self.description is not None:
            inner["description"] = self.description
        if self.strict is not None:
            inner["strict"] = self.strict
        return {"type": "json_schema", "json_schema": inner}


class SimpleFormat(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text", "json_object"]


class TextOptions(BaseModel):
    """``text``: the reply's format and verbosity, echoed back as sent (defaults filled in)."""

    model_config = ConfigDict(extra="forbid")
    format: Annotated[JsonSchemaFormat | SimpleFormat, Field(discriminator="type")] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None

    def response_format(self) -> dict[str, Any] | None:
        """The upstream's ``response_format``; None for plain text."""
        if isinstance(self.format, JsonSchemaFormat):
            return self.format.response_format()
        if isinstance(self.format, SimpleFormat) and self.format.type == "json_object":
            return {"type": "json_object"}
        return None

    def echo(self) -> dict[str, Any]:
        fmt = self.format.model_dump(by_alias=True, exclude_none=True) if self.format else {"type": "text"}
        return {"format": fmt, "verbosity": self.verbosity or "medium"}


class ResponsesStreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_obfuscation: StrictBool | None = None  # accepted; Calypso's events carry no obfuscation padding


class Reasoning(BaseModel):
    """Passed to the upstream as ``reasoning_effort``; ``summary`` is accepted (no reasoning items are returned)."""

    model_config = ConfigDict(extra="forbid")
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None


class ConversationRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: StrictStr


class ResponsesRequest(BaseModel):
    """Unknown fields are a 400 naming them; the semantic checks are in ``api.translate.responses``."""

    model_config = ConfigDict(extra="forbid")
    model: str = DEFAULT_BOT_ID  # a bot id
    input: Input
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None  # what each form does: translate/tools.py
    include: list[str] | None = Field(None, json_schema_extra=_INCLUDE_SCHEMA)
    metadata: ResponsesMetadata | None = None
    citation_compat: Literal["legacy", "native"] | None = None  # also read from metadata (and metadata._aicore)
    sources_appendix: Literal["omit", "include"] | None = None  # likewise
    stream: StrictBool = False
    store: StrictBool = True
    previous_response_id: str | None = None
    # OpenAI's Conversations API: the stored conversation this turn reads and is appended to.
    conversation: StrictStr | ConversationRef | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1, le=MAX_OUTPUT_TOKENS)
    parallel_tool_calls: StrictBool | None = None
    max_tool_calls: Annotated[StrictInt, Field(ge=0), WHOLE] | None = None
    user: Name | None = None
    truncation: Literal["auto", "disabled"] | None = None
    text: TextOptions | None = None
    reasoning: Reasoning | None = None
    # Accepted, with no effect on a grounded answer (docs/agents.md): Calypso has no prompt cache, one tier,
    # and no logprobs from its upstream; safety_identifier is OpenAI's abuse-monitoring id.
    stream_options: ResponsesStreamOptions | None = None
    prompt_cache_key: Annotated[StrictStr, Field(max_length=1024)] | None = None
    prompt_cache_retention: Literal["in-memory", "24h"] | None = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None
    top_logprobs: Annotated[StrictInt, Field(ge=0, le=20), WHOLE] | None = None
    safety_identifier: Annotated[StrictStr, Field(max_length=64)] | None = None
    # true: a 400 (no background mode), which the schema says
    background: StrictBool | None = Field(None, json_schema_extra={"anyOf": [{"const": False}, {"type": "null"}]})


class InputTokensRequest(BaseModel):
    """The body of ``POST /v1/responses/input_tokens``: what a response would be asked with."""

    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    input: Input | None = None
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    previous_response_id: str | None = None
    parallel_tool_calls: StrictBool | None = None
    reasoning: Reasoning | None = None
    text: TextOptions | None = None
    truncation: Literal["auto", "disabled"] | None = None
