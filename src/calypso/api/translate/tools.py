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
client's). Without a file_search tool the bot's own knowledge base is searched, as on every surface; with
one, ``narrowing`` says where (the turn preparer looks its stores up).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from calypso.api.schemas.items import FileSearchChoice, FileSearchTool, FunctionChoice, FunctionTool, ToolChoice
from calypso.errors import InvalidRequest
from calypso.scope import check_namespace
from calypso.services.turns import Narrowing


@dataclass(frozen=True)
class ToolPlan:
    retrieve: bool  # search when the scope has a knowledge base (the answerer checks that)
    functions: list[dict[str, Any]] | None  # Chat Completions tools for the upstream; None: none offered
    tool_choice: str | dict[str, Any] | None  # the upstream's


def plan(tools: list[Any], choice: ToolChoice | None, max_tool_calls: int | None) -> ToolPlan:
    """What to do for these tools."""
    functions = [t for t in tools if isinstance(t, FunctionTool)]
    retrieve = max_tool_calls != 0
    upstream: str | dict[str, Any] | None = None
    offered = functions
    if isinstance(choice, str) or choice is None:
        if choice == "none":
            retrieve = False
        upstream = choice if functions and choice is not None else None
    elif isinstance(choice, FileSearchChoice):
        upstream = "none" if functions else None
    elif isinstance(choice, FunctionChoice):
        if choice.name not in {f.name for f in functions}:
            raise InvalidRequest(
                f"tool_choice names the function {choice.name!r}, which is not among tools.",
                param="tool_choice",
                code="invalid_value",
            )
        retrieve = False
        upstream = {"type": "function", "function": {"name": choice.name}}
    else:  # allowed_tools
        retrieve = retrieve and any(t.type == "file_search" for t in choice.tools)
        allowed = {t.name for t in choice.tools if t.type == "function"}
        offered = [f for f in functions if f.name in allowed]
        upstream = choice.mode if offered else None
    return ToolPlan(retrieve, [f.chat_tool() for f in offered] or None, upstream)


def narrowing(tools: list[Any]) -> Narrowing:
    """Where the file_search tools search, over the bot's scope (each checked at the edge, ``FileSearchTool``).

    ``vector_store_ids`` replace the bot's namespaces (a store is a namespace; an unknown one is a 404);
    ``filters`` select the files of those stores whose attributes match (``retrieval/filters.py``).
    """
    found = Narrowing()
    for i, tool in enumerate(tools):
        if not isinstance(tool, FileSearchTool):
            continue  # a function: the upstream's
        param = f"tools[{i}].vector_store_ids"
        if tool.vector_store_ids is not None:
            names = tuple(dict.fromkeys(check_namespace(s, param) for s in tool.vector_store_ids))
            looked_up = (*found.look_up, *((s, param) for s in tool.vector_store_ids))
            found = replace(found, namespaces=names, look_up=looked_up)
        if tool.max_num_results is not None:
            found = replace(found, passage_count=tool.max_num_results)
        if tool.ranking_options is not None:
            found = replace(found, ranking=tool.ranking_options.to_options())
        if tool.filters is not None:
            found = replace(found, filters=(*found.filters, tool.filters.to_filter()))
    return found
