"""xai-sdk chat over gRPC: sample() and stream(), with and without inline citations, sync and async."""

from __future__ import annotations

import asyncio
import re

import grpc
import httpx
import pytest
from conftest import Collection, GrpcServer
from xai_sdk.chat import user
from xai_sdk.tools import collections_search, web_search

from calypso.generation.fake_upstream import Script

MODEL = "calypso-rag-agent"
QUESTION = "How many days do customers have to request a full refund?"
ANSWER = (
    "Customers may request a full refund within 30 days of purchase [Source 1]. "
    "Gift cards are never refundable [Source 1][Source 9]. Thanks for asking."
)
LINK = re.compile(r"\[\[(\d+)\]\]\(([^)\s]+)\)")


def _script(server: GrpcServer, times: int = 1) -> None:
    for _ in range(times):
        server.fake.script(Script.from_text(ANSWER, token_size=3))  # markers arrive split across tokens


def _chat(client, collection: Collection, inline: bool):
    include = ["inline_citations"] if inline else None
    chat = client.chat.create(model=MODEL, tools=[collections_search([collection.id], limit=4)], include=include)
    chat.append(user(QUESTION))
    return chat


def _check_citations(server: GrpcServer, response) -> None:
    """``citations``: every retrieved source's signed link, opening the file without a key."""
    urls = list(response.citations)
    assert urls and len(urls) == len(set(urls))
    for url in urls:
        assert url.startswith(server.http_url + "/v1/files/file-") and "signature=" in url
    opened = httpx.get(urls[0])
    assert opened.status_code == 200 and opened.content


def test_sample_without_inline_citations_is_plain(grpc_server: GrpcServer, collection: Collection) -> None:
    _script(grpc_server)
    with grpc_server.client() as client:
        response = _chat(client, collection, inline=False).sample()
    assert response.content == (
        "Customers may request a full refund within 30 days of purchase. "
        "Gift cards are never refundable. Thanks for asking."
    )
    assert list(response.inline_citations) == []
    _check_citations(grpc_server, response)
    assert response.finish_reason == "REASON_STOP"
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens > 0
    assert response.server_side_tool_usage == {"SERVER_SIDE_TOOL_COLLECTIONS_SEARCH": 1}


def test_sample_with_inline_citations_spans_each_link(grpc_server: GrpcServer, collection: Collection) -> None:
    _script(grpc_server)
    with grpc_server.client() as client:
        response = _chat(client, collection, inline=True).sample()
    content = response.content
    links = list(LINK.finditer(content))
    # [Source 9] names no retrieved passage (limit=4): dropped; [Source 1] twice is the same display number.
    assert [m.group(1) for m in links] == ["1", "1"]
    assert content.startswith("Customers may request a full refund within 30 days of purchase [[1]](")
    assert len(response.inline_citations) == len(links)
    for citation, link in zip(response.inline_citations, links):
        assert content[citation.start_index : citation.end_index] == link.group(0)
        assert (citation.start_index, citation.end_index) == link.span()
        assert citation.id == link.group(1)
        assert link.group(2) in response.citations
        found = citation.collections_citation
        assert found.file_id == collection.refund_file_id
        assert list(found.collection_ids) == [collection.id]
        assert "30 days" in found.chunk_content and found.chunk_id
        assert 0 < found.score <= 1
    _check_citations(grpc_server, response)


@pytest.mark.parametrize("inline", [False, True], ids=["plain", "inline"])
def test_stream_accumulates_to_the_sampled_response(
    grpc_server: GrpcServer, collection: Collection, inline: bool
) -> None:
    _script(grpc_server, times=2)
    with grpc_server.client() as client:
        sampled = _chat(client, collection, inline).sample()
        pairs = list(_chat(client, collection, inline).stream())
    streamed = pairs[-1][0]  # the SDK's response, accumulated chunk by chunk
    chunks = [chunk for _, chunk in pairs]
    assert len([c for c in chunks if c.content]) > 3  # really streamed, delta by delta
    assert "".join(c.content for c in chunks) == streamed.content
    _assert_same(streamed, sampled)


