"""LangChain's ``ChatOpenAI``, unchanged, against Calypso (issue 25), on both APIs: multi-turn with the
returned ``AIMessage``, ``bind_tools`` (a function beside file search), ``with_structured_output``,
``stop`` / ``top_p``. A real server on loopback, the fake upstream behind it as a model.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

langchain_openai = pytest.importorskip("langchain_openai")
messages = pytest.importorskip("langchain_core.messages")
tools = pytest.importorskip("langchain_core.tools")

QUESTION = "How many days do customers have to request a full refund?"
FILE_SEARCH = {"type": "file_search", "vector_store_ids": ["general"]}


@tools.tool
def order_status(order: str) -> str:
    """The shipping status of an order."""
    return f"Order {order} has shipped."


class Refund(BaseModel):
    answer: str
    days: int


@pytest.fixture
def fake(agent_upstream):
    return agent_upstream


def _chat(server: Any, responses: bool, **options: Any) -> Any:
    return langchain_openai.ChatOpenAI(
        model="calypso-rag-agent",
        base_url=f"{server.url}/v1",
        api_key="test-key",
        max_retries=0,
        use_responses_api=responses,
        **options,
    )


def _text(message: Any) -> str:
    return message.text if isinstance(message.text, str) else message.text()


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
def test_multi_turn_with_the_returned_message(fake, server, responses: bool) -> None:
    llm = _chat(server, responses)
    first = llm.invoke([messages.HumanMessage(QUESTION)])
    assert "30 days" in _text(first)
    second = llm.invoke([messages.HumanMessage(QUESTION), first, messages.HumanMessage("And for gift cards?")])
    assert _text(second)
    sent = fake.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
def test_bind_tools_then_the_tool_result(fake, server, responses: bool) -> None:
    bound = _chat(server, responses).bind_tools([FILE_SEARCH, order_status] if responses else [order_status])
    history: list[Any] = [messages.HumanMessage(QUESTION)]
    call = bound.invoke(history)
    assert call.tool_calls and call.tool_calls[0]["name"] == "order_status"
    history += [
        call,
        messages.ToolMessage(order_status.invoke(call.tool_calls[0]["args"]), tool_call_id=call.tool_calls[0]["id"]),
    ]
    answer = bound.invoke(history)
    assert not answer.tool_calls and _text(answer)
    sent = fake.requests[-1]["messages"]
    assert sent[-1]["role"] == "tool"
    if responses:  # Responses searches the last user turn again: the text after the tool result cites
        assert "30 days" in _text(answer) and "[Source 1]" in sent[0]["content"]
    else:  # seed 004: Chat Completions runs no retrieval on a tool-result turn
        assert "[Source 1]" not in sent[0]["content"]


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
def test_with_structured_output(fake, server, responses: bool) -> None:
    result = _chat(server, responses).with_structured_output(Refund).invoke(QUESTION)
    assert isinstance(result, Refund) and isinstance(result.days, int)
    assert fake.requests[-1]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
def test_stop_and_top_p(fake, server, responses: bool) -> None:
    answer = _chat(server, responses, top_p=0.5, stop=["\n\n"] if not responses else None).invoke(QUESTION)
    assert _text(answer)
    sent = fake.requests[-1]
    assert sent["top_p"] == 0.5
    if not responses:
        assert sent["stop"] == ["\n\n"]
