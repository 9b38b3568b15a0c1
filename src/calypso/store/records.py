"""What the stores hand back: plain records, no behaviour.

Documents, pages and chunks are in ``calypso.models`` (ingestion makes them);
these are the records only storage produces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from calypso.models import Chunk

T = TypeVar("T")


@dataclass
class Listing(Generic[T]):
    """One page of a cursor listing."""

    items: list[T]
    has_more: bool


@dataclass
class StoredChunk:
    key: int  # store-wide unique integer id, the retrieval index's chunk key
    document_id: str
    chunk: Chunk


@dataclass
class IndexedChunk:
    """What a retrieval index needs of one chunk: its key, text and the terms retrieval stored with it."""

    key: int
    text: str
    terms: str | None  # opaque to the store: retrieval encodes and decodes it


@dataclass(frozen=True)
class StoredBot:
    workspace: str
    id: str
    config: dict
    created_at: int
    updated_at: int


@dataclass
class Conversation:
    id: str
    workspace: str
    bot_id: str
    created_at: int
    metadata: dict = field(default_factory=dict)


@dataclass
class StoredMessage:
    id: str
    role: str  # "user" | "assistant"
    content: str | None
    citations: list[dict] | None  # always None on user messages
    created_at: int
    extra: dict = field(default_factory=dict)  # annotations, finish_reason, usage, plain text for the history


@dataclass
class StoredResponse:
    id: str
    bot_id: str
    body: dict
    history: list[dict]  # chat messages up to and including this reply, for previous_response_id


@dataclass
class ApiKey:
    id: str
    workspace: str
    name: str
    prefix: str  # the first characters, to recognise a key in listings
    created_at: int
    revoked_at: int | None
