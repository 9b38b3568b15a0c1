"""OpenAI's Conversations API items over seed 004's conversations: one conversation, two views (issue 25).

Items written through OpenAI's view (``conversations.create(items=…)``, ``items.create``, ``conversation``
on ``/v1/responses``) are seed 004's messages, and seed 004's turns are OpenAI's items; the model sees
both as one history. The OpenAI SDK and the Agents SDK (``conversation_id``, ``SQLiteSession``) drive it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

agents = pytest.importorskip("agents")
openai = pytest.importorskip("openai")

QUESTION = "How many days do customers have to request a full refund?"


@pytest.fixture
def fake(agent_upstream):
    return agent_upstream


def _texts(items: list[Any]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        if item.type == "message":
            out.append((item.role, "".join(getattr(p, "text", "") for p in item.content)))
        else:
            out.append((item.type, ""))
    return out


def test_both_views_of_one_conversation(fake, openai_client, http) -> None:
    conversation = openai_client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "Hello, I bought a kettle."}], metadata={"a": "1"}
    )
    listed = openai_client.conversations.items.list(conversation.id, order="asc")
    assert _texts(listed.data) == [("user", "Hello, I bought a kettle.")]

    response = openai_client.responses.create(model="calypso-rag-agent", conversation=conversation.id, input=QUESTION)
    assert response.conversation.id == conversation.id
    sent = fake.requests[-1]["messages"]
    assert [m["content"] for m in sent[1:]] == ["Hello, I bought a kettle.", QUESTION]
    items = openai_client.conversations.items.list(conversation.id, order="asc").data
    assert [i.type for i in items] == ["message", "message", "file_search_call", "message"]
    assert items[-1].id == response.output[-1].id and items[-1].content[0].text == response.output_text

    # Seed 004's view of the same conversation: its messages, and a turn of its own.
    seed = http.get(f"/v1/conversations/{conversation.id}").json()
    assert [m["role"] for m in seed["messages"]] == ["user", "user", "assistant", "assistant"]
    turn = http.post(f"/v1/conversations/{conversation.id}/messages", json={"content": "And for gift cards?"})
    assert turn.status_code == 200, turn.text
    roles = [m["role"] for m in fake.requests[-1]["messages"][1:]]
    assert roles == ["user", "user", "assistant", "user"]  # the Responses turn is in seed 004's history
    newest = openai_client.conversations.items.list(conversation.id, limit=2).data  # newest first
    assert _texts(newest)[1] == ("user", "And for gift cards?") and newest[0].role == "assistant"


def test_items_create_retrieve_delete_and_update(fake, openai_client) -> None:
    conversation = openai_client.conversations.create()
    added = openai_client.conversations.items.create(
        conversation.id,
        items=[
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "One"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two"}]},
        ],
    )
    assert [i.id for i in added.data] and _texts(added.data) == [("user", "One"), ("assistant", "Two")]
    first = openai_client.conversations.items.retrieve(added.data[0].id, conversation_id=conversation.id)
    assert first.content[0].text == "One"
    deleted = openai_client.conversations.items.delete(added.data[0].id, conversation_id=conversation.id)
    assert deleted.id == conversation.id
    assert _texts(openai_client.conversations.items.list(conversation.id).data) == [("assistant", "Two")]
    with pytest.raises(openai.NotFoundError):
        openai_client.conversations.items.retrieve(added.data[0].id, conversation_id=conversation.id)
    updated = openai_client.conversations.update(conversation.id, metadata={"topic": "refunds"})
    assert updated.metadata == {"topic": "refunds"}
    assert openai_client.conversations.retrieve(conversation.id).metadata == {"topic": "refunds"}
    with pytest.raises(openai.BadRequestError) as both:
        openai_client.responses.create(
            model="calypso-rag-agent", conversation=conversation.id, previous_response_id="resp_x", input="hi"
        )
    assert both.value.param == "conversation"


@agents.function_tool
def order_status(order: str) -> str:
    """The shipping status of an order."""
    return f"Order {order} has shipped."


def test_agents_sdk_conversation_id_and_sqlite_session(fake, server, openai_client) -> None:
    agents.set_tracing_disabled(True)
    conversation = openai_client.conversations.create()

    async def run() -> tuple[Any, Any, Any]:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)
        model = agents.OpenAIResponsesModel(model="calypso-rag-agent", openai_client=client)
        tools = [agents.FileSearchTool(vector_store_ids=["general"]), order_status]
        agent = agents.Agent(name="support", model=model, tools=tools)
        first = await agents.Runner.run(agent, QUESTION, conversation_id=conversation.id)
        second = await agents.Runner.run(agent, "And for gift cards?", conversation_id=conversation.id)
        session = agents.SQLiteSession("calypso-test")
        await agents.Runner.run(agent, QUESTION, session=session)
        third = await agents.Runner.run(agent, "And for gift cards?", session=session)
        return first, second, third

    first, second, third = asyncio.run(run())
    assert "30 days" in first.final_output and second.final_output and third.final_output
    items = openai_client.conversations.items.list(conversation.id, order="asc", limit=100).data
    kinds = [i.type for i in items]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
    assert [t for t in _texts(items) if t[0] == "user"] == [("user", QUESTION), ("user", "And for gift cards?")]