def _assert_same(streamed, sampled) -> None:
    assert streamed.content == sampled.content
    assert list(streamed.citations) == list(sampled.citations)
    assert list(streamed.inline_citations) == list(sampled.inline_citations)
    assert streamed.finish_reason == sampled.finish_reason
    assert streamed.usage == sampled.usage
    assert streamed.id and streamed.id != sampled.id


def test_async_client_stream_equals_sample(grpc_server: GrpcServer, collection: Collection) -> None:
    _script(grpc_server, times=2)

    async def run():
        client = grpc_server.async_client()
        try:
            sampled = await _chat(client, collection, inline=True).sample()
            pairs = [pair async for pair in _chat(client, collection, inline=True).stream()]
            return sampled, pairs[-1][0]
        finally:
            await client.close()

    sampled, streamed = asyncio.run(run())
    assert len(sampled.inline_citations) == 2
    _assert_same(streamed, sampled)


def test_same_answer_as_the_responses_endpoint_inline(grpc_server: GrpcServer, collection: Collection) -> None:
    """One canonical answer: the gRPC content equals /v1/responses' inline output_text, links and all."""
    _script(grpc_server, times=2)
    with grpc_server.client() as client:
        response = _chat(client, collection, inline=True).sample()
    body = {
        "model": MODEL,
        "input": QUESTION,
        "include": ["inline_citations"],
        "tools": [{"type": "file_search", "vector_store_ids": [collection.id], "max_num_results": 4}],
    }
    http = httpx.post(
        f"{grpc_server.http_url}/v1/responses", json=body, headers={"authorization": f"Bearer {grpc_server.key}"}
    ).json()
    message = next(item for item in http["output"] if item["type"] == "message")
    text = message["content"][0]
    assert text["text"] == response.content
    spans = [(a["start_index"], a["end_index"], a["title"]) for a in text["annotations"]]
    assert spans == [(c.start_index, c.end_index, c.id) for c in response.inline_citations]
    assert http["citations"] == list(response.citations)


def test_wrong_key_is_unauthenticated(grpc_server: GrpcServer, collection: Collection) -> None:
    with grpc_server.client("cal-not-a-key") as client:
        with pytest.raises(grpc.RpcError) as chat_error:
            _chat(client, collection, inline=False).sample()
        with pytest.raises(grpc.RpcError) as list_error:
            client.collections.list()
    assert chat_error.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "Invalid or revoked API key" in chat_error.value.details()
    assert list_error.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_errors_map_to_grpc_codes(grpc_server: GrpcServer, collection: Collection) -> None:
    with grpc_server.client() as client:
        chat = client.chat.create(model=MODEL, tools=[collections_search(["vs_nothing_here"])])
        chat.append(user(QUESTION))
        with pytest.raises(grpc.RpcError) as missing:
            chat.sample()
        chat = client.chat.create(model="grok-4", tools=[collections_search([collection.id])])
        chat.append(user(QUESTION))
        with pytest.raises(grpc.RpcError) as unknown_model:
            chat.sample()
        chat = client.chat.create(model=MODEL, tools=[web_search()])
        chat.append(user(QUESTION))
        with pytest.raises(grpc.RpcError) as bad_tool:
            chat.sample()
        with pytest.raises(grpc.RpcError) as unimplemented:
            client.models.list_language_models()
        with pytest.raises(grpc.RpcError) as deferred:
            _chat(client, collection, inline=False).defer(timeout=None)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND and "collections.create" in missing.value.details()
    assert unknown_model.value.code() == grpc.StatusCode.NOT_FOUND and MODEL in unknown_model.value.details()
    assert bad_tool.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "collections_search" in bad_tool.value.details()
    assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "xai_api.Models/ListLanguageModels" in unimplemented.value.details()
    assert deferred.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "xai_api.Chat/StartDeferredCompletion" in deferred.value.details()
