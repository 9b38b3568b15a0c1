"""The body of ``POST /v1/responses``: OpenAI's fields plus Calypso's citation controls (seed 000)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from calypso.api.schemas.content import MAX_OUTPUT_TOKENS
from calypso.bots import DEFAULT_BOT_ID

KNOWN_INCLUDES = frozenset(
    {"file_search_call.results", "inline_citations", "no_inline_citations", "message.output_text.logprobs"}
)


class ResponsesRequest(BaseModel):
    """Unknown fields are a 400 naming them; the semantic checks are in ``api.translate.responses``."""

    model_config = ConfigDict(extra="forbid")
    model: str = DEFAULT_BOT_ID  # a bot id
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    include: list[str] | None = None
    metadata: dict[str, Any] | None = None
    citation_compat: Literal["legacy", "native"] | None = None  # also read from metadata (and metadata._aicore)
    sources_appendix: Literal["omit", "include"] | None = None  # likewise
    stream: StrictBool = False
    store: StrictBool = True
    previous_response_id: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1, le=MAX_OUTPUT_TOKENS)
    parallel_tool_calls: StrictBool | None = None
    user: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    text: dict[str, Any] | None = None

    @field_validator("metadata")
    @classmethod
    def _check_metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """OpenAI's 16 string pairs (keys up to 64, values up to 512 characters), plus seed 000's ``_aicore`` object."""
        if value is None:
            return None
        if len(value) > 16:
            raise ValueError(f"metadata holds {len(value)} pairs; at most 16 are accepted")
        for key, item in value.items():
            if len(key) > 64:
                raise ValueError(f"metadata key {key[:20]!r}… is longer than 64 characters")
            if key == "_aicore":
                if not isinstance(item, dict):
                    raise ValueError("metadata._aicore must be an object of citation controls")
            elif not isinstance(item, str) or len(item) > 512:
                raise ValueError(f"metadata.{key} must be a string of at most 512 characters")
        return value
