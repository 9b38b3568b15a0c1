"""The generator contract: what every LLM backend takes and yields.

A backend is an object with a ``name`` and an async ``stream(request)`` that
yields ``TextDelta`` events as tokens arrive, optionally ``ToolCalls``, and
exactly one ``Finish`` last. Errors are raised as ``calypso.errors.UpstreamError``
(or ``UpstreamTimeout``), also mid-stream. Closing the async generator early
(``aclose()``, e.g. when the HTTP client went away) must cancel the upstream
request. Backends register in ``calypso.generation.registry``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from calypso.models import Passage


@dataclass
class GenerationRequest:
    """An OpenAI-style chat request: ``messages`` are dicts with role/content (and tool fields)."""

    messages: list[dict[str, Any]]
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None  # Chat Completions' response_format
    options: dict[str, Any] = field(default_factory=dict)  # more Chat Completions fields (top_p, stop, seed…)
    # Retrieved passages, for backends that answer from them directly (the extractive answerer).
    passages: list[Passage] = field(default_factory=list)
    question: str = ""
    searched: bool = True  # False: nothing was searched (a bot without a knowledge base, a tool-result turn)


@dataclass
class TextDelta:
    text: str


@dataclass
class ToolCalls:
    """The complete tool calls of a turn, in OpenAI's shape ``[{id, type, function: {name, arguments}}]``."""

    calls: list[dict[str, Any]]


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Finish:
    reason: str  # "stop", "length", "tool_calls", "content_filter"
    usage: Usage = field(default_factory=Usage)
    model: str | None = None  # the model that actually answered, as the upstream named it


GenerationEvent = TextDelta | ToolCalls | Finish


class Generator(ABC):
    name: str = "generator"
    calls_tools: bool = False  # offers ``tools`` to a model that may call them
    writes_json: bool = False  # honours ``response_format``

    @abstractmethod
    def stream(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        """Yield TextDelta… [ToolCalls] Finish; raise UpstreamError on failure.

        Implement it as an ``async def`` with ``yield``: callers ``aclose()`` the stream to stop it early.
        """
