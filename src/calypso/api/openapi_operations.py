"""Each operation's facts that its route signature does not tell FastAPI, as tables ``openapi.declare`` reads.

Statuses beyond the rules (``EXTRA``) and against them (``NEVER``), creations answering 201 only, streams,
bodies read by hand (``HAND_READ``), named request examples (``EXAMPLES``) and the links from what a POST
creates to the operations taking its id (``LINKS``). A route that reads its body by hand or returns another
status adds a line here; ``tests/api/test_openapi.py`` checks that every key names a real operation.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from calypso.api.routes.conversation_items import AddItems
from calypso.api.routes.conversations import CreateConversation, PostMessage, UpdateConversation
from calypso.api.schemas.chat import ChatCompletionRequest
from calypso.api.schemas.sources import create_source_schema
from calypso.bots import _ID as BOT_ID
from calypso.bots import CONFIG_FIELDS, DEFAULT_BOT_ID, Bot
from calypso.generation import registry
from calypso.scope import NAME_SCHEMA

REF = "#/components/schemas/{model}"

_ANSWERING = {502, 504}
# Per operation: statuses beyond the rules, and success statuses the route signature does not say.
EXTRA: dict[tuple[str, str], set[int]] = {
    ("post", "/v1/responses"): {404, *_ANSWERING},  # model, previous_response_id
    ("post", "/v1/chat/completions"): {404, *_ANSWERING},  # model
    ("post", "/v1/conversations"): {201, 404},  # model / bot
    ("post", "/v1/conversations/{conversation_id}/messages"): _ANSWERING,
    ("post", "/v1/documents"): {201, 415, 422},  # 201 new, 200 the same bytes again; 422 with wait=true
    ("post", "/v1/documents/{document_id}/cancel"): {409},  # its ingestion already ended
    ("post", "/v1/files"): {415, 422},
    ("post", "/v1/documents/crawl"): {201, 415, 422, *_ANSWERING},
    ("get", "/v1/files/{file_id}/content"): {403, 416},  # a signed link that does not verify; a Range past the end
    ("get", "/v1/files/{file_id}/view"): {403},  # a signed link that does not verify
    ("get", "/v1/admin/workspaces/{workspace}/policy"): {400},  # an invalid workspace name
    ("post", "/v1/bots"): {409},
    ("patch", "/v1/bots/{bot_id}"): {409},
    ("delete", "/v1/bots/{bot_id}"): {409},
    ("post", "/v1/admin/keys"): {201},
    ("post", "/v1/vector_stores"): {404},  # file_ids
    ("post", "/v1/sources"): {201},
    ("post", "/v1/sources/{source_id}/sync"): {202, 504},  # queued; ?wait=true past its hour
}
# Per operation: statuses the rules in ``_error_statuses`` would wrongly add.
NEVER: dict[tuple[str, str], set[int]] = {
    ("get", "/v1/admin/keys"): {400},  # any workspace name filters (an unknown one lists nothing)
    ("get", "/v1/admin/workspaces/{workspace}/policy"): {404},  # a workspace is a name, not a stored id
    ("put", "/v1/admin/workspaces/{workspace}/policy"): {404},
}
NO_200 = {("post", "/v1/conversations"), ("post", "/v1/admin/keys"), ("post", "/v1/sources")}  # 201 only
STREAMING = {
    ("post", "/v1/responses"),
    ("post", "/v1/chat/completions"),
    ("post", "/v1/conversations/{conversation_id}/messages"),
}


def _bot_fields(required: list[str]) -> dict[str, Any]:
    """The fields a client sends to create (``id`` required) or change a bot (its id cannot), from the Bot model."""
    schema = Bot.model_json_schema(ref_template=REF)
    properties = {name: schema["properties"][name] for name in ("id", *CONFIG_FIELDS)}
    properties["id"] = {**properties["id"], "pattern": BOT_ID.pattern}
    properties["namespace"] = {**properties["namespace"], **NAME_SCHEMA}  # null: a bot without a knowledge base
    # A generator is a name the registry has (bots.py checks it); null: the configured default.
    generators = {"anyOf": [{"type": "string", "enum": registry.available()}, {"type": "null"}]}
    properties["generator"] = {**properties["generator"], **generators}
    # An empty list of documents is refused (null searches the whole namespace).
    properties["document_ids"] = {
        **properties["document_ids"],
        "anyOf": [{"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}, {"type": "null"}],
    }
    if "id" not in required:
        del properties["id"]  # a PATCH may repeat the bot's id, never change it: the document leaves it out
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


# Bodies routes read with ``parse_body`` / ``json_object``: the schema name and its pydantic model or JSON schema.
HAND_READ: dict[tuple[str, str], tuple[str, type[BaseModel] | dict[str, Any]]] = {
    ("post", "/v1/chat/completions"): ("ChatCompletionRequest", ChatCompletionRequest),
    ("post", "/v1/conversations"): ("CreateConversation", CreateConversation),
    ("post", "/v1/conversations/{conversation_id}/messages"): ("PostMessage", PostMessage),
    ("post", "/v1/conversations/{conversation_id}"): ("UpdateConversation", UpdateConversation),
    ("post", "/v1/conversations/{conversation_id}/items"): ("AddItems", AddItems),
    ("post", "/v1/bots"): ("CreateBot", _bot_fields(["id"])),
    ("patch", "/v1/bots/{bot_id}"): ("UpdateBot", _bot_fields([])),
    ("post", "/v1/sources"): ("CreateSource", create_source_schema()),
}

_QUESTION = "What is the refund policy?"
_CHAT = {"model": DEFAULT_BOT_ID, "messages": [{"role": "user", "content": _QUESTION}]}
# Request body examples, by name (the answering ones plain and streamed).
EXAMPLES: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
    ("post", "/v1/responses"): {
        "question": {"model": DEFAULT_BOT_ID, "input": _QUESTION},
        "streamed": {"model": DEFAULT_BOT_ID, "input": _QUESTION, "stream": True, "include": ["inline_citations"]},
    },
    ("post", "/v1/chat/completions"): {
        "question": _CHAT,
        "streamed": {**_CHAT, "stream": True, "stream_options": {"include_usage": True}},
    },
    ("post", "/v1/conversations"): {"default bot": {"model": DEFAULT_BOT_ID}},
    ("post", "/v1/conversations/{conversation_id}/messages"): {
        "question": {"content": _QUESTION},
        "streamed": {"content": [{"type": "text", "text": _QUESTION}], "stream": True},
    },
    ("post", "/v1/search"): {"query": {"query": "refund policy", "max_num_results": 3}},
    ("post", "/v1/bots"): {"bot": {"id": "support", "passage_count": 3, "marker_style": "source"}},
    ("patch", "/v1/bots/{bot_id}"): {"change": {"inline_citations": True}},
    ("post", "/v1/sources"): {
        "website": {"type": "website", "namespace": "site", "url": "https://example.org/sitemap.xml"}
    },
}

# OpenAPI links: what a created object's id opens (clients and stateful tests follow them).
_ID = "$response.body#/id"
LINKS: list[tuple[tuple[str, str, str], tuple[str, str], str, str]] = [
    # (source method, path, status), (target method, path), target path parameter, value
    *((("post", "/v1/bots", "201"), (m, "/v1/bots/{bot_id}"), "bot_id", _ID) for m in ("get", "patch", "delete")),
    (("post", "/v1/bots", "201"), ("get", "/v1/models/{model_id}"), "model_id", _ID),
    *(
        (("post", "/v1/conversations", "201"), (m, p), "conversation_id", _ID)
        for m, p in (
            ("get", "/v1/conversations/{conversation_id}"),
            ("delete", "/v1/conversations/{conversation_id}"),
            ("post", "/v1/conversations/{conversation_id}/messages"),
        )
    ),
    *(
        (("post", "/v1/documents", status), (m, p), "document_id", _ID)
        for status in ("200", "201")
        for m, p in (
            ("get", "/v1/documents/{document_id}"),
            ("get", "/v1/documents/{document_id}/chunks"),
            ("post", "/v1/documents/{document_id}/cancel"),
            ("delete", "/v1/documents/{document_id}"),
        )
    ),
    *(
        (("post", "/v1/files", "200"), (m, p), "file_id", _ID)
        for m, p in (
            ("get", "/v1/files/{file_id}"),
            ("get", "/v1/files/{file_id}/content"),
            ("delete", "/v1/files/{file_id}"),
        )
    ),
    *(
        (("post", "/v1/responses", "200"), (m, "/v1/responses/{response_id}"), "response_id", _ID)
        for m in ("get", "delete")
    ),
    (("post", "/v1/admin/keys", "201"), ("delete", "/v1/admin/keys/{key_id}"), "key_id", _ID),
]


def hand_written_operations() -> set[tuple[str, str]]:
    """Every (method, path) the tables above name: each must be a real operation."""
    named = {key for table in (EXTRA, NEVER, HAND_READ, EXAMPLES) for key in table}
    return named | {key[:2] for key, *_ in LINKS}
