"""Responses for agents (issue 25): every input item replayed, function tools beside file_search,
structured output, the parameters agents send, and the input_items / cancel / input_tokens endpoints.

A real server on loopback with the fake upstream behind it in model-like mode (``Script.agent``): it
calls an offered function once per user turn, then answers, with schema-valid JSON when asked.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from calypso.demo import ingest_demo
from calypso.generation.fake_upstream import Script

QUESTION = "How many days do customers have to request a full refund?"
STORES = ["general"]
WEATHER = {
    "type": "function",
    "name": "order_status",
    "description": "The status of an order.",
    "parameters": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
    "strict": True,
}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["answer", "days"],
    "additionalProperties": False,
}


@pytest.fixture
def fake(agent_upstream):
    return agent_upstream


def _post(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post("/v1/responses", json={"model": "calypso-rag-agent", **body})
    assert response.status_code == 200, response.text
    return response.json()


def _sse(http: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    payload = {"model": "calypso-rag-agent", **body, "stream": True}
    with http.stream("POST", "/v1/responses", json=payload) as response:
        assert response.status_code == 200
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]


def _types(response: dict[str, Any]) -> list[str]:
    return [item["type"] for item in response["output"]]


def _message(response: dict[str, Any]) -> dict[str, Any]:
    return next(o for o in response["output"] if o["type"] == "message")["content"][0]


def test_every_replayed_item_type_is_understood(fake, http) -> None:
    first = _post(http, {"input": QUESTION, "tools": [{"type": "file_search", "vector_store_ids": STORES}]})
    assert _types(first) == ["file_search_call", "message"] and _message(first)["annotations"]
    replay = [
        {"role": "user", "content": QUESTION},  # EasyInputMessage: no type
        *first["output"],  # file_search_call (dropped) and the assistant message with its annotations
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "call_9", "name": "order_status", "arguments": '{"order": "A1"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": "shipped"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And for gift cards?"}]},
    ]
    fake.reset()
    second = _post(http, {"input": replay})
    assert _types(second) == ["file_search_call", "message"]
    sent = fake.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "assistant", "tool", "user"]
    assert sent[2]["content"] == _message(first)["text"]  # annotations ignored on input
    assert sent[3]["tool_calls"][0]["id"] == "call_9" and sent[4]["tool_call_id"] == "call_9"
    # The short follow-up is searched together with the turn it follows.
    query = next(o for o in second["output"] if o["type"] == "file_search_call")["queries"][0]
    assert query == f"{QUESTION} And for gift cards?"


def test_a_single_question_is_searched_as_written(fake, http) -> None:
    response = _post(http, {"input": [{"role": "user", "content": QUESTION}]})
    assert response["output"][0]["queries"] == [QUESTION]


def test_item_reference_resolves_from_the_previous_response_else_400(fake, http) -> None:
    first = _post(http, {"input": QUESTION})
    message_id = first["output"][-1]["id"]
    body = {"previous_response_id": first["id"], "input": [{"type": "item_reference", "id": message_id}]}
    body["input"].append({"role": "user", "content": "Thanks, and who decides?"})
    fake.reset()
    _post(http, body)
    assert [m["role"] for m in fake.requests[-1]["messages"]].count("assistant") == 2  # history + the reference
    missing = http.post("/v1/responses", json={"input": [{"type": "item_reference", "id": "msg_nowhere"}]})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "input[0].id"


def test_function_call_then_output_continues_the_turn_and_cites(fake, http) -> None:
    tools = [{"type": "file_search", "vector_store_ids": STORES}, WEATHER]
    first = _post(http, {"input": QUESTION, "tools": tools, "parallel_tool_calls": False})
    assert _types(first) == ["file_search_call", "function_call"]
    call = first["output"][1]
    assert call["name"] == "order_status" and json.loads(call["arguments"]) == {"order": "example"}
    assert call["call_id"] and call["status"] == "completed" and call["id"].startswith("fc_")
    upstream = fake.requests[-1]
    assert upstream["tools"][0]["function"]["name"] == "order_status" and upstream["parallel_tool_calls"] is False
    assert first["tools"][1]["name"] == "order_status" and first["parallel_tool_calls"] is False

    output = {"type": "function_call_output", "call_id": call["call_id"], "output": '{"status": "shipped"}'}
    second = _post(http, {"previous_response_id": first["id"], "input": [output], "tools": tools})
    assert _types(second) == ["file_search_call", "message"]
    assert _message(second)["annotations"], "the text turn after the tool result cites"
    sent = fake.requests[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool"]
    assert sent[2]["tool_calls"][0]["id"] == call["call_id"]


def test_function_calls_stream_with_openai_events(fake, http) -> None:
    events = _sse(http, {"input": QUESTION, "tools": [WEATHER]})
    kinds = [e["type"] for e in events]
    assert "response.output_text.delta" not in kinds  # a turn that only calls a function has no message
    added = kinds.index("response.output_item.added", kinds.index("response.file_search_call.completed") + 1)
    assert kinds[added : added + 4] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    assert events[added]["item"]["type"] == "function_call" and events[added]["item"]["arguments"] == ""
    done = events[added + 2]
    assert done["name"] == "order_status" and json.loads(done["arguments"]) == {"order": "example"}
    completed = events[-1]["response"]
    assert [o["type"] for o in completed["output"]] == ["file_search_call", "function_call"]
    assert completed["output"][1] == events[added + 3]["item"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


@pytest.mark.parametrize(
    ("choice", "searched", "upstream_choice"),
    [
        ("none", False, "none"),
        ("required", True, "required"),
        ({"type": "file_search"}, True, "none"),
        (
            {"type": "function", "name": "order_status"},
            False,
            {"type": "function", "function": {"name": "order_status"}},
        ),
        ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "file_search"}]}, True, None),
    ],
)
def test_tool_choice_in_all_its_forms(fake, http, choice: Any, searched: bool, upstream_choice: Any) -> None:
    tools = [{"type": "file_search", "vector_store_ids": STORES}, WEATHER]
    response = _post(http, {"input": QUESTION, "tools": tools, "tool_choice": choice})
    assert ("file_search_call" in _types(response)) is searched
    assert fake.requests[-1].get("tool_choice") == upstream_choice
    assert response["tool_choice"] == choice


def test_max_tool_calls_zero_skips_the_search(fake, http) -> None:
    response = _post(http, {"input": QUESTION, "max_tool_calls": 0})
    assert _types(response) == ["message"] and response["max_tool_calls"] == 0


def test_structured_output_is_json_with_its_grounding_beside_it(fake, http) -> None:
    fmt = {"type": "json_schema", "name": "refund", "schema": ANSWER_SCHEMA, "strict": True}
    response = _post(http, {"input": QUESTION, "text": {"format": fmt}})
    assert response["text"] == {"format": fmt, "verbosity": "medium"}
    assert fake.requests[-1]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "refund", "schema": ANSWER_SCHEMA, "strict": True},
    }
    text = _message(response)
    data = json.loads(text["text"])
    assert set(data) == {"answer", "days"} and isinstance(data["days"], int)
    assert text["annotations"] == []  # the JSON is the client's data: sources stand beside it
    assert _types(response)[0] == "file_search_call" and response["output"][0]["results"]
    aicore = response["metadata"]["_aicore"]
    assert aicore["grounded_sources"] and aicore["grounded_sources_state"] == "available"  # inferred, not inline
    streamed = _sse(http, {"input": QUESTION, "text": {"format": fmt}})[-1]["response"]
    assert json.loads(_message(streamed)["text"]) == data
    plain = _post(http, {"input": QUESTION, "text": {"format": {"type": "json_object"}}})
    assert json.loads(_message(plain)["text"])["answer"]


def test_agent_parameters_are_accepted_and_passed_on(fake, http) -> None:
    body = {
        "input": QUESTION,
        "top_p": 0.5,
        "reasoning": {"effort": "low", "summary": "auto"},
        "stream_options": {"include_obfuscation": False},
        "prompt_cache_key": "k",
        "service_tier": "auto",
        "max_tool_calls": 3,
        "top_logprobs": 2,
        "safety_identifier": "user-1",
        "background": False,
        "text": {"verbosity": "low"},
    }
    response = _post(http, body)
    sent = fake.requests[-1]
    assert sent["top_p"] == 0.5 and sent["reasoning_effort"] == "low" and sent["verbosity"] == "low"
    assert response["reasoning"] == {"effort": "low", "summary": "auto"} and response["service_tier"] == "auto"
    assert response["text"]["verbosity"] == "low"


def test_instructions_do_not_carry_over(fake, http) -> None:
    first = _post(http, {"input": QUESTION, "instructions": "Answer like a pirate."})
    _post(http, {"input": "And for gift cards?", "previous_response_id": first["id"]})
    system = fake.requests[-1]["messages"][0]["content"]
    assert "pirate" not in system


def test_input_items_cancel_and_input_tokens(fake, http) -> None:
    items = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi"},
        {"role": "user", "content": QUESTION},
    ]
    response = _post(http, {"input": items})
    listed = http.get(f"/v1/responses/{response['id']}/input_items").json()
    assert listed["object"] == "list" and not listed["has_more"]
    assert [i["content"][0]["text"] for i in listed["data"]] == [QUESTION, "Hi", "Hello"]  # newest first
    assert listed["data"][0]["content"][0]["type"] == "input_text"
    assert listed["data"][1]["content"][0]["type"] == "output_text"
    page = http.get(f"/v1/responses/{response['id']}/input_items", params={"order": "asc", "limit": 1}).json()
    assert page["has_more"] and page["first_id"] == page["last_id"]
    rest = http.get(
        f"/v1/responses/{response['id']}/input_items", params={"order": "asc", "after": page["last_id"]}
    ).json()
    assert [i["content"][0]["text"] for i in rest["data"]] == ["Hi", QUESTION]
    assert http.get("/v1/responses/resp_nope/input_items").status_code == 404

    cancel = http.post(f"/v1/responses/{response['id']}/cancel")
    assert cancel.status_code == 400 and cancel.json()["error"]["type"] == "invalid_request_error"
    assert http.post("/v1/responses/resp_nope/cancel").status_code == 404

    short = http.post("/v1/responses/input_tokens", json={"input": "Hello"}).json()
    long = http.post(
        "/v1/responses/input_tokens", json={"input": QUESTION, "instructions": "Be brief.", "tools": [WEATHER]}
    ).json()
    assert short["object"] == "response.input_tokens" and 0 < short["input_tokens"] < long["input_tokens"]
    continued = http.post("/v1/responses/input_tokens", json={"previous_response_id": response["id"], "input": "x"})
    assert continued.json()["input_tokens"] > short["input_tokens"]


def test_chat_completions_parameters_and_response_format(fake, http) -> None:
    body = {
        "model": "calypso-rag-agent",
        "messages": [{"role": "user", "content": QUESTION}],
        "top_p": 0.3,
        "stop": ["\n\n"],
        "seed": 7,
        "presence_penalty": 0.1,
        "frequency_penalty": 0.2,
        "logprobs": True,
        "top_logprobs": 2,
        "reasoning_effort": "low",
        "max_completion_tokens": 200,
        "response_format": {"type": "json_schema", "json_schema": {"name": "refund", "schema": ANSWER_SCHEMA}},
    }
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    sent = fake.requests[-1]
    for key in ("top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "reasoning_effort"):
        assert sent[key] == body[key]
    assert sent["max_tokens"] == 200 and sent["response_format"]["json_schema"]["name"] == "refund"
    message = response.json()["choices"][0]["message"]
    assert set(json.loads(message["content"])) == {"answer", "days"}  # no markers, no "Sources:" appendix
    assert message["annotations"] == [] and message["citations"]  # the sources beside the JSON
    assert message["_aicore"]["grounded_sources_state"] == "available"
    streamed = []
    with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as chunks:
        for line in chunks.iter_lines():
            if line.startswith("data: {"):
                streamed += [c["delta"].get("content") or "" for c in json.loads(line[6:])["choices"]]
    assert json.loads("".join(streamed)) == json.loads(message["content"])
    n = http.post("/v1/chat/completions", json={**body, "n": 2})
    assert n.status_code == 400 and n.json()["error"]["param"] == "n"


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/responses", {"input": QUESTION, "tools": [WEATHER]}, "tools"),
        ("/v1/responses", {"input": QUESTION, "text": {"format": {"type": "json_object"}}}, "text.format"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": QUESTION}], "response_format": {"type": "json_object"}},
            "response_format",
        ),
    ],
)
def test_the_extractive_answerer_refuses_what_it_cannot_do(kb, http, path: str, body: dict, param: str) -> None:
    ingest_demo(kb)
    for stream in (False, True):
        response = http.post(path, json={**body, "stream": stream})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"] == param and error["code"] == "unsupported_parameter"


def test_text_before_a_function_call_is_a_message_then_the_call(fake, http) -> None:
    fake.script(
        Script(tokens=["Let me ", "check."], tool_calls=[{"name": "order_status", "arguments": {"order": "A1"}}])
    )
    events = _sse(http, {"input": QUESTION, "tools": [WEATHER]})
    completed = events[-1]["response"]
    assert [o["type"] for o in completed["output"]] == ["file_search_call", "message", "function_call"]
    assert _message(completed)["text"] == "Let me check." and _message(completed)["annotations"] == []
    kinds = [e["type"] for e in events]
    assert kinds.index("response.output_text.done") < kinds.index("response.function_call_arguments.done")
    indexes = {e["item"]["type"]: e["output_index"] for e in events if e["type"] == "response.output_item.done"}
    assert indexes == {"message": 1, "function_call": 2, "file_search_call": 0}
    fake.script(
        Script(tokens=["Let me ", "check."], tool_calls=[{"name": "order_status", "arguments": {"order": "A1"}}])
    )
    whole = _post(http, {"input": QUESTION, "tools": [WEATHER]})
    assert [o["type"] for o in whole["output"]] == ["file_search_call", "message", "function_call"]


def test_a_response_stored_before_input_items_were_kept_still_continues() -> None:
    from calypso.models import StoredResponse

    assert StoredResponse.split_history([{"role": "user", "content": "hi"}]) == (
        [{"role": "user", "content": "hi"}],
        [],
    )
    record = StoredResponse("r", "b", {}, [{"role": "user"}], [{"id": "msg_1"}]).history_record()
    assert StoredResponse.split_history(record) == ([{"role": "user"}], [{"id": "msg_1"}])
