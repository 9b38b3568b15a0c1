"""What a Responses reply repeats of its request (OpenAI's response object echoes the request's settings)."""

from __future__ import annotations

from typing import Any

from calypso.api.schemas.responses import ResponsesRequest
from calypso.dialects.responses_wire import ResponseEcho


def echo(body: ResponsesRequest) -> ResponseEcho:
    """What the response object repeats of the request; metadata without the ``_aicore`` controls."""
    return ResponseEcho(
        instructions=body.instructions,
        max_output_tokens=body.max_output_tokens,
        previous_response_id=body.previous_response_id,
        store=body.store,
        temperature=body.temperature,
        tool_choice=_choice_echo(body.tool_choice),
        tools=[_tool_echo(tool.model_dump(exclude_unset=True)) for tool in body.tools or []],
        top_p=body.top_p,
        text=body.text.echo() if body.text else {"format": {"type": "text"}, "verbosity": "medium"},
        parallel_tool_calls=body.parallel_tool_calls is not False,
        max_tool_calls=body.max_tool_calls,
        reasoning=body.reasoning.model_dump(exclude_none=True) if body.reasoning else None,
        service_tier=body.service_tier or "default",
        top_logprobs=body.top_logprobs,
        prompt_cache_key=body.prompt_cache_key,
        safety_identifier=body.safety_identifier,
        conversation=conversation_id(body),
        truncation=body.truncation or "disabled",
        user=body.user,
        metadata={k: v for k, v in (body.metadata or {}).items() if k != "_aicore"},
    )


def conversation_id(body: ResponsesRequest) -> str | None:
    """The id ``conversation`` names (a string or ``{"id": …}``)."""
    ref = body.conversation
    return ref if isinstance(ref, str) or ref is None else ref.id


def _choice_echo(choice: Any) -> str | dict[str, Any]:
    if choice is None:
        return "auto"
    return choice if isinstance(choice, str) else dict(choice.model_dump(exclude_none=True))


def _tool_echo(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as OpenAI's response object shows it (a function's ``strict`` and ``parameters`` filled in)."""
    if tool.get("type") == "function":
        return {"parameters": None, "strict": True, "description": None, **tool}
    return tool
