"""UpstreamGenerator against the fake OpenAI-compatible server over real loopback HTTP."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from calypso.errors import UpstreamError, UpstreamTimeout
from calypso.generation import registry
from calypso.generation.base import Finish, GenerationRequest, TextDelta, ToolCalls
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.generation.upstream import UpstreamConfig, UpstreamGenerator

MESSAGES = [{"role": "system", "content": "Answer from the sources."}, {"role": "user", "content": "Refunds?"}]


def make(fake: FakeUpstream, **overrides: Any) -> UpstreamGenerator:
    # Tiny backoff so retry tests stay fast.
    options: dict[str, Any] = {
        "base_url": fake.base_url,
        "api_key": "sk-test",
        "model": "test-model",
        "timeout_seconds": 5,
        "backoff_base_seconds": 0.01,
        "backoff_max_seconds": 0.05,
    }
    options.update(overrides)
    return UpstreamGenerator(UpstreamConfig(**options))


def collect(generator: UpstreamGenerator, request: GenerationRequest | None = None) -> list:
    """Run the stream to the end; on failure, attach the events received so far to the exception."""

    async def run() -> list:
        events: list = []
        try:
            async for event in generator.stream(request or GenerationRequest(messages=MESSAGES)):
                events.append(event)
        except UpstreamError as error:
            error.events = events  # type: ignore[attr-defined]
            raise
        finally:
            await generator.aclose()
        return events

    return asyncio.run(run())


def test_stream_yields_tokens_exactly_as_scripted(fake: FakeUpstream) -> None:
    tokens = ["Refunds are", " available [Sou", "rce 1", "]."]
    fake.script(
        Script(
            tokens=tokens,
            token_delay=0.005,
            usage={"prompt_tokens": 12, "completion_tokens": 4},
            model="served-model",
            keepalive=True,
        )
    )
    generator = make(fake)
    events = collect(generator)
    assert generator.name == "upstream:test-model"
    assert events[:-1] == [TextDelta(t) for t in tokens]
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "stop" and finish.model == "served-model"
    assert (finish.usage.prompt_tokens, finish.usage.completion_tokens, finish.usage.total_tokens) == (12, 4, 16)


def test_request_fields_pass_through_and_none_is_omitted(fake: FakeUpstream) -> None:
    collect(make(fake), GenerationRequest(messages=MESSAGES, temperature=0.2))
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    request = GenerationRequest(messages=MESSAGES, model="other", max_tokens=50, tools=tools, tool_choice="auto")
    collect(make(fake, api_key=None), request)
    first, second = fake.requests
    assert first == {
        "model": "test-model",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
    }
    assert second == {
        "model": "other",
        "messages": MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 50,
        "tools": tools,
        "tool_choice": "auto",
    }
    assert fake.headers[0]["authorization"] == "Bearer sk-test"
    assert "authorization" not in fake.headers[1]


def test_tool_call_fragments_are_assembled(fake: FakeUpstream) -> None:
    fake.script(
        Script(
            tokens=["Let me look."],
            tool_calls=[
                {"name": "search", "arguments": {"query": "refund policy 2026", "namespace": "general"}},
                {"id": "call_b", "type": "function", "function": {"name": "fetch_document", "arguments": '{"id": 7}'}},
            ],
        )
    )
    events = collect(make(fake))
    assert events[0] == TextDelta("Let me look.")
    assert events[1] == ToolCalls(
        [
            {
                "id": "call_fake_0",
                "type": "function",
                "function": {"name": "search", "arguments": '{"query": "refund policy 2026", "namespace": "general"}'},
            },
            {"id": "call_b", "type": "function", "function": {"name": "fetch_document", "arguments": '{"id": 7}'}},
        ]
    )
    assert isinstance(events[2], Finish) and events[2].reason == "tool_calls" and len(events) == 3


def test_small_tokens_join_to_the_scripted_text_then_finish(fake: FakeUpstream) -> None:
    fake.script(Script.from_text("Refunds take 14 days [Source 2].", token_size=3))
    events = collect(make(fake))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Refunds take 14 days [Source 2]."
    assert not any(isinstance(e, ToolCalls) for e in events)
    assert isinstance(events[-1], Finish) and events[-1].reason == "stop"


def test_server_errors_are_retried_then_succeed(fake: FakeUpstream) -> None:
    fake.script(Script(status=503, fail_times=2, tokens=["recovered"]))
    events = collect(make(fake, max_retries=2))
    assert events[0] == TextDelta("recovered") and len(fake.requests) == 3


def test_server_errors_beyond_max_retries_surface(fake: FakeUpstream) -> None:
    fake.script(Script(status=500, fail_times=5, error_message="The engine is overloaded."))
    with pytest.raises(UpstreamError) as info:
        collect(make(fake, max_retries=1))
    assert info.value.code == "upstream_500" and "The engine is overloaded." in info.value.message
    assert len(fake.requests) == 2


def test_rate_limit_honours_retry_after(fake: FakeUpstream) -> None:
    fake.script(Script(status=429, fail_times=1, retry_after=0.4, tokens=["done"]))
    started = time.monotonic()
    events = collect(make(fake))
    assert time.monotonic() - started >= 0.4  # not the 0.01 s backoff
    assert events[0] == TextDelta("done") and len(fake.requests) == 2


def test_rate_limit_with_a_long_retry_after_fails_fast(fake: FakeUpstream) -> None:
    fake.script(Script(status=429, fail_times=1, retry_after=120, error_message="Rate limit reached."))
    with pytest.raises(UpstreamError) as info:
        collect(make(fake))
    assert info.value.code == "upstream_429" and "Rate limit reached." in info.value.message
    assert len(fake.requests) == 1


def test_client_errors_are_not_retried(fake: FakeUpstream) -> None:
    fake.script(Script(status=400, error_message="This model's maximum context length is 8192 tokens."))
    with pytest.raises(UpstreamError) as info:
        collect(make(fake))
    assert info.value.code == "upstream_400" and info.value.status == 502
    assert "maximum context length is 8192 tokens" in info.value.message
    assert len(fake.requests) == 1


def test_mid_stream_disconnect_raises_after_the_yielded_tokens(fake: FakeUpstream) -> None:
    fake.script(Script(tokens=["Refunds", " are", " avail", "able."], disconnect_after=2))
    with pytest.raises(UpstreamError) as info:
        collect(make(fake))
    assert info.value.code == "upstream_stream_interrupted"
    assert info.value.events == [TextDelta("Refunds"), TextDelta(" are")]  # type: ignore[attr-defined]
    assert len(fake.requests) == 1  # never retried once tokens went out


def test_clean_end_without_finish_is_an_error(fake: FakeUpstream) -> None:
    fake.script(Script(tokens=["Refunds", " are"], disconnect_after=1, abrupt=False))
    with pytest.raises(UpstreamError) as info:
        collect(make(fake))
    assert info.value.code == "upstream_stream_interrupted" and "mid-answer" in info.value.message
    assert info.value.events == [TextDelta("Refunds")]  # type: ignore[attr-defined]


def test_disconnect_before_the_first_token_is_retried(fake: FakeUpstream) -> None:
    fake.script(Script(tokens=["lost"], disconnect_after=0), Script(tokens=["second try"]))
    events = collect(make(fake))
    assert events[0] == TextDelta("second try") and len(fake.requests) == 2


def test_slow_first_token_times_out(fake: FakeUpstream) -> None:
    fake.script(Script(tokens=["late"], first_token_delay=1.5))
    started = time.monotonic()
    with pytest.raises(UpstreamTimeout) as info:
        collect(make(fake, timeout_seconds=0.3))
    assert time.monotonic() - started < 1.2
    assert info.value.code == "timeout" and info.value.status == 504
    assert len(fake.requests) == 1


def test_unreachable_upstream(fake: FakeUpstream) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        with pytest.raises(UpstreamError) as info:
            collect(make(fake, base_url=f"http://127.0.0.1:{port}/v1", max_retries=1))
    assert info.value.code == "upstream_unreachable" and "CALYPSO_LLM_BASE_URL" in info.value.message


def test_consumer_aclose_closes_the_upstream_request(fake: FakeUpstream) -> None:
    fake.script(Script(tokens=["tok"] * 200, token_delay=0.02))
    generator = make(fake)

    async def run() -> list:
        stream = generator.stream(GenerationRequest(messages=MESSAGES))
        received = [await anext(stream), await anext(stream)]
        await stream.aclose()  # what the API does when its client disconnects
        # Observed while our HTTP client is still open: closing the stream alone dropped the request.
        observed = await asyncio.to_thread(fake.wait_for_disconnects, 1, 3)
        await generator.aclose()
        return received, observed

    started = time.monotonic()
    assert asyncio.run(run()) == ([TextDelta("tok"), TextDelta("tok")], True)
    assert time.monotonic() - started < 2  # well before the 4 s the full script would take


def test_registry_builds_upstream(fake: FakeUpstream) -> None:
    assert "upstream" in registry.available()
    generator = registry.create("upstream", base_url=fake.base_url, model="m")
    assert isinstance(generator, UpstreamGenerator) and generator.name == "upstream:m"
    config = UpstreamConfig(base_url=fake.base_url, model="cfg")
    assert registry.create("upstream", config=config).name == "upstream:cfg"
    with pytest.raises(LookupError, match="upstream"):
        registry.create("no-such-backend")


def test_all_connections_busy_is_said_as_such_not_as_a_silent_upstream(fake: FakeUpstream) -> None:
    """Two slow streams hold both connections; the third waits its pool timeout, then hears why."""
    fake.script(*[Script(tokens=["tok"] * 20, token_delay=0.05) for _ in range(3)])
    generator = make(fake, max_connections=2, pool_timeout_seconds=0.2, timeout_seconds=5)

    async def one() -> list:
        return [event async for event in generator.stream(GenerationRequest(messages=MESSAGES))]

    async def run() -> list:
        results = await asyncio.gather(one(), one(), one(), return_exceptions=True)
        await generator.aclose()
        return results

    results = asyncio.run(run())
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1, results
    error = failures[0]
    assert isinstance(error, UpstreamError) and error.status == 503
    assert error.code == "too_many_concurrent_requests" and "CALYPSO_LLM_MAX_CONNECTIONS" in error.message
    assert sum(1 for r in results if isinstance(r, list) and isinstance(r[-1], Finish)) == 2
