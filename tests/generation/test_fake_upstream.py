"""The fake OpenAI-compatible server, spoken to over real HTTP (raw httpx and the official SDK)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from calypso.generation.fake_upstream import FakeUpstream, Script

MESSAGES = [{"role": "user", "content": "Can I get a refund?"}]


@pytest.fixture
def sdk(fake: FakeUpstream) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url, api_key="x", max_retries=0)


def sse_payloads(response: httpx.Response) -> list[str]:
    return [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]


def test_script_from_text_splits_markers_across_tokens() -> None:
    script = Script.from_text("See [Source 1].", token_size=3)
    assert script.tokens == ["See", " [S", "our", "ce ", "1]."]
    assert script.text == "See [Source 1]."


def test_stream_has_openai_chunk_shape(fake: FakeUpstream) -> None:
    fake.script(
        Script(
            tokens=["Refunds are", " available [Sou", "rce 1", "]."], usage={"prompt_tokens": 7, "completion_tokens": 4}
        )
    )
    body = {"model": "m1", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.Client() as client, client.stream("POST", f"{fake.base_url}/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        payloads = sse_payloads(response)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "m1" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"]["content"] for c in chunks[1:5]]
    assert contents == ["Refunds are", " available [Sou", "rce 1", "]."]
    assert chunks[5]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert chunks[6]["choices"] == [] and chunks[6]["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 4,
        "total_tokens": 11,
    }
    assert fake.requests == [body] and fake.disconnects == 0


def test_stream_without_include_usage_has_no_usage_chunk(fake: FakeUpstream) -> None:
    body = {"messages": MESSAGES, "stream": True}
    with httpx.Client() as client:
        payloads = sse_payloads(client.post(f"{fake.base_url}/chat/completions", json=body))
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["choices"] for c in chunks) and all("usage" not in c for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == fake.default.text


def test_non_streaming_completion(fake: FakeUpstream, sdk: openai.OpenAI) -> None:
    fake.script(Script.from_text("Refunds take 14 days [Source 2].", token_size=5))
    completion = sdk.chat.completions.create(model="m2", messages=MESSAGES)
    assert completion.object == "chat.completion" and completion.model == "m2"
    assert completion.choices[0].message.content == "Refunds take 14 days [Source 2]."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.prompt_tokens == 5 and completion.usage.completion_tokens == 7
    assert "stream" not in fake.requests[0]


def test_openai_sdk_streaming_reassembles_the_script(fake: FakeUpstream, sdk: openai.OpenAI) -> None:
    text = "Refunds are available within 30 days [Source 1]."
    fake.script(Script.from_text(text, token_size=3, token_delay=0.002))
    stream = sdk.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert deltas == Script.from_text(text, token_size=3).tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(deltas)
    assert fake.headers[0]["authorization"] == "Bearer x"


def test_openai_sdk_streams_tool_calls(fake: FakeUpstream, sdk: openai.OpenAI) -> None:
    fake.script(Script(tokens=[], tool_calls=[{"name": "search", "arguments": {"query": "refund policy 2026"}}]))
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    calls: dict[int, dict] = {}
    finish = None
    for chunk in sdk.chat.completions.create(model="m", messages=MESSAGES, tools=tools, stream=True):
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for fragment in choice.delta.tool_calls or []:
            call = calls.setdefault(fragment.index, {"id": fragment.id, "name": "", "arguments": ""})
            call["name"] += fragment.function.name or ""
            call["arguments"] += fragment.function.arguments or ""
    assert finish == "tool_calls"
    assert calls == {0: {"id": "call_fake_0", "name": "search", "arguments": '{"query": "refund policy 2026"}'}}
    assert fake.requests[0]["tools"] == tools


def test_failures_then_success(fake: FakeUpstream, sdk: openai.OpenAI) -> None:
    fake.script(Script(status=503, fail_times=2, tokens=["ok"]), Script(tokens=["next"]))
    with httpx.Client() as client:
        url = f"{fake.base_url}/chat/completions"
        first, second = (client.post(url, json={"messages": MESSAGES}) for _ in range(2))
        assert first.status_code == second.status_code == 503
        assert first.json()["error"]["type"] == "server_error"
    assert sdk.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "ok"
    assert sdk.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "next"
    assert sdk.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == fake.default.text


def test_error_reply_shape_and_retry_after(fake: FakeUpstream, sdk: openai.OpenAI) -> None:
    fake.script(Script(status=429, retry_after=2, error_message="Slow down."))
    with pytest.raises(openai.RateLimitError) as info:
        sdk.chat.completions.create(model="m", messages=MESSAGES)
    assert info.value.response.headers["retry-after"] == "2"
    assert info.value.body == {
        "message": "Slow down.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }


def test_bad_request_is_rejected(fake: FakeUpstream) -> None:
    with httpx.Client() as client:
        response = client.post(f"{fake.base_url}/chat/completions", json={"model": "m"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "messages"


def test_models_endpoint(sdk: openai.OpenAI) -> None:
    assert [m.id for m in sdk.models.list()] == ["fake-model"]


def test_scripted_disconnect_drops_the_connection(fake: FakeUpstream) -> None:
    fake.script(Script(tokens=["a", "b", "c", "d"], disconnect_after=2))
    received: list[str] = []
    body = {"messages": MESSAGES, "stream": True}
    with (
        httpx.Client() as client,
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", f"{fake.base_url}/chat/completions", json=body) as response,
    ):
        for line in response.iter_lines():  # lazily: the tokens before the drop still arrive
            if line.startswith("data: "):
                received.append(json.loads(line[6:])["choices"][0]["delta"].get("content", ""))
    assert received == ["", "a", "b"]
    assert fake.disconnects == 0  # the server hung up, not the client


def test_client_going_away_is_counted(fake: FakeUpstream) -> None:
    fake.script(Script(tokens=["x"] * 50, token_delay=0.02))
    body = {"messages": MESSAGES, "stream": True}
    with httpx.Client() as client, client.stream("POST", f"{fake.base_url}/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if '"content": "x"' in line:
                break
    assert fake.wait_for_disconnects(1, timeout=3)
