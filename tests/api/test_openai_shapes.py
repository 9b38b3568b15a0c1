"""Responses, their stream events and the new endpoints validate against OpenAI's published schemas
(issue 25), apart from the documented seed extensions.

``openai_schemas.json`` is a pinned copy of the schemas reachable from the roots it names, taken from
openai/openai-openapi (descriptions dropped). The extensions removed before validation: seed 000's
``metadata._aicore`` object and the ``_aicore`` of annotations, seed 003's top-level ``citations``,
Calypso's own ``response.output_text.sentence_status`` event, the flat ``quote`` of a file_citation
(the Vercel AI SDK reads it) and its legacy nested ``file_citation`` / ``text`` fields (seed 000).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = json.loads((Path(__file__).with_name("openai_schemas.json")).read_text())["components"]
QUESTION = "How many days do customers have to request a full refund?"
FUNCTION = {
    "type": "function",
    "name": "order_status",
    "parameters": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
    "strict": True,
}
SCHEMA = {
    "type": "object",
    "properties": {"days": {"type": "integer"}},
    "required": ["days"],
    "additionalProperties": False,
}


def _event_schemas() -> dict[str, str]:
    """Each stream event type's own schema (so a failure names the field, not the whole ``oneOf``)."""
    out = {}
    for ref in SCHEMAS["schemas"]["ResponseStreamEvent"]["anyOf"]:
        name = ref["$ref"].rsplit("/", 1)[-1]
        for kind in SCHEMAS["schemas"][name]["properties"]["type"]["enum"]:
            out[kind] = name
    return out


EVENT_SCHEMAS = _event_schemas()


def _validate(value: Any, name: str) -> None:
    schema = {"$ref": f"#/components/schemas/{name}", "components": SCHEMAS}
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, [(list(e.path), e.message[:300]) for e in errors[:5]]


def _openai_only(value: Any) -> Any:
    """``value`` without the documented extensions."""
    value = copy.deepcopy(value)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("_aicore", None)
            if node.get("type") == "file_citation":
                for key in ("quote", "text", "file_citation", "start_index", "end_index"):
                    node.pop(key, None)
            if node.get("object") == "response":
                node.pop("citations", None)
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(value)
    return value


@pytest.fixture
def fake(agent_upstream):
    return agent_upstream


BODIES = {
    "cited": {"input": QUESTION, "tools": [{"type": "file_search", "vector_store_ids": ["general"]}]},
    "inline": {"input": QUESTION, "include": ["inline_citations"]},
    "function_call": {"input": QUESTION, "tools": [FUNCTION], "parallel_tool_calls": False, "max_tool_calls": 2},
    "json": {"input": QUESTION, "text": {"format": {"type": "json_schema", "name": "r", "schema": SCHEMA}}},
}


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_responses_and_every_event_validate(fake, http: httpx.Client, kind: str) -> None:
    body = {"model": "calypso-rag-agent", **BODIES[kind]}
    response = http.post("/v1/responses", json=body).json()
    assert response["status"] == "completed"
    _validate(_openai_only(response), "Response")
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as stream:
        events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: {")]
    for event in events:
        if event["type"] != "response.output_text.sentence_status":  # Calypso's own event
            _validate(_openai_only(event), EVENT_SCHEMAS[event["type"]])


def test_the_new_endpoints_validate(fake, http: httpx.Client) -> None:
    first = http.post("/v1/responses", json={"input": QUESTION, "tools": [FUNCTION]}).json()
    call = next(o for o in first["output"] if o["type"] == "function_call")
    replay = [
        {"role": "user", "content": QUESTION},
        call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "shipped"},
    ]
    second = http.post("/v1/responses", json={"input": replay, "tools": [FUNCTION]}).json()
    _validate(_openai_only(http.get(f"/v1/responses/{second['id']}/input_items").json()), "ResponseItemList")
    _validate(http.post("/v1/responses/input_tokens", json={"input": QUESTION}).json(), "TokenCountsResource")

    conversation = http.post("/v1/conversations", json={"items": [{"role": "user", "content": "Hello"}]}).json()
    _validate({k: conversation[k] for k in ("id", "object", "created_at", "metadata")}, "ConversationResource")
    http.post("/v1/responses", json={"input": QUESTION, "conversation": conversation["id"]})
    items = http.get(f"/v1/conversations/{conversation['id']}/items").json()
    _validate(_openai_only(items), "ConversationItemList")
