"""The body of ``POST /v1/chat/completions``: OpenAI's Chat Completions request, checked at the edge."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from calypso.api.schemas.bounds import Metadata, Name
from calypso.api.schemas.content import MAX_OUTPUT_TOKENS, ContentPart
from calypso.api.streaming import STREAM_OPTIONS_ALONE, STREAM_OPTIONS_NEED_STREAM, StreamOptions
from calypso.bots import DEFAULT_BOT_ID
from calypso.errors import InvalidRequest
from calypso.validation import WHOLE

UPSTREAM_OPTIONS = (
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "reasoning_effort",
    "verbosity",
    "parallel_tool_calls",
)


EMPTY_MESSAGES = (
    "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."
)
MAX_N = 128  # OpenAI's bound on n; Calypso answers only n=1 (check_n)
# A tool message answers one call: OpenAI requires its tool_call_id (``check``; the schema says so too).
TOOL_NEEDS_CALL_ID: dict[str, Any] = {
    "if": {"required": ["role"], "properties": {"role": {"const": "tool"}}},
    "then": {"required": ["tool_call_id"], "properties": {"tool_call_id": {"type": "string"}}},
}


def check_n(n: int) -> None:
    """OpenAI's range errors for n, then its answer to a value a model does not support: anything but 1."""
    if n < 1:
        raise InvalidRequest(
            f"Invalid 'n': integer below minimum value. Expected a value >= 1, but got {n} instead.",
            param="n",
            code="integer_below_min_value",
        )
    if n > MAX_N:
        raise InvalidRequest(
            f"Invalid 'n': integer above maximum value. Expected a value <= {MAX_N}, but got {n} instead.",
            param="n",
            code="integer_above_max_value",
        )
    if n != 1:
        raise InvalidRequest(
            f"Unsupported value: 'n' does not support {n}: Calypso returns one grounded answer per request "
            "(n=1); send the request n times instead.",
            param="n",
            code="unsupported_value",
        )


class ChatMessage(BaseModel):
    # Extra keys are allowed because clients send earlier replies back as returned
    # (refusal, annotations, citations…); seed 004: they are ignored on input.
    model_config = ConfigDict(extra="allow", json_schema_extra=TOOL_NEEDS_CALL_ID)
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def forwarded(self) -> dict[str, Any]:
        """The fields the model needs; markers in earlier assistant content stay in place."""
        content = [part.wire() for part in self.content] if isinstance(self.content, list) else self.content
        message: dict[str, Any] = {"role": self.role, "content": content}
        for key in ("name", "tool_calls", "tool_call_id"):
            if getattr(self, key) is not None:
                message[key] = getattr(self, key)
        return message


class ChatJsonSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: Annotated[StrictStr, Field(min_length=1, max_length=64)]
    json_schema: dict[str, Any] | None = Field(None, alias="schema")
    description: StrictStr | None = None
    strict: StrictBool | None = None


class ChatResponseFormat(BaseModel):
    """``response_format``: passed to the upstream as sent (``json_schema`` needs its ``json_schema``)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["text", "json_object", "json_schema"]
    json_schema: ChatJsonSchema | None = None

    def upstream(self) -> dict[str, Any] | None:
        if self.type == "text":
            return None
        if self.type == "json_schema" and self.json_schema is None:
            raise InvalidRequest(
                "response_format.json_schema is required when type is json_schema.",
                param="response_format.json_schema",
                code="missing_required_parameter",
            )
        return self.model_dump(by_alias=True, exclude_none=True)


StopSequences = Annotated[StrictStr, Field(max_length=256)]


class ChatCompletionRequest(BaseModel):
    # The rules ``check`` enforces between fields, in the schema too: stream_options needs stream, tool_choice tools.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                STREAM_OPTIONS_NEED_STREAM,
                {
                    "if": {"required": ["tool_choice"], "properties": {"tool_choice": {"not": {"type": "null"}}}},
                    "then": {"required": ["tools"], "properties": {"tools": {"type": "array", "minItems": 1}}},
                },
            ]
        },
    )
    # OpenAI requires it; here a request without one uses the default bot, as /v1/responses does.
    model: str = DEFAULT_BOT_ID
    messages: list[ChatMessage] = Field(json_schema_extra={"minItems": 1})  # ``check``: at least one message
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(None, json_schema_extra={"anyOf": [{"const": 1}, {"type": "null"}]})  # one answer
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=MAX_OUTPUT_TOKENS)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_OUTPUT_TOKENS)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: StrictBool | None = None
    response_format: ChatResponseFormat | None = None
    metadata: Metadata | None = None
    # Passed to the upstream (``UPSTREAM_OPTIONS``); with the extractive answerer they change nothing.
    top_p: float | None = Field(None, ge=0, le=1)
    stop: StopSequences | Annotated[list[StopSequences], Field(max_length=4)] | None = None
    seed: Annotated[StrictInt, WHOLE] | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    # Accepted and ignored: the answer's text is rewritten around its citations, so token logprobs of the
    # model's own text would not match it (choices[0].logprobs stays null), and the rest change nothing.
    logprobs: StrictBool | None = None
    top_logprobs: Annotated[StrictInt, Field(ge=0, le=20), WHOLE] | None = None
    logit_bias: dict[str, int] | None = None
    user: Name | None = None
    store: StrictBool | None = None
    service_tier: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None

    def upstream_options(self) -> dict[str, Any]:
        """The sampling options the upstream gets as sent (``parallel_tool_calls`` only with tools)."""
        options = {name: getattr(self, name) for name in UPSTREAM_OPTIONS if getattr(self, name) is not None}
        if not self.tools:
            options.pop("parallel_tool_calls", None)
        return options

    def check(self) -> None:
        if self.n is not None:
            check_n(self.n)
        if not self.messages:
            raise InvalidRequest(EMPTY_MESSAGES, param="messages", code="empty_array")
        for i, message in enumerate(self.messages):
            if message.role == "tool" and message.tool_call_id is None:
                raise InvalidRequest(
                    f"Missing required parameter: 'messages[{i}].tool_call_id'.",
                    param=f"messages[{i}].tool_call_id",
                    code="missing_required_parameter",
                )
        if self.stream_options is not None and not self.stream:
            raise InvalidRequest(STREAM_OPTIONS_ALONE, param="stream_options")
        if self.top_logprobs is not None and not self.logprobs:
            raise InvalidRequest("top_logprobs needs logprobs: true.", param="top_logprobs")
        if self.tool_choice is not None and not self.tools:
            raise InvalidRequest("tool_choice is only allowed when tools are given.", param="tool_choice")
        if self.max_tokens and self.max_completion_tokens and self.max_tokens != self.max_completion_tokens:
            raise InvalidRequest(
                "max_tokens and max_completion_tokens disagree; send only max_completion_tokens.", param="max_tokens"
            )
