"""OpenAI's vector store request objects as typed models: chunking strategies, ``expires_after``, search queries.

Their rules live here once, for the server and the OpenAPI document alike (they were checked by hand on
``dict[str, Any]`` fields the document showed as free-form objects). One rule JSON Schema cannot state,
an overlap of at most half the chunk size, is checked by ``chunking_request`` and described on the field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from calypso.errors import InvalidRequest
from calypso.models import StaticChunking
from calypso.services.vector_stores import ChunkingRequest
from calypso.validation import NON_BLANK, WholeNumber

MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS = 100, 4096
MAX_EXPIRY_DAYS = 365


class AutoChunking(BaseModel):
    """The server's own chunking."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["auto"]


class StaticSizes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_chunk_size_tokens: WholeNumber = Field(ge=MIN_CHUNK_TOKENS, le=MAX_CHUNK_TOKENS)
    chunk_overlap_tokens: WholeNumber = Field(ge=0, description="At most half of max_chunk_size_tokens.")


class StaticChunkingStrategy(BaseModel):
    """Chunks of a fixed number of tokens."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["static"]
    static: StaticSizes


ChunkingStrategy = Annotated[AutoChunking | StaticChunkingStrategy, Field(discriminator="type")]


def chunking_request(strategy: AutoChunking | StaticChunkingStrategy | None, param: str) -> ChunkingRequest:
    """What ``strategy`` asks for; a 400 for an overlap above half the chunk size (``param`` names the field)."""
    if strategy is None:
        return None
    if isinstance(strategy, AutoChunking):
        return "auto"
    size, overlap = strategy.static.max_chunk_size_tokens, strategy.static.chunk_overlap_tokens
    if overlap > size // 2:
        raise InvalidRequest(
            f"chunk_overlap_tokens must be an integer from 0 to half of max_chunk_size_tokens ({size // 2}).",
            param=f"{param}.static.chunk_overlap_tokens",
            code="integer_above_max_value",
        )
    return StaticChunking(size, overlap)


class ExpiresAfter(BaseModel):
    """A store expires ``days`` after its last activity."""

    model_config = ConfigDict(extra="forbid")
    anchor: Literal["last_active_at"]
    days: WholeNumber = Field(ge=1, le=MAX_EXPIRY_DAYS)


# A query with something to search for: all-blank text finds nothing and is refused (the route checks it).
SearchQuery = Annotated[str, Field(json_schema_extra={"pattern": NON_BLANK})]
