"""Every sentence of an answer has a status: a model's invented sentence is listed as unsupported (issue 24).

The upstream is the fake in markerless mode: it copies a sentence of the first ``[Source N]`` passage of
its prompt (which Calypso then cites, by inference) and adds one sentence that no passage supports. That
sentence must be listed under ``_aicore.claims.unsupported_spans`` with its exact span, in Responses
(whole and streamed), Chat Completions and a stored conversation message, and the supported one must not.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from calypso.demo import ingest_demo
from calypso.generation.fake_upstream import FakeUpstream, Script

QUESTION = "How many days do customers have to request a full refund?"
INVENTED = "Refunds are also paid in cash at any of our stores in the mountains."


@pytest.fixture
def fake(kb, settings):
    ingest_demo(kb)
    with FakeUpstream(default=Script.markerless(quote=(1,), unsupported=INVENTED)) as upstream:
        settings.llm_base_url = upstream.base_url
        settings.llm_model = "fake-model"
        settings.generator = "upstream"
        yield upstream


def _check(claims: dict[str, Any], text: str) -> None:
    assert claims["support"] == "partial", claims
    spans = claims["unsupported_spans"]
    assert [s["status"] for s in spans] == ["unsupported"]
    span = spans[0]
    assert span["text"] == INVENTED == text[span["start_index"] : span["end_index"]]
    utf16 = text.encode("utf-16-le")
    assert utf16[2 * span["start_index_utf16"] : 2 * span["end_index_utf16"]].decode("utf-16-le") == INVENTED
    assert claims["supported"] >= 1 and claims["unsupported"] == 1
    assert 0 < claims["coverage"] < 1


def _sse(http: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with http.stream("POST", path, json={**body, "stream": True}) as response:
        assert response.status_code == 200
        return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]


def test_responses_list_the_invented_sentence_whole_and_streamed(fake, http) -> None:
    body = {"model": "calypso-rag-agent", "input": QUESTION}
    response = http.post("/v1/responses", json=body).json()
    text = next(o for o in response["output"] if o["type"] == "message")["content"][0]["text"]
    claims = response["metadata"]["_aicore"]["claims"]
    _check(claims, text)
    assert response["metadata"]["_aicore"]["grounded_sources_state"] == "available"  # seed 000's value kept
    streamed = _sse(http, "/v1/responses", body)[-1]["response"]
    assert streamed["metadata"]["_aicore"]["claims"] == claims


def test_chat_completions_and_stored_conversations_list_it_too(fake, http) -> None:
    body = {"model": "calypso-rag-agent", "messages": [{"role": "user", "content": QUESTION}]}
    message = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
    claims = message["_aicore"]["claims"]
    _check(claims, message["content"])  # offsets into the content as sent: its "[1]" markers counted
    finish = [c for c in _sse(http, "/v1/chat/completions", body) if c["choices"][0].get("finish_reason")][-1]
    assert finish["choices"][0]["delta"]["_aicore"]["claims"] == claims

    cid = http.post("/v1/conversations", json={"bot": "calypso-rag-agent"}).json()["id"]
    turn = http.post(f"/v1/conversations/{cid}/messages", json={"content": QUESTION}).json()
    _check(turn["message"]["_aicore"]["claims"], turn["message"]["content"])  # seed 004: [Source N] kept
    # A second turn is judged on its own answer, and the stored history keeps both turns' statuses.
    second = http.post(f"/v1/conversations/{cid}/messages", json={"content": QUESTION}).json()
    _check(second["message"]["_aicore"]["claims"], second["message"]["content"])
    stored = [m for m in http.get(f"/v1/conversations/{cid}").json()["messages"] if m["role"] == "assistant"]
    assert len(stored) == 2 and all(m["_aicore"]["claims"]["support"] == "partial" for m in stored)
    # OpenAI's Chat Completions with the first turn replayed as history.
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": message["content"]}]
    again = http.post("/v1/chat/completions", json={**body, "messages": [*history, body["messages"][0]]}).json()
    _check(again["choices"][0]["message"]["_aicore"]["claims"], again["choices"][0]["message"]["content"])


def test_an_extractive_answer_is_supported_throughout(kb, http) -> None:
    ingest_demo(kb)
    body = {"model": "calypso-rag-agent", "input": QUESTION}
    claims = http.post("/v1/responses", json=body).json()["metadata"]["_aicore"]["claims"]
    assert claims["support"] == "supported" and claims["coverage"] == 1.0 and claims["unsupported_spans"] == []


def test_not_found_claims_nothing(kb, http) -> None:
    ingest_demo(kb)
    body = {"model": "calypso-rag-agent", "input": "What do ducks eat?"}
    response = http.post("/v1/responses", json=body).json()
    claims = response["metadata"]["_aicore"]["claims"]
    if response["metadata"]["_aicore"]["grounded_sources_state"] == "missing":
        assert claims["support"] == "no_claims" and claims["coverage"] is None and claims["not_a_claim"] >= 1


def test_inline_links_keep_the_spans_on_the_text_sent(fake, http) -> None:
    body = {"model": "calypso-rag-agent", "input": QUESTION, "include": ["inline_citations"]}
    response = http.post("/v1/responses", json=body).json()
    text = next(o for o in response["output"] if o["type"] == "message")["content"][0]["text"]
    assert "[[1]](" in text
    _check(response["metadata"]["_aicore"]["claims"], text)


def _streamed_statuses(events: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The sentence statuses a stream gave, each checked against the text it was sent with."""
    statuses = []
    for event in events:
        sentence = event.get("sentence") or event.get("choices", [{}])[0].get("delta", {}).get("_aicore", {}).get(
            "sentence"
        )
        if sentence is None:
            continue
        assert text[sentence["start_index"] : sentence["end_index"]] == sentence["text"]
        utf16 = text.encode("utf-16-le")[2 * sentence["start_index_utf16"] : 2 * sentence["end_index_utf16"]]
        assert utf16.decode("utf-16-le") == sentence["text"]
        statuses.append(sentence)
    assert [s["index"] for s in statuses] == list(range(len(statuses)))
    return statuses


