"""The turn preparer: one place decides what a question is answered from and how its sources may be shown.

Each surface only parses; the bot, the scope, the request's options over the bot's, the sources policy and the
refusal of what a generator cannot do come from ``TurnPreparer``, so every surface gives the same answer to the
same policy and the same error to the same unsupported request (checked here through the real SDK clients).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from calypso.demo import ingest_demo
from calypso.errors import InvalidRequest, NotFound
from calypso.services import Services
from calypso.services.turns import Narrowing, TurnInput

QUESTION = "How many days do customers have to request a full refund?"
ASK = [{"role": "user", "content": QUESTION}]
LEAKS = ("refund_policy_2026.md", "file-", "/v1/files/", "file_citation", "url_citation", "[Source", "Sources:")
FUNCTION = {
    "type": "function",
    "name": "metres_to_feet",
    "description": "Convert metres to feet.",
    "parameters": {"type": "object", "properties": {"metres": {"type": "number"}}, "required": ["metres"]},
}
CHAT_FUNCTION = {"type": "function", "function": {k: v for k, v in FUNCTION.items() if k != "type"}}


# -- the preparer --------------------------------------------------------------------------------


def test_the_request_is_the_bots_with_the_requests_options_over_it_and_frozen(services: Services) -> None:
    services.bots.create(
        "default",
        {"id": "careful", "generator_options": {"temperature": 0.2, "max_tokens": 300}, "system_prompt": "Be brief."},
    )
    turn = services.turns.prepare(TurnInput(ASK, bot="careful", temperature=0.9))
    ask = turn.ask
    assert (ask.temperature, ask.max_tokens, ask.system_prompt) == (0.9, 300, "Be brief.")
    assert ask.scope.namespaces == (services.settings.default_namespace,) and turn.bot.id == "careful"
    with pytest.raises(dataclasses.FrozenInstanceError):
        ask.temperature = 0.5  # type: ignore[misc]


def test_the_default_namespace_is_filled_in_once(services: Services) -> None:
    assert services.turns.namespace(None) == services.settings.default_namespace
    assert services.turns.namespace("manuals") == "manuals"


def test_sources_hidden_by_the_workspace_or_the_bot_turn_off_links_and_markers(services: Services) -> None:
    services.bots.create("default", {"id": "linker", "inline_citations": True})
    shown = services.turns.prepare(TurnInput(ASK, bot="linker")).policy
    assert (shown.sources_hidden, shown.inline_links, shown.chat_style) == (False, True, "numeric")
    assert not services.turns.prepare(TurnInput(ASK, bot="linker", inline_citations=False)).policy.inline_links
    services.policies.set_sources_policy("default", "hidden")
    hidden = services.turns.prepare(TurnInput(ASK, bot="linker", inline_citations=True)).policy
    assert (hidden.sources_hidden, hidden.inline_links, hidden.chat_style) == (True, False, "hidden")


def test_a_json_reply_is_plain_unless_sources_are_hidden(agent_upstream: Any, services: Services) -> None:
    parsed = TurnInput(ASK, response_format={"type": "json_object"})
    assert services.turns.prepare(parsed).policy.chat_style == "plain"  # the model's JSON, no markers or appendix
    services.policies.set_sources_policy("default", "hidden")
    assert services.turns.prepare(parsed).policy.chat_style == "hidden"


def test_named_stores_are_looked_up_and_a_missing_one_is_said_in_the_surfaces_words(services: Services) -> None:
    narrowing = Narrowing(("nowhere",), (("nowhere", "tools[0].vector_store_ids"),))
    with pytest.raises(NotFound) as caught:
        services.turns.prepare(TurnInput(ASK, narrowing=narrowing))
    assert caught.value.param == "tools[0].vector_store_ids"

    def missing(store_id: str, exc: NotFound) -> NotFound:
        return NotFound(f"No collection {store_id!r}.", param="collection_ids")

    with pytest.raises(NotFound, match="No collection 'nowhere'"):
        services.turns.prepare(TurnInput(ASK, narrowing=dataclasses.replace(narrowing, missing=missing)))


def test_function_tools_without_an_upstream_are_refused_naming_the_surfaces_parameter(services: Services) -> None:
    with pytest.raises(InvalidRequest) as caught:
        services.turns.prepare(TurnInput(ASK, tools=[CHAT_FUNCTION], params=("tools", "text.format")))
    assert caught.value.code == "unsupported_parameter" and caught.value.param == "tools"
    with pytest.raises(InvalidRequest) as caught:
        services.turns.prepare(TurnInput(ASK, response_format={"type": "json_object"}, params=("tools", "text.format")))
    assert caught.value.param == "text.format"


def test_prepare_async_reads_the_stores_off_the_event_loop(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[int] = []
    for name, service in (("get", services.bots), ("sources_hidden", services.policies)):
        real = getattr(service, name)

        def recorded(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            readers.append(threading.get_ident())
            return _real(*args, **kwargs)

        monkeypatch.setattr(service, name, recorded)

    async def prepare() -> int:
        await services.turns.prepare_async(TurnInput(ASK))
        return threading.get_ident()

    loop_thread = asyncio.run(prepare())
    assert len(readers) == 2 and loop_thread not in readers


# -- through the surfaces -------------------------------------------------------------------------


def _mcp_ask(url: str, question: str) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with (
            create_mcp_http_client() as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("ask", {"question": question})
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content

    return asyncio.run(run())


def _ask(surface: str, server: Any, openai_client: Any) -> tuple[str, str]:
    """(grounded sources state, the whole reply as JSON) of one question through ``surface``."""
    if surface == "responses":
        reply = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION).model_dump()
        return reply["metadata"]["_aicore"]["grounded_sources_state"], json.dumps(reply)
    if surface == "chat":
        chat = openai_client.chat.completions.create(model="calypso-rag-agent", messages=ASK).model_dump()
        return chat["choices"][0]["message"]["_aicore"]["grounded_sources_state"], json.dumps(chat)
    data = _mcp_ask(server.url, QUESTION)
    return data["grounding"]["grounded_sources_state"], json.dumps(data)


@pytest.mark.parametrize("surface", ["responses", "chat", "mcp"])
def test_a_workspace_policy_hides_sources_on_every_surface(surface, kb, services, server, openai_client) -> None:
    ingest_demo(kb)
    assert _ask(surface, server, openai_client)[0] == "available"
    services.policies.set_sources_policy("default", "hidden")
    state, reply = _ask(surface, server, openai_client)
    assert state == "hidden" and "30 days" in reply
    for leak in LEAKS:
        assert leak not in reply, leak


@pytest.mark.parametrize("surface", ["responses", "chat"])
def test_function_tools_are_refused_with_the_same_error_on_every_surface(surface, kb, openai_client) -> None:
    openai = pytest.importorskip("openai")
    ingest_demo(kb)
    with pytest.raises(openai.BadRequestError) as caught:
        if surface == "responses":
            openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, tools=[FUNCTION])
        else:
            openai_client.chat.completions.create(model="calypso-rag-agent", messages=ASK, tools=[CHAT_FUNCTION])
    error = caught.value.body
    assert error["code"] == "unsupported_parameter" and error["param"] == "tools"
    assert error["message"].startswith("Function tools need an upstream model; this bot answers with the extractive")
