"""Responses ``input`` items into the chat messages the answerer (and the upstream) read.

=======================  ==========================================================================
item                     in the prompt
=======================  ==========================================================================
message (or no type)     a message; ``developer`` becomes ``system``; text parts joined, other parts
                         (images, files, an earlier answer's ``annotations``) not read
file_search_call         dropped: Calypso's own output, it searches again on this turn
reasoning                dropped: the upstream is a Chat Completions server
function_call            the assistant message's ``tool_calls`` (consecutive calls: one message)
function_call_output     a ``tool`` message answering ``call_id``
item_reference           the item it names, from the ``previous_response_id`` chain (its output and
                         input items); an id found nowhere there is a 400 naming ``input[i].id``
=======================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from calypso.dialects.responses_wire import new_id
from calypso.errors import InvalidRequest
from calypso.services.answering import message_text

# An item id -> the stored item (an output or input item of an earlier response), or None.
ItemLookup = Callable[[str], dict[str, Any] | None]

DROPPED = frozenset({"file_search_call", "reasoning"})


def _text(content: Any) -> str:
    return content if isinstance(content, str) else message_text({"content": content})


_ID_PREFIXES = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "item_reference": "ref"}


def listed(item: dict[str, Any]) -> dict[str, Any]:
    """An input item as ``GET /v1/responses/{id}/input_items`` lists it: with an id, a message's text as parts."""
    out = dict(item)
    kind = out.setdefault("type", "message")
    if not isinstance(out.get("id"), str):
        out["id"] = new_id(_ID_PREFIXES.get(kind, "item"))
    if kind == "message" and isinstance(out.get("content"), str):
        part = "output_text" if out.get("role") == "assistant" else "input_text"
        out["content"] = [{"type": part, "text": out["content"]}]
    if kind in ("message", "function_call", "function_call_output"):
        out.setdefault("status", "completed")  # OpenAI's listed items always carry one
    return out


def item_dicts(raw: Sequence[BaseModel]) -> list[dict[str, Any]]:
    """The items as sent (aliases, no defaults filled in but ``type``), each with an id, as they are stored."""
    out = []
    for item in raw:
        data = item.model_dump(by_alias=True, exclude_unset=True)
        data.setdefault("type", getattr(item, "type", "message"))
        out.append(listed(data))
    return out


def _tool_calls_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message that holds function calls: the previous one when it is one already."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and "tool_calls" in last:
        return last
    message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": []}
    messages.append(message)
    return message


def chat_messages(items: list[dict[str, Any]], lookup: ItemLookup, *, strict: bool = True) -> list[dict[str, Any]]:
    """``items`` (validated ``input`` items, as dicts) as chat messages, in order; ``strict`` False drops a
    reference that resolves nowhere instead of the 400 (for counting tokens)."""
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "item_reference":
            found = lookup(str(item.get("id")))
            if (found is None or found.get("type") == "item_reference") and not strict:
                continue
            if found is None or found.get("type") == "item_reference":
                raise InvalidRequest(
                    f"input[{i}] references item {item.get('id')!r}, which is not in the previous_response_id "
                    "chain; send the item itself, or continue from the response that holds it.",
                    param=f"input[{i}].id",
                    code="invalid_value",
                )
            item, kind = found, found.get("type", "message")
        if kind in DROPPED:
            continue
        if kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            _tool_calls_message(messages)["tool_calls"].append(call)
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": _text(item["output"])})
        elif kind == "message":
            role = item["role"]
            messages.append({"role": "system" if role == "developer" else role, "content": _text(item["content"])})
    return messages


def items_by_id(response_body: dict[str, Any], input_items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A stored response's input and output items, by id (those that have one)."""
    found: dict[str, dict[str, Any]] = {}
    for item in [*input_items, *(response_body.get("output") or [])]:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            found[item["id"]] = item
    return found
