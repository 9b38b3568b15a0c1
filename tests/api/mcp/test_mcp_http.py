"""The MCP endpoint at /mcp over streamable HTTP, driven by the official `mcp` client against a real server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest
from mcp.types import CallToolResult
from mcp_support import Secured, alps_questions, mcp_client
from tests_support import WAIT

from calypso.api.mcp.http import transport_security
from calypso.config import Settings

TOOLS = {"search", "ask", "fetch", "list_knowledge_bases", "verify"}


def call(url: str, key: str | None, *calls: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    """Each (tool, arguments) in order over one client session."""

    async def run() -> list[CallToolResult]:
        async with mcp_client(url, key) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return asyncio.run(run())


def test_tools_are_listed_with_input_and_output_schemas(secured: Secured) -> None:
    async def run() -> Any:
        async with mcp_client(secured.url, secured.key_a) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in asyncio.run(run())}
    assert set(tools) == TOOLS
    search = tools["search"]
    assert search.input_schema["required"] == ["query"]
    assert set(search.input_schema["properties"]) == {"query", "knowledge_base", "document_ids", "max_results"}
    assert search.input_schema["properties"]["query"]["maxLength"] == 20_000
    passage = search.output_schema["$defs"]["PassageResult"]["properties"]
    for field in (
        "document_id",
        "file_id",
        "filename",
        "page_number",
        "page_label",
        "locator_label",
        "text",
        "start_index",
        "end_index",
        "score",
        "link",
        "id",
    ):
        assert field in passage
    citation = tools["ask"].output_schema["$defs"]["CitationResult"]["properties"]
    for field in ("quote", "quote_start", "quote_end", "support_score", "page_label", "locator_label", "link"):
        assert field in citation
    assert set(tools["fetch"].input_schema["required"]) == {"id"}
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in tools.values())


def test_search_finds_the_alps_passage_on_its_gold_page(secured: Secured) -> None:
    rows = alps_questions()[:8]
    results = call(secured.url, secured.key_a, *[("search", {"query": r["question"], "max_results": 5}) for r in rows])
    found = 0
    for row, result in zip(rows, results):
        assert not result.is_error, result.content
        hits = result.structured_content["results"]
        pages = {p for hit in hits for p in range(hit["page_number"], hit["page_end"] + 1)}
        found += bool(pages & set(row["gold_pdf_pages"]))
        top = hits[0]
        assert top["filename"] == "alps_wiki.pdf" and top["document_id"] == secured.document_id
        assert top["id"] == f"{secured.document_id}:{top['chunk_index']}"
        assert top["page_label"] and top["locator_label"].startswith(("p. ", "pp. "))
        assert 0 < top["score"] <= 1
        assert "/view?expires=" in top["link"] and f"&page={top['page_number']}" in top["link"]
        assert f"chunk={top['chunk_index']}" in top["link"]
        # The text a model reads numbers the passages with their document, locator and link.
        text = result.content[0].text
        assert f"[1] alps_wiki.pdf ({top['locator_label']})" in text and top["link"] in text
    assert found >= 7, f"gold page in the top 5 for {found} of {len(rows)} questions"


def test_fetch_round_trips_a_search_id_with_its_neighbours(secured: Secured) -> None:
    (searched,) = call(secured.url, secured.key_a, ("search", {"query": "Mont Blanc highest mountain"}))
    hit = searched.structured_content["results"][0]
    fetched, whole, by_file = call(
        secured.url,
        secured.key_a,
        ("fetch", {"id": hit["id"], "neighbours": 1}),
        ("fetch", {"id": secured.document_id}),
        ("fetch", {"id": hit["file_id"]}),
    )
    assert not fetched.is_error, fetched.content
    data = fetched.structured_content
    target = data["passages"][data["target"]]
    assert target["id"] == hit["id"] and target["text"] == hit["text"] and target["page_number"] == hit["page_number"]
    indexes = [p["chunk_index"] for p in data["passages"]]
    assert indexes == list(range(max(0, hit["chunk_index"] - 1), hit["chunk_index"] + 2))
    assert hit["text"] in data["text"]  # the joined span holds the passage once, overlaps removed
    assert data["document"]["document_id"] == secured.document_id and data["document"]["page_count"] == 25
    assert whole.structured_content["target"] is None and whole.structured_content["truncated"] is True
    assert whole.structured_content["passages"][0]["chunk_index"] == 0
    assert by_file.structured_content["document"]["document_id"] == secured.document_id


def test_ask_returns_a_cited_answer_with_sentence_support(secured: Secured) -> None:
    result, named = call(
        secured.url,
        secured.key_a,
        ("ask", {"question": "What is the highest mountain in the Alps?"}),
        ("ask", {"question": "What is the highest mountain in the Alps?", "knowledge_base": "general"}),
    )
    assert not result.is_error, result.content
    assert named.structured_content["citations"] == result.structured_content["citations"]
    data = result.structured_content
    assert "Mont Blanc" in data["answer"] and data["citations"]
    citation = data["citations"][0]
    source = next(s for s in data["sources"] if s["source_index"] == citation["source_index"])
    assert source["cited"] and citation["quote"] in source["passage"]["text"]
    assert source["passage"]["text"][citation["quote_start"] : citation["quote_end"]] == citation["quote"]
    assert citation["page_number"] and citation["locator_label"] == f"p. {citation['page_label']}"
    assert citation["passage_id"] == source["passage"]["id"]
    assert data["grounding"]["grounded_sources_state"] == "available"
    assert data["grounding"]["claims"]["support"] in ("supported", "partial")
    assert data["sentences"] and {s["status"] for s in data["sentences"]} <= {
        "supported",
        "weak",
        "unsupported",
        "not_a_claim",
    }
    assert f"[{citation['source_index']}]" in data["answer_with_markers"]
    text = result.content[0].text
    assert "Sources:" in text and citation["link"] in text and "Grounding: available" in text


def test_list_knowledge_bases_counts_documents_and_names_bots(secured: Secured) -> None:
    (listed,) = call(secured.url, secured.key_a, ("list_knowledge_bases", {}))
    data = listed.structured_content
    assert [(kb["id"], kb["documents"], kb["completed"], kb["default"]) for kb in data["knowledge_bases"]] == [
        ("general", 1, 1, True)
    ]
    assert any(bot["id"] and bot["knowledge_base"] == "general" for bot in data["bots"])


def test_another_workspace_sees_nothing_of_the_first(secured: Secured) -> None:
    listed, searched, named, fetched, asked = call(
        secured.url,
        secured.key_b,
        ("list_knowledge_bases", {}),
        ("search", {"query": "Mont Blanc highest mountain"}),
        ("search", {"query": "Mont Blanc", "knowledge_base": "general"}),
        ("fetch", {"id": f"{secured.document_id}:0"}),
        ("ask", {"question": "What is the highest mountain in the Alps?"}),
    )
    assert listed.structured_content["knowledge_bases"] == []
    assert searched.structured_content["results"] == []
    assert named.is_error and named.structured_content["error"]["code"] == "not_found"
    assert fetched.is_error and fetched.structured_content["error"] == {
        "message": f"No document with id {secured.document_id!r}.",
        "type": "invalid_request_error",
        "param": "id",
        "code": "not_found",
        "status": 404,
    }
    assert not asked.is_error and asked.structured_content["citations"] == []
    assert asked.structured_content["grounding"]["grounded_sources_state"] == "missing"
    for result in (listed, searched, asked):
        assert "alps_wiki.pdf" not in str(result.content) and secured.document_id not in str(result.content)


@pytest.mark.parametrize("key", [None, "sk-calypso-wrong", "not a bearer"])
def test_a_missing_or_wrong_key_gets_401_before_any_mcp_message(secured: Secured, key: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}" if " " not in key else key
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx.post(f"{secured.url}/mcp", json=message, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    # As OpenAI answers: a wrong key is invalid_api_key, no key at all has no code.
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_api_key" if key else None)
    with pytest.raises(Exception):  # noqa: B017 - the client cannot even start: whatever it raises, no session
        call(secured.url, key, ("list_knowledge_bases", {}))


def test_bad_input_is_a_tool_error_and_the_session_goes_on(secured: Secured) -> None:
    results = call(
        secured.url,
        secured.key_a,
        ("search", {"query": ""}),
        ("search", {"query": "   "}),
        ("search", {"query": "alps " * 200_000}),  # 1 MB
        ("search", {"query": "Mont Blanc", "knowledge_base": "no-such-kb"}),
        ("search", {"query": "Mont Blanc", "knowledge_base": "../etc"}),
        ("search", {"query": 5}),
        ("search", {"query": "Mont Blanc", "max_results": 0}),
        ("fetch", {"id": "not:a:passage"}),
        ("fetch", {"id": f"{secured.document_id}:99999"}),
        ("ask", {"question": ""}),
        ("ask", {"question": "Mont Blanc?", "bot": "no-such-bot"}),
        ("ask", {"question": "Mont Blanc?", "knowledge_base": "no-such-kb"}),
        ("no_such_tool", {}),
        ("search", {"query": "Mont Blanc highest mountain"}),
    )
    *bad, good = results
    assert all(r.is_error for r in bad), [r.content for r in bad]
    assert not good.is_error and good.structured_content["results"]
    errors = [r.structured_content["error"] if r.structured_content else None for r in bad]
    # The messages and codes HTTP gives for the same input.
    assert (
        errors[0]["message"]
        == errors[1]["message"]
        == "The query is empty; send the question or keywords to search for."
    )
    assert errors[0]["status"] == 400 and errors[0]["param"] == "query"
    assert errors[2]["code"] == "string_above_max_length" and "1,000,000 characters" in errors[2]["message"]
    assert errors[3]["code"] == errors[4]["code"] == "not_found" and errors[3]["param"] == "knowledge_base"
    assert errors[7]["param"] == "id" and errors[7]["status"] == 400
    assert errors[8]["code"] == "not_found" and "numbered 0 to" in errors[8]["message"]
    assert errors[9]["message"] == "The last user message is empty; ask a question."
    assert errors[10]["code"] == "model_not_found"
    assert errors[11]["code"] == "not_found" and errors[11]["param"] == "knowledge_base"
    # Arguments the input schema refuses read as the HTTP API's validation errors.
    assert errors[5] == {
        "message": "Invalid type for 'query': expected a string, but got an integer instead.",
        "type": "invalid_request_error",
        "param": "query",
        "code": "invalid_type",
        "status": 400,
    }
    assert errors[6]["code"] == "integer_below_min_value" and errors[6]["param"] == "max_results"
    assert errors[12]["code"] == "not_found" and errors[12]["param"] == "name" and "search" in errors[12]["message"]


def test_host_and_origin_are_checked(secured: Secured) -> None:
    headers = {
        "Authorization": f"Bearer {secured.key_a}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    rebound = httpx.post(f"{secured.url}/mcp", json=message, headers={**headers, "Host": "evil.example"})
    assert rebound.status_code == 421
    foreign = httpx.post(f"{secured.url}/mcp", json=message, headers={**headers, "Origin": "https://evil.example"})
    assert foreign.status_code == 403
    local = httpx.post(f"{secured.url}/mcp", json=message, headers={**headers, "Origin": "http://localhost:3000"})
    assert local.status_code == 200, local.text


def test_non_loopback_binds_allow_the_names_they_are_given(tmp_path) -> None:
    bound = transport_security(Settings(home=tmp_path, host="10.1.2.3"))
    assert bound.enable_dns_rebinding_protection and "10.1.2.3:*" in bound.allowed_hosts
    named = transport_security(
        Settings(
            home=tmp_path,
            host="0.0.0.0",
            mcp_allowed_hosts="kb.example.com",
            mcp_allowed_origins="https://app.example.com",
            public_base_url="https://calypso.example.com",
        )
    )
    assert named.enable_dns_rebinding_protection
    assert {"kb.example.com", "kb.example.com:*", "calypso.example.com"} <= set(named.allowed_hosts)
    assert {"https://app.example.com", "https://calypso.example.com"} <= set(named.allowed_origins)
    # A wildcard bind nobody named: nothing to compare Host with (keys still guard it), said at start.
    assert not transport_security(Settings(home=tmp_path, host="0.0.0.0")).enable_dns_rebinding_protection


def test_verify_scores_a_claim_against_passages(secured: Secured) -> None:
    fact = "Mont Blanc spans the French–Italian border, and at 4,810 m is the highest mountain in the Alps."
    wrong = "Mont Blanc is a volcano in Iceland that last erupted in 1998."
    (searched,) = call(secured.url, secured.key_a, ("search", {"query": fact, "max_results": 3}))
    ids = [hit["id"] for hit in searched.structured_content["results"]]
    found, refuted, by_ids, foreign = call(
        secured.url,
        secured.key_a,
        ("verify", {"claim": fact}),
        ("verify", {"claim": wrong}),
        ("verify", {"claim": fact, "passage_ids": ids}),
        ("verify", {"claim": fact, "passage_ids": [f"{secured.document_id}:0"], "knowledge_base": "general"}),
    )
    data = found.structured_content
    assert data["supported"] and data["support_score"] >= data["threshold"]
    best = data["evidence"][0]
    assert best["supported"] and "4,810" in best["quote"] and best["page_number"] == 1
    assert best["passage"]["text"][best["quote_start"] : best["quote_end"]] == best["quote"]
    assert not refuted.structured_content["supported"]
    assert "NOT supported" in refuted.content[0].text
    assert [e["passage"]["id"] for e in by_ids.structured_content["evidence"]] != []
    assert {e["passage"]["id"] for e in by_ids.structured_content["evidence"]} == set(ids)
    assert by_ids.structured_content["supported"]
    assert not foreign.is_error
    # Another workspace's key cannot verify against these passages: they do not exist for it.
    (other,) = call(secured.url, secured.key_b, ("verify", {"claim": fact, "passage_ids": [ids[0]]}))
    assert other.is_error and other.structured_content["error"]["code"] == "not_found"
    assert other.structured_content["error"]["param"] == "passage_ids[0]"


def test_documents_are_resources_of_their_workspace_only(secured: Secured) -> None:
    uri = f"calypso://documents/{secured.document_id}"

    async def read(key: str) -> Any:
        async with mcp_client(secured.url, key) as client:
            templates = (await client.list_resource_templates()).resource_templates
            try:
                return templates, await client.read_resource(uri)
            except Exception as exc:  # the error is what this read checks
                return templates, exc

    templates, read_a = asyncio.run(read(secured.key_a))
    assert [t.uri_template for t in templates] == ["calypso://documents/{document_id}"]
    text = read_a.contents[0].text
    assert text.startswith("# ") and "alps_wiki.pdf" in text and "25 page(s)" in text
    assert "/view?expires=" in text and "Mont Blanc" in text
    _, read_b = asyncio.run(read(secured.key_b))
    assert isinstance(read_b, Exception) and "not_found" in str(read_b)


LAZY_SDK = """
import asyncio, json, sys
import httpx
from calypso.api.app import create_app
from calypso.config import Settings

