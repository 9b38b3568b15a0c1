"""The OpenAI Agents SDK's MCP client (`MCPServerStreamableHttp`) drives an agent that searches over /mcp.

The agent's model is the scripted upstream (a real OpenAI-compatible server on loopback): it calls the
`search` tool, reads what Calypso returns, and answers citing the page it was given.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp_support import Secured

from calypso.generation.fake_upstream import FAKE_MODEL, FakeUpstream, Script

agents = pytest.importorskip("agents")
from agents.mcp import MCPServerStreamableHttp  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

QUESTION = "What is the highest mountain in the Alps?"


def test_an_agents_sdk_agent_searches_calypso_and_answers(secured: Secured) -> None:
    call = {"name": "search", "arguments": {"query": "highest mountain in the Alps", "max_results": 3}}
    answer = "Mont Blanc, at 4,810 m, is the highest mountain in the Alps [1]."

    async def run(upstream: FakeUpstream) -> tuple[str, list[str]]:
        server = MCPServerStreamableHttp(
            {"url": f"{secured.url}/mcp", "headers": {"Authorization": f"Bearer {secured.key_a}"}, "timeout": 30},
            name="calypso",
            use_structured_content=True,
            client_session_timeout_seconds=30,
        )
        async with server:
            tools = [tool.name for tool in await server.list_tools()]
            model = agents.OpenAIChatCompletionsModel(
                model=FAKE_MODEL, openai_client=AsyncOpenAI(base_url=upstream.base_url, api_key="x", max_retries=0)
            )
            agent = agents.Agent(
                name="researcher", instructions="Search, then cite.", model=model, mcp_servers=[server]
            )
            result = await agents.Runner.run(agent, QUESTION, run_config=agents.RunConfig(tracing_disabled=True))
            return str(result.final_output), tools

    with FakeUpstream() as upstream:
        upstream.script(Script(tokens=[], tool_calls=[call]), Script.from_text(answer))
        final, tools = asyncio.run(run(upstream))
        requests = list(upstream.requests)

    assert final == answer
    assert {"search", "ask", "fetch", "list_knowledge_bases", "verify"} <= set(tools)
    offered = {tool["function"]["name"] for tool in requests[0]["tools"]}
    assert "search" in offered
    # The second model turn carries the tool's output: Calypso's passages with their ids, pages and links.
    tool_messages = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1
    output = tool_messages[0]["content"]
    data = json.loads(output) if output.lstrip().startswith("{") else None
    assert data is not None, output[:300]
    hits = data["results"]
    assert hits and hits[0]["filename"] == "alps_wiki.pdf" and hits[0]["document_id"] == secured.document_id
    assert any("Mont Blanc" in hit["text"] and hit["page_number"] == 1 for hit in hits)
    assert all("/view?expires=" in hit["link"] for hit in hits)
