"""Hybrid retrieval through the API with the real local model (issue 12): documents report their
embedding progress, search finds passages by meaning, weights and threshold apply per request, and
POST /v1/admin/reindex rebuilds every vector. Through the official openai SDK on loopback.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.services import Services, open_services
from testkit.live_server import LiveServer, free_port

pytest.importorskip("onnxruntime")

DOCS = {
    "canteen.txt": "The staff canteen serves breakfast from seven and a hot lunch from noon until two.",
    "remote.txt": "Employees may work from home two days each week once their manager approves.",
    "parking.txt": "Parking permits are issued by the facilities team every January.",
}
MEANING_ONLY = "when can I eat in the cafeteria"


@pytest.fixture
def hybrid_services(settings: Settings) -> Iterator[Services]:
    hybrid = settings.model_copy(update={"embedding_model": "minilm-l6-v2-int8", "job_poll_seconds": 0.1})
    opened = open_services(hybrid)
    assert opened.vectors.embedder is not None
    yield opened
    opened.close()


@pytest.fixture
def client(hybrid_services: Services) -> Iterator[openai.OpenAI]:
    with LiveServer(create_app(hybrid_services.settings, hybrid_services), free_port()) as live:
        yield openai.OpenAI(base_url=f"{live.url}/v1", api_key="test-key", max_retries=0)


def _upload_all(client: openai.OpenAI) -> dict[str, str]:
    """Each document through /v1/documents (the SDK has no helper for it: plain HTTP)."""
    ids = {}
    with httpx.Client(base_url=str(client.base_url), timeout=60) as http:
        for name, text in DOCS.items():
            answer = http.post(
                "documents", params={"wait": "true"}, data={"namespace": "hr"}, files={"file": (name, text)}
            )
            assert answer.status_code == 201, answer.text
            ids[name] = answer.json()["id"]
    return ids


def _embedded(client: openai.OpenAI, ids: dict[str, str], timeout: float = 60) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        docs = [client.get(f"/documents/{i}", cast_to=object) for i in ids.values()]
        if all(d["embeddings"]["status"] == "completed" for d in docs):  # type: ignore[index]
            return docs  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"embeddings not done after {timeout}s: {[d['embeddings'] for d in docs]}")  # type: ignore[index]
        time.sleep(0.1)


def _search(client: openai.OpenAI, **body: Any) -> list[dict[str, Any]]:
    page: dict[str, Any] = client.post("/search", body={"namespace": "hr", **body}, cast_to=object)
    return list(page["data"])


def test_documents_report_embedding_progress_and_search_finds_by_meaning(client: openai.OpenAI) -> None:
    ids = _upload_all(client)
    docs = _embedded(client, ids)
    assert {d["embeddings"]["model"] for d in docs} == {"minilm-l6-v2-int8"}
    assert all(d["embeddings"]["passages_embedded"] == d["chunk_count"] == 1 for d in docs)

    hits = _search(client, query=MEANING_ONLY)
    assert hits[0]["filename"] == "canteen.txt"
    assert all(0.0 <= h["score"] <= 1.0 for h in hits)
    assert hits[0]["attributes"]["cosine"] > 0.3 and "bm25" not in hits[0]["attributes"]

    # The vector store view of the same namespace, through the SDK's own helper.
    page = client.vector_stores.search(vector_store_id="hr", query=MEANING_ONLY)
    assert page.data[0].filename == "canteen.txt"


def test_weights_and_threshold_per_request(client: openai.OpenAI) -> None:
    _embedded(client, _upload_all(client))
    keyword_only = {"hybrid_search": {"text_weight": 1, "embedding_weight": 0}}
    assert _search(client, query=MEANING_ONLY, ranking_options=keyword_only) == []
    semantic_only = {"hybrid_search": {"text_weight": 0, "embedding_weight": 1}}
    by_meaning = _search(client, query=MEANING_ONLY, ranking_options=semantic_only, max_num_results=3)
    assert [h["filename"] for h in by_meaning][0] == "canteen.txt" and len(by_meaning) == 3
    assert by_meaning[0]["score"] == 1.0  # the best of a run maps to 1, the run's last to 0

    # A passage both runs find ranks by the weighted sum; the threshold cuts on it.
    both = _search(client, query="lunch in the cafeteria", max_num_results=3)
    assert both[0]["filename"] == "canteen.txt" and both[0]["score"] == pytest.approx(1.0)
    assert _search(client, query="lunch in the cafeteria", ranking_options={"score_threshold": 0.99}) == both[:1]

    with pytest.raises(openai.BadRequestError) as refused:
        _search(
            client, query=MEANING_ONLY, ranking_options={"hybrid_search": {"text_weight": 0, "embedding_weight": 0}}
        )
    assert refused.value.body["param"].startswith("ranking_options")  # type: ignore[index]


def test_file_search_tool_takes_hybrid_weights(client: openai.OpenAI) -> None:
    _embedded(client, _upload_all(client))
    tool = {
        "type": "file_search",
        "vector_store_ids": ["hr"],
        "ranking_options": {"hybrid_search": {"text_weight": 0.2, "embedding_weight": 0.8}},
    }
    response = client.responses.create(
        model="calypso-rag-agent",
        input=MEANING_ONLY,
        tools=[tool],
        include=["file_search_call.results"],  # type: ignore[list-item]
    )
    call = next(item for item in response.output if item.type == "file_search_call")
    assert call.results and call.results[0].filename == "canteen.txt"
    assert all(0.0 <= (r.score or 0.0) <= 1.0 for r in call.results)


def test_reindex_through_the_admin_api(client: openai.OpenAI, hybrid_services: Services) -> None:
    ids = _upload_all(client)
    _embedded(client, ids)
    answer: dict[str, Any] = client.post("/admin/reindex", body={}, cast_to=object)
    assert answer == {"object": "reindex", "model": "minilm-l6-v2-int8", "documents_queued": 3}
    docs = _embedded(client, ids)  # the serve workers embed them again
    assert all(d["embeddings"]["passages_embedded"] == 1 for d in docs)
    assert _search(client, query=MEANING_ONLY)[0]["filename"] == "canteen.txt"