app = create_app(Settings(home=sys.argv[1], embedding_model="none"))
initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}

async def main():
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            search = await client.post("/v1/search", json={"query": "refunds"})
            before = "mcp" in sys.modules
            answers = await asyncio.gather(*(client.post(
                "/mcp", json=initialize, headers={"accept": "application/json, text/event-stream"}) for _ in range(3)))
    print(json.dumps({"search": search.status_code, "before": before, "after": "mcp" in sys.modules,
                      "mcp": [a.status_code for a in answers], "server": answers[0].json()["result"]["serverInfo"]}))

asyncio.run(main())
"""


def test_the_sdk_is_loaded_by_the_first_mcp_request_not_at_start(tmp_path) -> None:
    # 21 MB of every API process's memory: only a process that serves MCP pays it. Three requests at once
    # all wait for the one start; a fresh interpreter, as this one has imported the SDK long ago.
    run = subprocess.run(
        [sys.executable, "-c", LAZY_SDK, str(tmp_path / "home")], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["search"] == 200 and seen["before"] is False
    assert seen["mcp"] == [200, 200, 200] and seen["after"] is True
    assert seen["server"]["name"] == "calypso"


def test_chinese_search_and_two_questions_in_a_second_knowledge_base(secured: Secured) -> None:
    # Workspace "globex", its own knowledge base: the Alps tests above see nothing of it.
    policy = "退款政策\n\n礼品卡一律不予退款，也不能兑换现金。\n\n运费由客户承担，除非商品在运输途中损坏。\n"
    uploaded = httpx.post(
        f"{secured.url}/v1/documents",
        params=WAIT,
        data={"namespace": "zh"},
        files={"file": ("退款政策.txt", policy.encode())},
        headers={"Authorization": f"Bearer {secured.key_b}"},
        timeout=60,
    )
    assert uploaded.status_code in (200, 201) and uploaded.json()["status"] == "completed", uploaded.text
    searched, gift, shipping = call(
        secured.url,
        secured.key_b,
        ("search", {"query": "礼品卡退款", "knowledge_base": "zh"}),
        ("ask", {"question": "礼品卡可以退款吗？", "knowledge_base": "zh"}),
        ("ask", {"question": "运费由谁承担？", "knowledge_base": "zh"}),
    )
    top = searched.structured_content["results"][0]
    assert top["filename"] == "退款政策.txt" and "礼品卡一律不予退款" in top["text"]
    assert "礼品卡一律不予退款" in gift.structured_content["answer"] and gift.structured_content["citations"]
    assert "运费由客户承担" in shipping.structured_content["answer"]
    assert shipping.structured_content["citations"][0]["quote"] in policy
