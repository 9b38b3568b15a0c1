"""The body of ``POST /v1/responses``: OpenAI's fields plus Calypso's citation controls (seed 000)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
    tool_choice: str | dict[str, Any] | None = None
    include: list[str] | None = None
    metadata: dict[str, Any] | None = None
    citation_compat: Literal["legacy", "native"] | None = None  # also read from metadata (and metadata._aicore)
    sources_appendix: Literal["omit", "include"] | None = None  # likewise
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_output_tokens: int | None = Field(None, ge=1)
    parallel_tool_calls: bool | None = None
    user: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    text: dict[str, Any] | None = None
