"""Hybrid search through the API with the ANN graph forced on (CALYPSO_ANN_MIN_VECTORS=1): the real local
model, real usearch, the official openai SDK on loopback. Passages come from the graph and its tail,
filters select by attributes, and a deleted document's passages never come back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.scope import DEFAULT_WORKSPACE
from calypso.services import Services, open_services
from testkit.live_server import LiveServer, free_port

pytest.importorskip("onnxruntime")
pytest.importorskip("usearch")

DOCS = {
    "canteen.txt": ("The staff canteen serves breakfast from seven and a hot lunch from noon until two.", "food"),
    "remote.txt": ("Employees may work from home two days each week once their manager approves.", "work"),
    "parking.txt": ("Parking permits are issued by the facilities team every January.", "work"),
    "cafe.txt": ("A small cafe on the third floor sells coffee and sandwiches all afternoon.", "food"),
}
MEANING_ONLY = "when can I eat in the cafeteria"
DENSE_ONLY = {"hybrid_search": {"text_weight": 0, "embedding_weight": 1}}


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    graph_on = settings.model_copy(
        update={"embedding_model": "minilm-l6-v2-int8", "job_poll_seconds": 0.1, "ann_min_vectors": 1}
    )
    opened = open_services(graph_on)
    yield opened
    opened.close()


@pytest.fixture
def client(services: Services) -> Iterator[openai.OpenAI]:
    with LiveServer(create_app(services.settings, services), free_port()) as live:
        yield openai.OpenAI(base_url=f"{live.url}/v1", api_key="test-key", max_retries=0)


def _upload(client: openai.OpenAI, name: str) -> str:
    """The document's id; its file in the vector store ``hr`` gets the topic as attribute."""
    text, topic = DOCS[name]
    with httpx.Client(base_url=str(client.base_url), timeout=60) as http:
        answer = http.post("documents", params={"wait": "true"}, data={"namespace": "hr"}, files={"file": (name, text)})
    assert answer.status_code == 201, answer.text
    client.vector_stores.files.update(answer.json()["file_id"], vector_store_id="hr", attributes={"topic": topic})
    return str(answer.json()["id"])


def _embedded(client: openai.OpenAI, ids: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not all(
        client.get(f"/documents/{i}", cast_to=object)["embeddings"]["status"] == "completed"  # type: ignore[index]
        for i in ids
    ):
        assert time.monotonic() < deadline, "embeddings not done"
        time.sleep(0.1)


def _search(client: openai.OpenAI, **body: Any) -> list[dict[str, Any]]:
    page: dict[str, Any] = client.post("/search", body={"namespace": "hr", **body}, cast_to=object)
    return list(page["data"])


def test_hybrid_search_with_the_graph_on(client: openai.OpenAI, services: Services) -> None:
    first = _upload(client, "canteen.txt")
    _embedded(client, [first])
    vectors = services.search.vectors("hr", DEFAULT_WORKSPACE)
    assert vectors is not None and vectors.wait_for_graph(timeout=30)
    assert vectors.graph_rows == 1  # the graph holds the first passage ...
    ids = [first] + [_upload(client, name) for name in ("remote.txt", "parking.txt", "cafe.txt")]
    _embedded(client, ids)
    services.search.catch_up()  # the index follows the feed on its own thread: applied now, not "soon"
    assert vectors.rows == 4 and vectors.graph_rows == 1  # ... and the others sit in its tail

    hits = _search(client, query=MEANING_ONLY)
    assert [h["filename"] for h in hits[:2]] == ["canteen.txt", "cafe.txt"]  # found by meaning alone
    dense = _search(client, query=MEANING_ONLY, ranking_options=DENSE_ONLY, max_num_results=10)
    assert len(dense) == 4 and dense[0]["score"] == 1.0
    cosines = [h["attributes"]["cosine"] for h in dense]
    assert cosines == sorted(cosines, reverse=True) and all(0 < c <= 1 for c in cosines)

    # A filter on attributes: the vector-store view of the namespace, through the SDK.
    page = client.vector_stores.search(
        vector_store_id="hr", query=MEANING_ONLY, filters={"type": "eq", "key": "topic", "value": "work"}
    )
    assert page.data and {r.filename for r in page.data} <= {"remote.txt", "parking.txt"}

    client.delete(f"/documents/{first}", cast_to=object)
    after = _search(client, query=MEANING_ONLY, ranking_options=DENSE_ONLY, max_num_results=10)
    assert [h["filename"] for h in after] == [h["filename"] for h in dense if h["filename"] != "canteen.txt"]
