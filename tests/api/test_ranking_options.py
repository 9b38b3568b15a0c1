"""ranking_options on the file_search tool and POST /v1/search, and 0..1 scores in every response shape (issue 12).

Through the official openai SDK against the live server on loopback.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from calypso.demo import ingest_demo

QUESTION = "How long do I have to ask for a refund?"


@pytest.fixture
def demo_kb(kb):
    ingest_demo(kb)
    return kb


def _search(client: openai.OpenAI, **body: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.post("/search", body=body, cast_to=object)
    return result


def _tool(**ranking: Any) -> list[Any]:
    return [{"type": "file_search", "vector_store_ids": ["general"], "ranking_options": ranking}]


def _results(response: Any) -> list[Any]:
    call = next(item for item in response.output if item.type == "file_search_call")
    return list(call.results or [])


def _scores(value: Any) -> list[Any]:
    """Every value under a "score" key, anywhere in a JSON document."""
    if isinstance(value, dict):
        found = [v for k, v in value.items() if k == "score"]
        return found + [s for v in value.values() for s in _scores(v)]
    if isinstance(value, list):
        return [s for v in value for s in _scores(v)]
    return []


def test_search_scores_in_unit_range_with_raw_bm25_in_attributes(demo_kb, openai_client) -> None:
    page = _search(openai_client, query=QUESTION, max_num_results=20)
    assert "within 30 days of purchase" in page["data"][0]["content"][0]["text"]
    for hit in page["data"]:
        assert 0.0 <= hit["score"] <= 1.0
        assert hit["attributes"]["bm25"] > 0
    assert [h["score"] for h in page["data"]] == sorted((h["score"] for h in page["data"]), reverse=True)


def test_search_score_threshold(demo_kb, openai_client) -> None:
    every = _search(openai_client, query="refund store credit", max_num_results=20)["data"]
    cut = every[len(every) // 2]["score"]
    kept = _search(
        openai_client, query="refund store credit", max_num_results=20, ranking_options={"score_threshold": cut}
    )["data"]
    assert 0 < len(kept) < len(every)
    assert [h["attributes"]["chunk_index"] for h in kept] == [
        h["attributes"]["chunk_index"] for h in every if h["score"] >= cut
    ]
    options = {"ranker": "none", "score_threshold": 0, "hybrid_search": {"embedding_weight": 0, "text_weight": 1}}
    assert len(_search(openai_client, query="refund store credit", ranking_options=options)["data"]) == len(every)


@pytest.mark.parametrize(
    ("ranking", "param", "code"),
    [
        ({"score_threshold": 1.5}, "ranking_options.score_threshold", "decimal_above_max_value"),
        ({"score_threshold": -0.1}, "ranking_options.score_threshold", "decimal_below_min_value"),
        ({"score_threshold": "0.5"}, "ranking_options.score_threshold", "invalid_type"),
        ({"ranker": "fastest"}, "ranking_options.ranker", "invalid_value"),
        ({"hybrid_search": {"embedding_weight": 0, "text_weight": 0}}, "ranking_options.hybrid_search", None),
        (
            {"hybrid_search": {"embedding_weight": -1, "text_weight": 1}},
            "ranking_options.hybrid_search.embedding_weight",
            None,
        ),
        ({"hybrid_search": {"embedding_weight": 1}}, "ranking_options.hybrid_search.text_weight", None),
        ({"bogus": 1}, "ranking_options.bogus", "unknown_parameter"),
    ],
)
def test_search_ranking_options_validation(
    openai_client, ranking: dict[str, Any], param: str, code: str | None
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _search(openai_client, query="refund", ranking_options=ranking)
    assert caught.value.param == param
    if code:
        assert caught.value.code == code


def test_responses_score_threshold_cuts_file_search_results(demo_kb, openai_client) -> None:
    every = _results(openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, tools=_tool()))
    assert every and all(0.0 <= r.score <= 1.0 for r in every)
    cut = sorted(r.score for r in every)[len(every) // 2]
    kept = _results(
        openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, tools=_tool(score_threshold=cut))
    )
    assert kept and len(kept) < len(every) and all(r.score >= cut for r in kept)
    none = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, tools=_tool(score_threshold=1))
    assert _results(none) == []
    weighted = openai_client.responses.create(
        model="calypso-rag-agent",
        input=QUESTION,
        tools=_tool(ranker="default-2024-11-15", hybrid_search={"embedding_weight": 0.3, "text_weight": 0.7}),
    )
    assert [r.file_id for r in _results(weighted)] == [r.file_id for r in every]


@pytest.mark.parametrize(
    ("ranking", "param"),
    [
        ({"score_threshold": 2}, "tools[0].ranking_options.score_threshold"),
        ({"score_threshold": True}, "tools[0].ranking_options.score_threshold"),
        ({"ranker": "none"}, "tools[0].ranking_options.ranker"),  # /v1/search only, as in OpenAI's types
        ({"hybrid_search": {"embedding_weight": 0, "text_weight": 0}}, "tools[0].ranking_options.hybrid_search"),
        (
            {"hybrid_search": {"embedding_weight": 1, "text_weight": "x"}},
            "tools[0].ranking_options.hybrid_search.text_weight",
        ),
        ({"extra": 1}, "tools[0].ranking_options.extra"),
    ],
)
def test_responses_ranking_options_validation(openai_client, ranking: dict[str, Any], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, tools=_tool(**ranking))
    assert caught.value.param == param
    assert caught.value.type == "invalid_request_error"


def test_ranking_options_must_be_an_object(openai_client) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.responses.create(
            model="calypso-rag-agent",
            input=QUESTION,
            tools=[{"type": "file_search", "vector_store_ids": ["general"], "ranking_options": "fast"}],
        )
    assert caught.value.param == "tools[0].ranking_options"
    assert caught.value.code == "invalid_type"


def test_every_score_in_every_response_shape_is_in_unit_range(demo_kb, http: httpx.Client) -> None:
    question = {"role": "user", "content": "How many days do customers have to request a full refund?"}
    shapes: dict[str, Any] = {
        "search": http.post("/v1/search", json={"query": question["content"], "max_num_results": 50}).json(),
        "responses legacy": http.post("/v1/responses", json={"input": question["content"]}).json(),
        "responses native": http.post(
            "/v1/responses", json={"input": question["content"], "metadata": {"citation_compat": "native"}}
        ).json(),
        "chat": http.post("/v1/chat/completions", json={"model": "calypso-rag-agent", "messages": [question]}).json(),
    }
    with http.stream("POST", "/v1/responses", json={"input": question["content"], "stream": True}) as streamed:
        events = [json.loads(line[5:]) for line in streamed.iter_lines() if line.startswith("data:")]
    shapes["responses stream"] = events
    with http.stream(
        "POST", "/v1/chat/completions", json={"model": "calypso-rag-agent", "messages": [question], "stream": True}
    ) as streamed:
        chunks = [line[5:].strip() for line in streamed.iter_lines() if line.startswith("data:")]
    shapes["chat stream"] = [json.loads(c) for c in chunks if c != "[DONE]"]
    for name, body in shapes.items():
        scores = _scores(body)
        assert scores, f"{name}: no scores at all"
        assert all(isinstance(s, (int, float)) and 0.0 <= s <= 1.0 for s in scores), (name, scores)