@pytest.mark.parametrize("include", [[], ["inline_citations"]])
def test_responses_stream_each_sentence_status_as_it_ends(fake, http, include) -> None:
    body = {"model": "calypso-rag-agent", "input": QUESTION, "include": include}
    events = _sse(http, "/v1/responses", body)
    completed = events[-1]["response"]
    text = next(o for o in completed["output"] if o["type"] == "message")["content"][0]["text"]
    statuses = _streamed_statuses([e for e in events if e["type"] == "response.output_text.sentence_status"], text)
    flagged = [s for s in statuses if s["status"] in ("unsupported", "weak")]
    claims = completed["metadata"]["_aicore"]["claims"]
    # The stream says what the completed response says, span for span.
    keys = ("text", "status", "start_index", "end_index", "start_index_utf16", "end_index_utf16", "support_score")
    assert [{k: s[k] for k in keys} for s in flagged] == [{k: s[k] for k in keys} for s in claims["unsupported_spans"]]
    assert [s["text"] for s in flagged] == [INVENTED]
    assert claims["supported"] == sum(s["status"] == "supported" for s in statuses) >= 1
    # The invented sentence's status arrives before the text is complete when more follows it.
    first = next(i for i, e in enumerate(events) if e["type"] == "response.output_text.sentence_status")
    assert first < next(i for i, e in enumerate(events) if e["type"] == "response.output_text.done")


def test_chat_stream_gives_each_sentence_status_beside_the_content(fake, http) -> None:
    body = {"model": "calypso-rag-agent", "messages": [{"role": "user", "content": QUESTION}]}
    chunks = _sse(http, "/v1/chat/completions", body)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    statuses = _streamed_statuses([c for c in chunks if c["choices"]], content)
    finish = [c for c in chunks if c["choices"] and c["choices"][0].get("finish_reason")][-1]
    spans = finish["choices"][0]["delta"]["_aicore"]["claims"]["unsupported_spans"]
    assert [(s["start_index"], s["end_index"]) for s in statuses if s["status"] == "unsupported"] == [
        (s["start_index"], s["end_index"]) for s in spans
    ]


def test_the_openai_sdk_streams_through_the_status_events(fake, openai_client) -> None:
    """Official clients skip event types they do not know: the SDK's stream helper still completes."""
    with openai_client.responses.stream(model="calypso-rag-agent", input=QUESTION) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.output_text.sentence_status" in kinds
    assert INVENTED in final.output_text
    chat = openai_client.chat.completions.create(
        model="calypso-rag-agent", messages=[{"role": "user", "content": QUESTION}], stream=True
    )
    assert INVENTED in "".join(c.choices[0].delta.content or "" for c in chat if c.choices)


DECLINE = "The provided documents do not say whether refunds are also paid in cash at the stores."


def test_a_models_own_decline_is_not_cited_and_claims_nothing(kb, settings, http) -> None:
    """An upstream's "the sources do not say" gets no inferred citation (the nearest refund passage would
    fit its words) and is not a claim; an answer made only of it is seed 000's ``missing``."""
    ingest_demo(kb)
    settings.llm_model, settings.generator = "fake-model", "upstream"
    body = {"model": "calypso-rag-agent", "input": QUESTION}
    with FakeUpstream(default=Script.from_text(DECLINE)) as upstream:
        settings.llm_base_url = upstream.base_url
        response = http.post("/v1/responses", json=body).json()
        message = next(o for o in response["output"] if o["type"] == "message")["content"][0]
        aicore = response["metadata"]["_aicore"]
        assert message["text"] == DECLINE and message["annotations"] == []
        assert aicore["grounded_sources_state"] == "missing"
        assert aicore["claims"]["support"] == "no_claims" and aicore["claims"]["not_a_claim"] == 1

        upstream.default = Script.markerless(quote=(1,), unsupported=DECLINE)
        response = http.post("/v1/responses", json=body).json()
    message = next(o for o in response["output"] if o["type"] == "message")["content"][0]
    claims = response["metadata"]["_aicore"]["claims"]
    assert message["annotations"] and all(DECLINE not in a["text"] for a in message["annotations"])
    assert claims["support"] == "supported" and claims["unsupported_spans"] == []
