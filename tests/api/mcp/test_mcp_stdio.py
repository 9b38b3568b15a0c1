"""`calypso mcp` over stdio, spawned as a desktop client would: on a data directory, or relaying to a server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult
from mcp_support import Secured, ingest_alps
from tests_support import REPO

from calypso.api.app import create_app
from calypso.cli.remote import write_record
from calypso.config import Settings
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port

QUESTION = "What is the highest mountain in the Alps?"


def _command(*args: str, database_url: str = "") -> StdioServerParameters:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "CALYPSO_EMBEDDING_MODEL": "none",
        "CALYPSO_LOG_LEVEL": "WARNING",
        "CALYPSO_DATABASE_URL": database_url,  # the knowledge base's, not the test's fresh database
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "calypso", "mcp", *args], env=env)


def _session(
    params: StdioServerParameters, *calls: tuple[str, dict[str, Any]]
) -> tuple[list[str], list[CallToolResult]]:
    async def run() -> tuple[list[str], list[CallToolResult]]:
        async with Client(params) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            return tools, [await client.call_tool(name, arguments) for name, arguments in calls]

    return asyncio.run(run())


@dataclass
class AlpsHome:
    home: Path
    database_url: str  # "" on SQLite; the module's database under CALYPSO_TEST_BACKEND=postgres


@pytest.fixture(scope="module")
def alps_home(tmp_path_factory: pytest.TempPathFactory) -> AlpsHome:
    settings = Settings(home=tmp_path_factory.mktemp("mcp-stdio") / "home")
    services = open_services(settings)
    ingest_alps(services)
    services.close()
    return AlpsHome(settings.home, settings.database_url)


def test_stdio_on_a_data_directory(alps_home: AlpsHome) -> None:
    async def run() -> tuple[list[str], list[CallToolResult]]:
        async with Client(_command("--home", str(alps_home.home), database_url=alps_home.database_url)) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            searched = await client.call_tool("search", {"query": "Mont Blanc highest mountain", "max_results": 3})
            hit_id = searched.structured_content["results"][0]["id"]
            rest = [
                await client.call_tool(name, arguments)
                for name, arguments in (
                    ("fetch", {"id": hit_id}),
                    ("ask", {"question": QUESTION}),
                    ("search", {"query": " "}),
                )
            ]
            return tools, [searched, *rest]

    tools, (searched, fetched, asked, bad) = asyncio.run(run())
    assert set(tools) == {"search", "ask", "fetch", "list_knowledge_bases", "verify"}
    hit = searched.structured_content["results"][0]
    assert (
        hit["filename"] == "alps_wiki.pdf" and hit["page_number"] and hit["link"].startswith("http://127.0.0.1:8080/")
    )
    assert fetched.structured_content["passages"][fetched.structured_content["target"]]["text"] == hit["text"]
    assert "Mont Blanc" in asked.structured_content["answer"] and asked.structured_content["citations"]
    assert bad.is_error and bad.structured_content["error"]["param"] == "query"


def test_stdio_relays_to_a_running_server_with_its_key(secured: Secured) -> None:
    async def run() -> tuple[list[str], list[CallToolResult], str]:
        async with Client(_command("--url", secured.url, "--api-key", secured.key_a)) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            results = [
                await client.call_tool("search", {"query": "Mont Blanc highest mountain"}),
                await client.call_tool("list_knowledge_bases", {}),
            ]
            read = await client.read_resource(f"calypso://documents/{secured.document_id}")
            return tools, results, read.contents[0].text

    tools, (searched, listed), document = asyncio.run(run())
    assert "alps_wiki.pdf" in document and "Mont Blanc" in document
    assert set(tools) == {"search", "ask", "fetch", "list_knowledge_bases", "verify"}
    hit = searched.structured_content["results"][0]
    assert hit["document_id"] == secured.document_id and hit["link"].startswith(secured.url)
    assert listed.structured_content["knowledge_bases"][0]["documents"] == 1
    # Another key, another workspace: the relay sees what that key sees.
    _, (other,) = _session(
        _command("--url", f"{secured.url}/mcp", "--api-key", secured.key_b),
        ("search", {"query": "Mont Blanc highest mountain"}),
    )
    assert other.structured_content["results"] == []


def test_a_data_directory_a_server_holds_says_to_use_url(tmp_path: Path, database_url: str) -> None:
    if database_url:
        pytest.skip("PostgreSQL is shared by many processes: nothing holds it")
    settings = Settings(home=tmp_path / "home")
    holder = open_services(settings, exclusive=True)  # as `calypso serve` does
    try:
        done = subprocess.run(
            [sys.executable, "-m", "calypso", "mcp", "--home", str(settings.home)],
            env=_command().env,
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.close()
    assert done.returncode == 1 and done.stdout == ""
    assert "calypso mcp --url" in done.stderr


def test_the_relay_says_when_the_server_refuses_the_key(secured: Secured) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "calypso", "mcp", "--url", secured.url, "--api-key", "cal-wrong"],
        env=_command().env,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "refused the key: Invalid or revoked API key" in done.stderr


def test_the_relay_outlives_its_server(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    services = open_services(settings)
    live = LiveServer(create_app(settings, services), free_port())
    live.__enter__()
    try:

        async def run() -> tuple[CallToolResult, CallToolResult, CallToolResult]:
            async with Client(_command("--url", live.url)) as client:
                before = await client.call_tool("list_knowledge_bases", {})
                live.__exit__(None, None, None)
                gone = await client.call_tool("search", {"query": "Mont Blanc"})
                again = await client.call_tool("search", {"query": "Mont Blanc"})
                return before, gone, again

        before, gone, again = asyncio.run(run())
    finally:
        live.__exit__(None, None, None)
        services.close()
    assert not before.is_error
    for result in (gone, again):
        assert result.is_error and "Cannot reach Calypso" in result.content[0].text


def test_a_served_data_directory_is_reached_through_its_server(tmp_path: Path, database_url: str) -> None:
    if database_url:
        pytest.skip("PostgreSQL is shared by many processes: nothing holds it")
    settings = Settings(home=tmp_path / "home")
    services = open_services(settings, exclusive=True)  # as `calypso serve` holds it, and says where it listens
    ingest_alps(services)
    try:
        with LiveServer(create_app(settings, services), free_port()) as live:
            write_record(settings.home, live.url, auth=False)
            _, (searched,) = _session(
                _command("--home", str(settings.home)), ("search", {"query": "Mont Blanc highest mountain"})
            )
    finally:
        services.close()
    hit = searched.structured_content["results"][0]
    assert hit["filename"] == "alps_wiki.pdf" and hit["link"].startswith(live.url)
