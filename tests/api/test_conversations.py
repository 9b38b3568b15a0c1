"""/v1/conversations (seed 004): stored turns, atomic and serialised, over real documents."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from calypso.bots import Bot
from calypso.generation.fake_upstream import FakeUpstream, Script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests_support import MARKER, WAIT, render, served_knowledge_base

from testkit.live_server import LiveServer


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def live(tmp_path_factory, fake: FakeUpstream) -> Iterator[LiveServer]:
    bots = [
        Bot(id="source-bot", namespace="general", marker_style="source"),
        Bot(id="fake-source", namespace="general", marker_style="source", generator="upstream"),
        Bot(id="scratch-bot", namespace="scratch", marker_style="source"),
    ]
    home = tmp_path_factory.mktemp("conv") / "home"
    with served_knowledge_base(
        home, fake.base_url, ["md/github-terms-of-service.md", "pdf/GeoTopo-komprimiert.pdf"], bots
    ) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_fake(fake: FakeUpstream) -> None:
    fake.reset()


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as client:
        yield client


def _conversation(http: httpx.Client, bot: str = "calypso-rag-agent", **extra) -> str:
    response = http.post("/v1/conversations", json={"bot": bot, **extra})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _sse(http: httpx.Client, url: str, body: dict) -> list[dict | str]:
    events: list[dict | str] = []
    with http.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def _reassemble(events: list) -> dict:
    chunks = [e for e in events if isinstance(e, dict) and e.get("choices")]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    finish = next(c for c in chunks if c["choices"][0]["finish_reason"])
    return {"id": finish["id"], "content": content, "citations": finish["choices"][0]["delta"].get("citations")}


# -- the lifecycle ----------------------------------------------------------------------------


def test_create_turns_replay_list_delete(http: httpx.Client) -> None:
    created = http.post("/v1/conversations", json={"model": "source-bot", "metadata": {"ticket": "T-9"}})
    assert created.status_code == 201
    conversation = created.json()
    assert conversation["object"] == "conversation" and conversation["id"].startswith("conv_")
    assert conversation["bot"] == "source-bot" and conversation["metadata"] == {"ticket": "T-9"}
    cid = conversation["id"]

    turn = http.post(
        f"/v1/conversations/{cid}/messages",
        json={"content": "How many days do customers have to request a full refund?"},
    )
    assert turn.status_code == 200, turn.text
    message = turn.json()["message"]
    assert message["role"] == "assistant" and "[Source 1]" in message["content"]
    assert message["citations"] and message["citations"][0]["source_filename"] == "refund_policy_2026.md"
    assert render(message).startswith("Customers may request a full refund within 30 days of purchase. [1]")
    assert turn.json()["user_message"]["citations"] is None

    streamed = _sse(
        http, f"/v1/conversations/{cid}/messages", {"content": "Can I get a refund for a gift card?", "stream": True}
    )
    assert streamed[-1] == "[DONE]"
    second = _reassemble(streamed)
    assert "Gift cards are never refundable." in second["content"] and second["citations"]

    replay = http.get(f"/v1/conversations/{cid}").json()
    messages = replay["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [m["citations"] for m in messages[0::2]] == [None, None]  # always null on user messages
    assert messages[1] == message
    assert messages[3]["id"] == second["id"] and messages[3]["content"] == second["content"]
    assert messages[3]["citations"] == second["citations"]
    assert render(messages[3]) == render({"content": second["content"], "citations": second["citations"]})

    listing = http.get("/v1/conversations", params={"limit": 100}).json()
    assert listing["object"] == "list" and cid in [c["id"] for c in listing["data"]]
    deleted = http.delete(f"/v1/conversations/{cid}")
    assert deleted.json() == {"id": cid, "object": "conversation.deleted", "deleted": True}
    assert http.get(f"/v1/conversations/{cid}").status_code == 404
    assert http.post(f"/v1/conversations/{cid}/messages", json={"content": "hi"}).status_code == 404


def test_pagination(http: httpx.Client) -> None:
    ids = [_conversation(http) for _ in range(3)]
    first = http.get("/v1/conversations", params={"limit": 2}).json()
    assert [c["id"] for c in first["data"]] == ids[::-1][:2] and first["has_more"]
    rest = http.get("/v1/conversations", params={"limit": 2, "after": first["last_id"]}).json()
    assert rest["data"][0]["id"] == ids[0]
    ascending = http.get("/v1/conversations", params={"limit": 100, "order": "asc"}).json()["data"]
    assert [c["id"] for c in ascending][-3:] == ids


def test_history_goes_to_the_model_without_old_markers(http: httpx.Client, fake: FakeUpstream) -> None:
    cid = _conversation(http, "fake-source")
    fake.script(Script.from_text("Refunds take 30 days [Source 1]."), Script.from_text("Store credit [Source 2]."))
    http.post(f"/v1/conversations/{cid}/messages", json={"content": "How long for a refund?"})
    http.post(f"/v1/conversations/{cid}/messages", json={"content": "And after 30 days?"})
    sent = fake.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == "Refunds take 30 days." and sent[3]["content"] == "And after 30 days?"


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"content": ""}, 400, "content"),
        ({"content": "hi", "role": "assistant"}, 400, "role"),
        ({"content": "hi", "temperature": 1}, 400, "temperature"),
    ],
)
def test_bad_turns(http: httpx.Client, body: dict, status: int, param: str) -> None:
    cid = _conversation(http)
    response = http.post(f"/v1/conversations/{cid}/messages", json=body)
    assert response.status_code == status and response.json()["error"]["param"] == param


def test_unknown_bot(http: httpx.Client) -> None:
    response = http.post("/v1/conversations", json={"bot": "nope"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"


# -- atomic turns -----------------------------------------------------------------------------


def test_failed_generation_stores_nothing_and_says_so(http: httpx.Client, fake: FakeUpstream) -> None:
    cid = _conversation(http, "fake-source")
    fake.script(Script(tokens=["Refunds ", "take ", "30 days."], disconnect_after=1))
    response = http.post(f"/v1/conversations/{cid}/messages", json={"content": "How long for a refund?"})
    assert response.status_code in (502, 504)
    assert response.json()["error"]["message"].startswith("Nothing was stored for this turn")

    fake.script(Script(tokens=["Refunds ", "take ", "30 days."], disconnect_after=2))
    events = _sse(http, f"/v1/conversations/{cid}/messages", {"content": "How long for a refund?", "stream": True})
    assert "[DONE]" not in events and events[-1]["error"]["message"].startswith("Nothing was stored for this turn")
    assert http.get(f"/v1/conversations/{cid}").json()["messages"] == []


def test_cancelled_stream_stores_nothing_and_frees_the_conversation(http: httpx.Client, fake: FakeUpstream) -> None:
    cid = _conversation(http, "fake-source")
    fake.script(Script(tokens=[f"word{i} " for i in range(300)], token_delay=0.02))
    with http.stream(
        "POST", f"/v1/conversations/{cid}/messages", json={"content": "How long for a refund?", "stream": True}
    ) as response:
        for line in response.iter_lines():
            if '"content":"word' in line:
                break
    assert fake.wait_for_disconnects(1, timeout=5)
    time.sleep(0.1)
    assert http.get(f"/v1/conversations/{cid}").json()["messages"] == []
    fake.script(Script.from_text("Refunds take 30 days [Source 1]."))
    ok = http.post(f"/v1/conversations/{cid}/messages", json={"content": "How long for a refund?"}, timeout=10)
    assert ok.status_code == 200 and len(http.get(f"/v1/conversations/{cid}").json()["messages"]) == 2


def test_concurrent_posts_are_serialised(http: httpx.Client, fake: FakeUpstream, live: LiveServer) -> None:
    cid = _conversation(http, "fake-source")
    fake.script(
        Script.from_text("Refunds take 30 days [Source 1].", token_size=2, token_delay=0.02),
        Script.from_text("Gift cards are never refundable [Source 1].", token_size=2, token_delay=0.02),
    )
    start = threading.Barrier(2)

    def post(question: str, stream: bool) -> int:
        with httpx.Client(base_url=live.url, timeout=30) as client:
            start.wait()
            if stream:
                return len(_sse(client, f"/v1/conversations/{cid}/messages", {"content": question, "stream": True}))
            return client.post(f"/v1/conversations/{cid}/messages", json={"content": question}).status_code

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(post, ["How long for a refund?", "Gift cards?"], [False, True]))
    assert results[0] == 200 and results[1] > 2
    messages = http.get(f"/v1/conversations/{cid}").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    # The second turn started only after the first was stored: the model saw it in the history.
    first_question, first_answer = messages[0]["content"], messages[1]["content"]
    second_request = fake.requests[1]["messages"]
    assert [m["role"] for m in second_request] == ["system", "user", "assistant", "user"]
    assert second_request[1]["content"] == first_question
    assert second_request[2]["content"] == MARKER.sub("", first_answer).replace(" .", ".")
    assert second_request[3]["content"] == messages[2]["content"]


# -- documents referenced by old answers ------------------------------------------------------


def test_answers_keep_document_id_after_the_document_is_deleted(http: httpx.Client) -> None:
    upload = http.post(
        "/v1/documents",
        params=WAIT,
        data={"namespace": "scratch"},
        files={
            "file": ("lighthouse.md", b"# Lighthouse\n\nThe lighthouse keeper lights the lamp at dusk every evening.\n")
        },
    )
    assert upload.status_code == 201, upload.text
    document_id = upload.json()["id"]
    cid = _conversation(http, "scratch-bot")
    message = http.post(
        f"/v1/conversations/{cid}/messages", json={"content": "When does the lighthouse keeper light the lamp?"}
    ).json()["message"]
    assert message["citations"][0]["document_id"] == document_id

    assert http.delete(f"/v1/documents/{document_id}").status_code == 200
    assert http.get(f"/v1/documents/{document_id}").status_code == 404
    stored = http.get(f"/v1/conversations/{cid}").json()["messages"][1]
    assert stored["citations"][0]["document_id"] == document_id  # kept, now resolving to 404
    assert stored["citations"] == message["citations"]
    # Retrieval no longer sees it: a new turn cites nothing.
    again = http.post(
        f"/v1/conversations/{cid}/messages", json={"content": "When does the lighthouse keeper light the lamp?"}
    ).json()["message"]
    assert again["citations"] == []
