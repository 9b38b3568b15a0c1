"""The items of a Responses ``input`` and its ``tools``: one model per OpenAI type, chosen by ``type``.

Every input item OpenAI defines for a text conversation is accepted (``api/translate/items.py`` says
what each becomes in the prompt); an unknown ``type`` is a 400 listing the supported ones, at
``input[i].type`` (or ``tools[i].type``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictInt, StrictStr, Tag

from calypso.api.schemas.filters import Filters
from calypso.api.schemas.ranking import FileSearchRankingOptions
from calypso.scope import MAX_PASSAGES, NAME_SCHEMA
from calypso.validation import WHOLE

_UNKNOWN = "unknown"


def _type_of(known: tuple[str, ...], default: str | None) -> Any:
    """The discriminator: an item's ``type`` (``default`` when absent); a type no model has is ``unknown``."""

    def tag(value: Any) -> str:
        kind = value.get("type", default) if isinstance(value, dict) else getattr(value, "type", default)
        return kind if kind in known else _UNKNOWN

    return tag


def _matches_nothing(schema: dict[str, Any]) -> None:
    """The JSON schema of a fail-only model: it admits no value, so ``oneOf`` keeps only the real types."""
    schema.clear()
    schema["not"] = {}


# The models that only fail: each names the supported types in its 400, and none is in the OpenAPI document.
_FAIL_ONLY = ConfigDict(extra="allow", json_schema_extra=_matches_nothing)


# -- input items --------------------------------------------------------------------------------


class InputPart(BaseModel):
    """One part of a message's content; its ``text``, when given, is a string (other fields pass unread,
    so an earlier assistant turn's ``annotations`` are ignored on input, as seed 004 says of citations)."""

    model_config = ConfigDict(extra="allow")
    type: StrictStr
    text: StrictStr = ""  # absent stays absent: the translation reads the parts as sent (``exclude_unset``)


class InputMessage(BaseModel):
    """A message, with ``type: "message"`` or without ``type`` (OpenAI's EasyInputMessage)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: StrictStr | list[InputPart]


class FileSearchCallItem(BaseModel):
    """A ``file_search_call`` from an earlier reply: Calypso's own output, dropped from the prompt."""

    model_config = ConfigDict(extra="allow")
    type: Literal["file_search_call"]


class ReasoningItem(BaseModel):
    """A model's reasoning from an earlier turn: dropped (the upstream is a Chat Completions server)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["reasoning"]


class FunctionCallItem(BaseModel):
    """A function call the model made: the assistant ``tool_calls`` message of the prompt."""

    model_config = ConfigDict(extra="allow")
    type: Literal["function_call"]
    call_id: StrictStr
    name: StrictStr
    arguments: StrictStr


class FunctionCallOutputItem(BaseModel):
    """What the client's function returned: the ``tool`` message of the prompt."""

    model_config = ConfigDict(extra="allow")
    type: Literal["function_call_output"]
    call_id: StrictStr
    output: StrictStr | list[InputPart]


class ItemReference(BaseModel):
    """An earlier item named by id, resolved from the ``previous_response_id`` chain."""

    model_config = ConfigDict(extra="allow")
    type: Literal["item_reference"]
    id: StrictStr


ITEM_TYPES = ("message", "file_search_call", "function_call", "function_call_output", "item_reference", "reasoning")


class UnknownInputItem(BaseModel):
    """Any other ``type``: only fails, with a literal error listing the supported types."""

    model_config = _FAIL_ONLY
    type: Literal["message", "file_search_call", "function_call", "function_call_output", "item_reference", "reasoning"]


InputItem = Annotated[
    Annotated[InputMessage, Tag("message")]
    | Annotated[FileSearchCallItem, Tag("file_search_call")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ItemReference, Tag("item_reference")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[UnknownInputItem, Tag(_UNKNOWN)],
    Discriminator(_type_of(ITEM_TYPES, "message")),
]


# -- tools --------------------------------------------------------------------------------------

StoreId = Annotated[str, Field(json_schema_extra=NAME_SCHEMA)]


class FileSearchTool(BaseModel):
    """Calypso's own tool: search these vector stores (namespaces) for passages, as OpenAI's file_search."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["file_search"]
    # Required, as OpenAI requires it; each id a namespace name (the translation checks it, code
    # invalid_namespace) and then a store (or a 404).
    vector_store_ids: Annotated[list[StoreId], Field(min_length=1)]
    max_num_results: Annotated[StrictInt, Field(ge=1, le=MAX_PASSAGES), WHOLE] | None = None
    filters: Filters | None = None
    ranking_options: FileSearchRankingOptions | None = None


class FunctionTool(BaseModel):
    """A client's function: offered to the upstream model, its calls returned as ``function_call`` items."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["function"]
    name: Annotated[StrictStr, Field(min_length=1, max_length=128)]
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None

    def chat_tool(self) -> dict[str, Any]:
        """The same function in Chat Completions' shape, for the upstream."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters or {"type": "object"}}
        if self.description is not None:
            function["description"] = self.description
        if self.strict is not None:
            function["strict"] = self.strict
        return {"type": "function", "function": function}


class UnknownTool(BaseModel):
    """Any other tool ``type`` (web_search, mcp…): only fails, listing the supported types."""

    model_config = _FAIL_ONLY
    type: Literal["file_search", "function"]


Tool = Annotated[
    Annotated[FileSearchTool, Tag("file_search")]
    | Annotated[FunctionTool, Tag("function")]
    | Annotated[UnknownTool, Tag(_UNKNOWN)],
    Discriminator(_type_of(("file_search", "function"), None)),
]


# -- tool_choice --------------------------------------------------------------------------------


class FileSearchChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["file_search"]


class FunctionChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["function"]
    name: StrictStr


class AllowedTool(BaseModel):
    """One entry of ``allowed_tools.tools``: a tool type, and a function's name."""

    model_config = ConfigDict(extra="allow")
    type: StrictStr
    name: StrictStr | None = None


class AllowedToolsChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[AllowedTool]


ToolChoice = (
    Literal["auto", "none", "required"]
    | Annotated[FileSearchChoice | FunctionChoice | AllowedToolsChoice, Field(discriminator="type")]
)
