"""The fixed shapes of one Responses reply: the response object, its output items, usage.

``ResponseWire`` holds the ids a reply keeps from ``response.created`` to
``response.completed`` (and in storage), and what it echoes of the request.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from calypso.citations.grounded import GroundedAnswer


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


@dataclass
class ResponseEcho:
    """The request fields a response object repeats, as OpenAI does (defaults filled in)."""

    instructions: str | None = None
    max_output_tokens: int | None = None
    previous_response_id: str | None = None
    store: bool = True
    temperature: float | None = None
    tool_choice: str | dict[str, Any] = "auto"
    tools: list[dict[str, Any]] = field(default_factory=list)
    top_p: float | None = None
    truncation: str = "disabled"
    user: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # the request's, without the _aicore controls
    text: dict[str, Any] = field(default_factory=lambda: {"format": {"type": "text"}, "verbosity": "medium"})
    parallel_tool_calls: bool = True
    max_tool_calls: int | None = None
    reasoning: dict[str, Any] | None = None
    service_tier: str = "default"
    top_logprobs: int | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    conversation: str | None = None  # the Conversations API conversation this turn is appended to


class ResponseWire:
    """Builds the response object and its ``file_search_call`` and ``message`` items for one reply."""

    def __init__(self, model: str, echo: ResponseEcho) -> None:
        self.model = model
        self.echo = echo
        self.id = new_id("resp")
        self.search_id = new_id("fs")
        self.message_id = new_id("msg")
        self.created_at = int(time.time())

    def skeleton(self, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        """The response object without ``usage`` (a finished answer adds it: OpenAI's schema has no null
        there); ``extra`` keys (``error``, ``citations``) go last or replace."""
        echo = self.echo
        body = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": echo.instructions,
            "max_output_tokens": echo.max_output_tokens,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": echo.parallel_tool_calls,
            "max_tool_calls": echo.max_tool_calls,
            "previous_response_id": echo.previous_response_id,
            "store": echo.store,
            "temperature": echo.temperature,
            "text": echo.text,
            "tool_choice": echo.tool_choice,
            "tools": echo.tools,
            "top_p": echo.top_p,
            "truncation": echo.truncation,
            "user": echo.user,
            "reasoning": echo.reasoning,
            "service_tier": echo.service_tier,
            "top_logprobs": echo.top_logprobs,
            "prompt_cache_key": echo.prompt_cache_key,
            "safety_identifier": echo.safety_identifier,
            "background": False,
            "conversation": {"id": echo.conversation} if echo.conversation else None,
            "metadata": dict(echo.metadata),
            **extra,
        }
        if echo.user is None:
            del body["user"]  # OpenAI's schema: a string when present (null is not one)
        return body

    def search_item(self, query: str | None, status: str, results: list[dict[str, Any]] | None) -> dict[str, Any]:
        return {
            "id": self.search_id,
            "type": "file_search_call",
            "status": status,
            "queries": [query] if query else [],
            "results": results,
        }

    def message_item(self, text: str, annotations: list[dict[str, Any]], status: str) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [output_text(text, annotations)],
        }


def function_call_item(call: dict[str, Any], item_id: str, status: str, arguments: str | None = None) -> dict[str, Any]:
    """A Chat Completions tool call as a Responses ``function_call`` item (``arguments`` overrides, for
    the item as first announced). ``item_id`` is the reply's own: upstreams reuse call ids (``call_0``)."""
    function = call.get("function") or {}
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call["id"],
        "name": function.get("name", ""),
        "arguments": function.get("arguments", "") if arguments is None else arguments,
    }


def output_text(text: str, annotations: list[dict[str, Any]]) -> dict[str, Any]:
    """The message's one content part."""
    return {"type": "output_text", "text": text, "annotations": annotations, "logprobs": []}


def usage(answer: GroundedAnswer) -> dict[str, Any]:
    return {
        "input_tokens": answer.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": answer.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }
