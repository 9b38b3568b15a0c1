"""What answering yields, in order: ``Retrieved``, then text and marker events (and tool calls), then ``Done``.

The renderers of every dialect consume these; the answering service produces them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calypso.citations.composer import MarkerEvent, TextEvent
from calypso.citations.grounded import GroundedAnswer, Source


@dataclass
class Retrieved:
    sources: list[Source]
    query: str | None  # None: retrieval did not run
    # Whether markers can become citations (a knowledge base, citations enabled): renderers read it here.
    citing: bool = True


@dataclass
class ToolCallsEvent:
    calls: list[dict[str, Any]]


@dataclass
class Done:
    answer: GroundedAnswer


AnswerEvent = Retrieved | TextEvent | MarkerEvent | ToolCallsEvent | Done


__all__ = ["AnswerEvent", "Done", "MarkerEvent", "Retrieved", "TextEvent", "ToolCallsEvent"]
