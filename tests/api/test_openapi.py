"""The OpenAPI document says what the server does: bodies, statuses, the OpenAI error shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from calypso.api import openapi_operations
from calypso.api.app import create_app
from calypso.config import Settings

ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}


def document(**settings: Any) -> dict[str, Any]:
    return create_app(Settings(home=Path("unused"), **settings)).openapi()


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, op) for path, item in doc["paths"].items() for method, op in item.items()]


def test_every_body_is_declared_and_every_error_is_openai_shaped() -> None:
    doc = document()
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for method, path, op in operations(doc):
        where = f"{method.upper()} {path}"
        if method in ("post", "put", "patch") and not path.endswith(
            "/cancel"
        ):  # cancel takes no body (OpenAI's neither)
            assert "requestBody" in op, where
        assert "422" not in op["responses"] or path in ("/v1/documents", "/v1/files", "/v1/documents/crawl"), where
        assert "500" in op["responses"], where
        for status, response in op["responses"].items():
            if int(status) >= 400:
                assert response["content"]["application/json"]["schema"] == ERROR_REF, (where, status)
        assert "401" not in op["responses"], where  # loopback: no keys


def test_hand_read_bodies_carry_their_models() -> None:
    doc = document()
    schemas = doc["components"]["schemas"]
    chat = doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]
    assert chat["schema"] == {"$ref": "#/components/schemas/ChatCompletionRequest"}
    assert set(schemas["ChatCompletionRequest"]["required"]) == {"messages"}  # model: the default bot
    assert schemas["ChatCompletionRequest"]["properties"]["model"]["default"] == "calypso-rag-agent"
    assert "ChatMessage" in schemas and "ContentPart" in schemas
    assert schemas["CreateBot"]["required"] == ["id"] and schemas["UpdateBot"]["required"] == []
    assert schemas["CreateBot"]["additionalProperties"] is False


@pytest.mark.parametrize(
    ("method", "path", "statuses"),
    [
        ("post", "/v1/responses", {"200", "400", "404", "413", "500", "502", "503", "504", "507"}),
        ("post", "/v1/chat/completions", {"200", "400", "404", "413", "500", "502", "503", "504", "507"}),
        ("post", "/v1/conversations", {"201", "400", "404", "413", "500", "503", "507"}),
        ("post", "/v1/documents", {"200", "201", "400", "413", "415", "422", "500", "503", "507"}),
        ("post", "/v1/bots", {"201", "400", "409", "413", "500", "503", "507"}),
        ("delete", "/v1/bots/{bot_id}", {"200", "404", "409", "500", "503", "507"}),
        ("get", "/v1/files/{file_id}/content", {"200", "206", "400", "403", "404", "416", "500", "503"}),
        ("get", "/v1/files/{file_id}/view", {"200", "400", "403", "404", "500", "503"}),
        ("get", "/v1/admin/workspaces/{workspace}/policy", {"200", "400", "500", "503"}),
        ("get", "/v1/models", {"200", "500", "503"}),
        ("post", "/v1/admin/keys", {"201", "400", "413", "500", "503", "507"}),
    ],
)
def test_statuses(method: str, path: str, statuses: set[str]) -> None:
    assert set(document()["paths"][path][method]["responses"]) == statuses


def test_with_keys_on_every_v1_operation_declares_401_and_its_scheme() -> None:
    doc = document(auth="on", admin_key="k")
    assert set(doc["components"]["securitySchemes"]) == {"APIKey", "AdminKey"}
    for method, path, op in operations(doc):
        if path.startswith("/v1/"):
            assert "401" in op["responses"], (method, path)
            assert op["security"] == [{"AdminKey" if path.startswith("/v1/admin/") else "APIKey": []}]
    no_admin_key = document(auth="on")
    assert "403" in no_admin_key["paths"]["/v1/admin/keys"]["get"]["responses"]


def test_the_tables_name_real_operations() -> None:
    doc = document()
    known = {(method, path) for method, path, _ in operations(doc)}
    assert openapi_operations.hand_written_operations() <= known


def test_links_lead_from_creation_to_use() -> None:
    links = document()["paths"]["/v1/bots"]["post"]["responses"]["201"]["links"]
    assert links["GetBot"] == {
        "operationId": "get_bot_v1_bots__bot_id__get",
        "parameters": {"bot_id": "$response.body#/id"},
    }


def test_streams_and_file_content_declare_their_media_types() -> None:
    paths = document()["paths"]
    for path in ("/v1/responses", "/v1/chat/completions", "/v1/conversations/{conversation_id}/messages"):
        assert set(paths[path]["post"]["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
        assert "streamed" in paths[path]["post"]["requestBody"]["content"]["application/json"]["examples"]
    assert set(paths["/v1/files/{file_id}/content"]["get"]["responses"]["200"]["content"]) == {"*/*"}
    assert set(paths["/v1/files/{file_id}/view"]["get"]["responses"]["200"]["content"]) == {"text/html"}


def test_the_document_states_the_rules_the_server_enforces() -> None:
    """Issue 26: limits, name patterns, typed objects and event streams as the server has them."""
    doc = document()
    schemas = doc["components"]["schemas"]
    limit = next(p for p in doc["paths"]["/v1/files"]["get"]["parameters"] if p["name"] == "limit")
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 10_000)  # OpenAI's files.list
    limit = next(p for p in doc["paths"]["/v1/vector_stores"]["get"]["parameters"] if p["name"] == "limit")
    assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, 100)
    order = next(p for p in doc["paths"]["/v1/files"]["get"]["parameters"] if p["name"] == "order")
    assert order["schema"]["enum"] == ["asc", "desc"]
    namespace = next(p for p in doc["paths"]["/v1/documents"]["get"]["parameters"] if p["name"] == "namespace")
    assert namespace["schema"]["pattern"] == "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
    assert schemas["CreateBot"]["properties"]["namespace"]["pattern"] == namespace["schema"]["pattern"]
    create_store = schemas["CreateStore"]["properties"]
    assert create_store["name"]["anyOf"][0]["maxLength"] == 256
    assert create_store["metadata"]["anyOf"][0]["maxProperties"] == 16
    assert "oneOf" in create_store["chunking_strategy"]["anyOf"][0]  # auto or static, by "type"
    assert create_store["expires_after"]["anyOf"][0] == {"$ref": "#/components/schemas/ExpiresAfter"}
    assert [branch["required"] for branch in schemas["CreateBatch"]["oneOf"]] == [["file_ids"], ["files"]]
    for path in ("/v1/responses", "/v1/chat/completions"):
        events = doc["paths"][path]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
        assert events["type"] == "object" and "data" in events["properties"], path  # an event, not "a string"


def test_filters_and_the_file_search_tool_are_typed() -> None:
    """Issue 29: OpenAI's ComparisonFilter/CompoundFilter, one definition for search and the file_search tool."""
    schemas = document()["components"]["schemas"]
    either = [{"$ref": "#/components/schemas/ComparisonFilter"}, {"$ref": "#/components/schemas/CompoundFilter"}]
    assert schemas["SearchStore"]["properties"]["filters"]["anyOf"][0]["anyOf"] == either
    assert schemas["FileSearchTool"]["properties"]["filters"]["anyOf"][0]["anyOf"] == either
    tools = schemas["ResponsesRequest"]["properties"]["tools"]["anyOf"][0]
    assert tools["items"]["oneOf"][:2] == [
        {"$ref": "#/components/schemas/FileSearchTool"},
        {"$ref": "#/components/schemas/FunctionTool"},
    ]
    assert schemas["UnknownTool"] == {"not": {}}  # an unknown type is a 400 naming the supported ones
    comparison, compound = schemas["ComparisonFilter"], schemas["CompoundFilter"]
    assert comparison["properties"]["type"]["enum"] == ["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]
    assert comparison["additionalProperties"] is False and comparison["required"] == ["type", "key", "value"]
    assert compound["properties"]["type"]["enum"] == ["and", "or"]
    assert compound["properties"]["filters"]["items"]["anyOf"] == either  # exclusive by "type": anyOf says the same
    count = schemas["FileSearchTool"]["properties"]["max_num_results"]["anyOf"][0]
    assert (count["minimum"], count["maximum"]) == (1, 50)
