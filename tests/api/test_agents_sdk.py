"""The OpenAI Agents SDK, unchanged, against Calypso (issue 25): ``FileSearchTool`` plus a ``function_tool``,
non-streamed and streamed, multi-turn by ``to_input_list()`` and by ``previous_response_id``, and
``output_type`` a pydantic model. A real server on loopback, the fake upstream behind it as a model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

QUESTION = "How many days do customers have to request a full refund?"
calls: list[str] = []


@agents.function_tool
def order_status(order: str) -> str:
    """The shipping status of an order.

    Args:
        order: The order number.
    """
    calls.append(order)
    return f"Order {order} has shipped."


class Refund(BaseModel):
    answer: str
    days: int


@pytest.fixture
def fake(agent_upstream):
    calls.clear()
    return agent_upstream


@pytest.fixture
def model(server) -> Any:
    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
    return agents.OpenAIResponsesModel(model="calypso-rag-agent", openai_client=client)


def _agent(model: Any, **options: Any) -> Any:
    return agents.Agent(
        name="support",
        instructions="Answer from the documents.",
        model=model,
        tools=[agents.FileSearchTool(vector_store_ids=["general"], include_search_results=True), order_status],
        **options,
    )


def _search_calls(result: Any) -> list[Any]:
    return [i.raw_item for i in result.new_items if getattr(i.raw_item, "type", None) == "file_search_call"]


def _annotations(result: Any) -> list[Any]:
    messages = [i.raw_item for i in result.new_items if getattr(i.raw_item, "type", None) == "message"]
    return [a for m in messages for part in m.content for a in getattr(part, "annotations", [])]


def test_file_search_and_a_function_tool_non_streamed_then_to_input_list(fake, model) -> None:
    agent = _agent(model)

    async def run() -> tuple[Any, Any]:
        result = await agents.Runner.run(agent, QUESTION)
        follow_up = result.to_input_list() + [{"role": "user", "content": "And for gift cards?"}]
        return result, await agents.Runner.run(agent, follow_up)

    result, again = asyncio.run(run())
    assert calls == ["example", "example"]  # the model called the function, the SDK ran it, the turn continued
    assert "30 days" in result.final_output
    assert _search_calls(result) and _annotations(result), "the answer after the tool result cites"
    kinds = [i.type for i in result.new_items]
    assert kinds[:2] == ["tool_call_item", "tool_call_item"] or "tool_call_output_item" in kinds

    assert again.final_output
    query = _search_calls(again)[-1].queries[0]
    assert query == f"{QUESTION} And for gift cards?"  # the follow-up searched with the turn before


def test_streamed_run_then_previous_response_id(fake, model) -> None:
    agent = _agent(model)

    async def run() -> tuple[Any, list[str], Any]:
        streamed = agents.Runner.run_streamed(agent, QUESTION)
        kinds = [event.type async for event in streamed.stream_events()]
        previous = streamed.last_response_id
        return streamed, kinds, await agents.Runner.run(agent, "And for gift cards?", previous_response_id=previous)

    streamed, kinds, second = asyncio.run(run())
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
    assert "30 days" in streamed.final_output and calls[:1] == ["example"]
    assert _annotations(streamed)
    assert second.final_output
    sent = fake.requests[-1]["messages"]
    assert QUESTION in [m.get("content") for m in sent]  # the first turn came from the stored chain


def test_output_type_is_a_pydantic_model(fake, model) -> None:
    agent = _agent(model, output_type=Refund)
    result = asyncio.run(agents.Runner.run(agent, QUESTION))
    assert isinstance(result.final_output, Refund) and isinstance(result.final_output.days, int)
    assert fake.requests[-1]["response_format"]["json_schema"]["name"] == "final_output"
    assert _search_calls(result)
