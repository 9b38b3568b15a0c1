"""Responses ``tools`` and ``tool_choice`` into what the answerer does: search or not, which functions
the upstream is offered, and the ``tool_choice`` it gets.

``file_search`` is Calypso's own tool (run before generation); function tools go to the upstream.

================================  ==============================  =====================================
tool_choice                       file search                     upstream tool_choice
================================  ==============================  =====================================
absent, ``"auto"``                runs                            ``"auto"`` (when functions are offered)
``"required"``                    runs                            ``"required"`` with functions, else none
``"none"``                        skipped (it is a tool too)      ``"none"``
``{"type": "file_search"}``       runs                            ``"none"``: the model answers
``{"type": "function", name}``    skipped                         that function
``{"type": "allowed_tools",       runs when a file_search tool    ``mode``, over the allowed functions
mode, tools}``                    is allowed                      only
================================  ==============================  =====================================

``max_tool_calls: 0`` skips the file search (OpenAI counts built-in tool calls; functions are the
client's). Without a file_search tool the bot's own knowledge base is searched, as on every surface.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calypso.api.schemas.items import FunctionTool
from calypso.errors import InvalidRequest


@dataclass
class ToolPlan:
    retrieve: bool
    functions: list[dict[str, Any]] | None  # Chat Completions tools for the upstream; None: none offered
    tool_choice: str | dict[str, Any] | None  # the upstream's


def _bad(message: str, param: str = "tool_choice") -> InvalidRequest:
    return InvalidRequest(message, param=param, code="invalid_value")


def _allowed_names(tools: Any) -> tuple[bool, set[str]]:
    """(whether file_search is allowed, the allowed function names) of an ``allowed_tools`` list."""
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise _bad("tool_choice.tools must be a list of tools, e.g. [{'type': 'function', 'name': 'f'}].")
    search = any(t.get("type") == "file_search" for t in tools)
    names = {str(t.get("name")) for t in tools if t.get("type") == "function"}
    return search, names


def plan(
    tools: list[Any], choice: str | dict[str, Any] | None, max_tool_calls: int | None, searching: bool
) -> ToolPlan:
    """What to do for these tools; ``searching``: the request's scope has a knowledge base to search."""
    functions = [t for t in tools if isinstance(t, FunctionTool)]
    names = {f.name for f in functions}
    retrieve = searching and max_tool_calls != 0
    upstream: str | dict[str, Any] | None = None
    offered = functions
    if isinstance(choice, str) or choice is None:
        mode = choice or "auto"
        if mode == "none":
            retrieve = False
        upstream = mode if functions and choice is not None else None
    else:
        kind = choice.get("type")
        if kind == "file_search":
            upstream = "none" if functions else None
        elif kind == "function":
            name = choice.get("name")
            if name not in names:
                raise _bad(f"tool_choice names the function {name!r}, which is not among tools.")
            retrieve = False
            upstream = {"type": "function", "function": {"name": name}}
        elif kind == "allowed_tools":
            mode = choice.get("mode", "auto")
            if mode not in ("auto", "required"):
                raise _bad("tool_choice.mode must be 'auto' or 'required'.", "tool_choice.mode")
            search, allowed = _allowed_names(choice.get("tools"))
            retrieve = retrieve and search
            offered = [f for f in functions if f.name in allowed]
            upstream = mode if offered else None
        else:
            raise _bad(
                f"Unsupported tool_choice type {kind!r}; supported: 'auto', 'none', 'required', "
                "{'type': 'file_search'}, {'type': 'function', 'name': ...}, {'type': 'allowed_tools', ...}."
            )
    return ToolPlan(retrieve, [f.chat_tool() for f in offered] or None, upstream)
