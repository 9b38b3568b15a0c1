"""Inferred citations (issue 17): a model that writes no marker still gets its quoted sentences cited.

The upstream is the fake in markerless mode: it copies a sentence from each named
``[Source N]`` passage of the prompt it receives, without any marker, then adds a
sentence no passage supports. Calypso must cite each copied sentence to the passage
(and PDF page) it came from, leave the unsupported one uncited, render the inferred
citations in every dialect like the model's own, and stream exactly what it returns
in one shot.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pypdfium2 as pdfium
import pytest

from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.services.ingestion import Upload
from calypso.text.sentences import sentence_spans

QUESTION = "What did the Frankish expansion and the Bavarian expansion introduce?"
UNSUPPORTED = "My neighbour's grey cat prefers warm sofas to cold mountain passes."
MARKERLESS = Script.markerless(quote=(1, 2), unsupported=UNSUPPORTED)


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


@pytest.fixture
def alps(kb, data_dir: Path) -> dict[str, Any]:
    pdf = data_dir / "alps-wiki-qa/alps_wiki.pdf"
    kb.ingest(Upload(pdf.read_bytes(), pdf.name))
    document = pdfium.PdfDocument(str(pdf))
    pages = {n + 1: _words(document[n].get_textpage().get_text_range()) for n in range(len(document))}
    document.close()
    return {"kb": kb, "pages": pages}


@pytest.fixture
def fake(alps):
    settings = alps["kb"].settings
    with FakeUpstream(default=MARKERLESS) as upstream:
        settings.llm_base_url = upstream.base_url
        settings.llm_model = "fake-model"
        settings.generator = "upstream"
        yield upstream


def _quoted(fake: FakeUpstream) -> list[str]:
    """The sentences the fake copied from the prompt it was sent last."""
    from calypso.generation.fake_upstream import prompt_passages, quotable_sentence

    passages = prompt_passages(fake.requests[-1]["messages"])
    return [quotable_sentence(passages[n]) for n in (1, 2)]


def _sse(http: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with http.stream("POST", path, json={**body, "stream": True}) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    return [json.loads(line[6:]) for line in lines]


def _responses(http: httpx.Client, stream: bool, **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    body = {"model": "calypso-rag-agent", "input": QUESTION, **extra}
    if not stream:
        return http.post("/v1/responses", json=body).json(), []
    events = _sse(http, "/v1/responses", body)
    return events[-1]["response"], events


def _strip_ids(response: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(response))
    for key in ("id", "created_at"):
        data.pop(key)
    for item in data["output"]:
        item.pop("id")
    return data


def _message(response: dict[str, Any]) -> dict[str, Any]:
    return next(item for item in response["output"] if item["type"] == "message")["content"][0]


def test_quoted_sentences_get_inferred_citations_to_the_right_source_and_page(alps, http, fake) -> None:
    response, _ = _responses(http, stream=False)
    quoted = _quoted(fake)
    content = _message(response)
    text = content["text"]
    assert text == " ".join([*quoted, UNSUPPORTED]) and "[" not in text
    results = next(item for item in response["output"] if item["type"] == "file_search_call")["results"]
    by_index = {r["attributes"]["source_index"]: r for r in results}
    annotations = content["annotations"]
    assert [a["text"] for a in annotations] == quoted  # one each; the unsupported sentence has none
    for annotation, sentence in zip(annotations, quoted):
        extra = annotation["_aicore"]
        assert extra["attribution"] == "inferred" and extra["supported"] is True
        assert text[annotation["start_index"] : annotation["end_index"]] == sentence
        source = by_index[extra["source_index"]]
        # The right source: the passage the sentence was copied from (or one holding the same words).
        assert _words(sentence) in _words(source["text"])
        assert _words(annotation["quote"]) and _words(annotation["quote"]) in _words(source["text"])
        # The right page: the PDF page, read independently, holds the start of the quote.
        assert " ".join(_words(annotation["quote"]).split()[:6]) in alps["pages"][extra["page_number"]]
    meta = response["metadata"]["_aicore"]
    assert meta["grounded_sources_state"] == "available"
    assert meta["attribution"] == {
        "mode": "fill",
        "model": 0,
        "inferred": len(annotations),
        "unsupported": 0,
        "unsupported_citations": [],
    }
    assert [s["chunks"] for s in meta["grounding_supports"]] == [[a["_aicore"]["source_index"]] for a in annotations]
    # The legacy display text shows the inferred numbers where a model's markers would stand.
    assert meta["display_text"].startswith(quoted[0] + "[1]")


def test_streaming_equals_one_shot_and_events_follow_their_sentence(alps, http, fake) -> None:
    plain, _ = _responses(http, stream=False)
    streamed, events = _responses(http, stream=True)
    assert _strip_ids(streamed) == _strip_ids(plain)
    text = ""
    for event in events:
        if event["type"] == "response.output_text.delta":
            text += event["delta"]
        elif event["type"] == "response.output_text.annotation.added":
            annotation = event["annotation"]
            # Emitted right after the delta that ends its sentence: nothing of the next sentence yet.
            assert text == text[: annotation["end_index"]] and len(text) == annotation["end_index"]
    assert text == _message(plain)["text"]


def test_inline_dialect_inserts_links_for_inferred_citations(alps, http, fake) -> None:
    plain, _ = _responses(http, stream=False, include=["inline_citations"])
    streamed, events = _responses(http, stream=True, include=["inline_citations"])
    assert _strip_ids(streamed) == _strip_ids(plain)
    content = _message(plain)
    text = content["text"]
    quoted = _quoted(fake)
    assert text.startswith(quoted[0] + "[[1]](") and text.rstrip().endswith(UNSUPPORTED)
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == text
    for annotation in content["annotations"]:
        assert annotation["type"] == "url_citation" and annotation["_aicore"]["attribution"] == "inferred"
        assert (
            text[annotation["start_index"] : annotation["end_index"]]
            == f"[[{annotation['title']}]]({annotation['url']})"
        )


def _chat(http: httpx.Client, model: str, stream: bool) -> tuple[str, dict[str, Any]]:
    body = {"model": model, "messages": [{"role": "user", "content": QUESTION}]}
    if not stream:
        message = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
        return message["content"], message
    chunks = _sse(http, "/v1/chat/completions", body)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    content = "".join(d.get("content") or "" for d in deltas)
    finish = next(c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    annotations = next(d["annotations"] for d in deltas if "annotations" in d)
    return content, {"annotations": annotations, **finish["delta"]}


@pytest.mark.parametrize(("style", "marker"), [("numeric", "[{n}]"), ("source", "[Source {n}]")])
def test_chat_shows_inferred_markers_in_both_styles(alps, http, fake, style: str, marker: str) -> None:
    assert http.post("/v1/bots", json={"id": "chat-bot", "marker_style": style}).status_code == 201
    content, message = _chat(http, "chat-bot", stream=False)
    streamed, chunks = _chat(http, "chat-bot", stream=True)
    assert streamed == content
    assert chunks["annotations"] == message["annotations"] and chunks["citations"] == message["citations"]
    assert chunks["_aicore"] == message["_aicore"]
    quoted = _quoted(fake)
    citations = message["citations"]
    assert [c["_aicore"]["attribution"] for c in citations] == ["inferred"] * len(citations)
    first = citations[0]["source_index"]
    assert content.startswith(quoted[0] + marker.format(n=first))
    assert UNSUPPORTED + marker.format(n="").rstrip("]") not in content  # no marker after the unsupported sentence
    if style == "numeric":
        assert "\n\nSources:\n[1] " in content
    for annotation in message["annotations"]:
        span = annotation["url_citation"]
        assert annotation["_aicore"]["attribution"] == "inferred"
        assert content[span["start_index"] : span["end_index"]] in quoted
    assert message["_aicore"]["grounded_sources_state"] == "available"
    assert message["_aicore"]["attribution"]["inferred"] == len(message["annotations"])


def test_conversation_messages_carry_inferred_citations(alps, http, fake) -> None:
    conversation = http.post("/v1/conversations", json={"model": "calypso-rag-agent"}).json()
    turn = http.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": QUESTION}).json()
    stored = http.get(f"/v1/conversations/{conversation['id']}").json()["messages"][-1]
    message = turn["message"]
    assert stored["citations"] == message["citations"] and stored["annotations"] == message["annotations"]
    assert message["citations"] and all(c["_aicore"]["attribution"] == "inferred" for c in message["citations"])
    assert message["_aicore"]["grounded_sources_state"] == "available"
    assert message["content"].startswith(_quoted(fake)[0] + "[1]")


def test_an_unsupported_answer_stays_uncited_and_missing(alps, http, fake) -> None:
    fake.script(Script.markerless(quote=(), unsupported=UNSUPPORTED))
    response, _ = _responses(http, stream=False)
    assert _message(response)["annotations"] == []
    assert response["metadata"]["_aicore"]["grounded_sources_state"] == "missing"
    assert response["metadata"]["_aicore"]["attribution"]["inferred"] == 0


def test_off_leaves_markerless_answers_uncited(alps, http, fake) -> None:
    assert http.post("/v1/bots", json={"id": "strict", "attribution": "off"}).status_code == 201
    response, _ = _responses(http, stream=False, model="strict")
    assert _message(response)["annotations"] == []
    meta = response["metadata"]["_aicore"]
    assert meta["grounded_sources_state"] == "missing" and meta["attribution"]["mode"] == "off"
    # The server setting is the default a bot without its own follows.
    alps["kb"].settings.attribution = "off"
    assert _message(_responses(http, stream=False)[0])["annotations"] == []


def test_fill_keeps_the_models_markers_and_fills_the_rest(alps, http, fake) -> None:
    fake.script(Script(tokens=[]))  # learn the quoted sentences from one request
    _responses(http, stream=False)
    first, second = _quoted(fake)
    fake.script(Script.from_text(f"{first} [Source 1] {second} {UNSUPPORTED}"))
    response, _ = _responses(http, stream=False)
    annotations = _message(response)["annotations"]
    assert [(a["text"], a["_aicore"]["attribution"]) for a in annotations] == [
        (first, "model"),
        (second, "inferred"),
    ]
    assert response["metadata"]["_aicore"]["attribution"]["model"] == 1


@pytest.mark.parametrize("stream", [False, True])
def test_verify_reports_a_wrong_marker_and_cites_the_right_source(alps, http, fake, stream: bool) -> None:
    assert (
        http.post("/v1/bots", json={"id": "checker", "attribution": "verify", "marker_style": "source"}).status_code
        == 201
    )
    fake.script(Script(tokens=[]))
    _responses(http, stream=False)
    first, _ = _quoted(fake)
    # The model cites [Source 1] for a sentence no passage supports, and nothing for a copied one.
    script = f"{UNSUPPORTED[:-1]} [Source 1]. {first}"
    fake.script(Script.from_text(script), Script.from_text(script))
    plain, _ = _responses(http, stream=False, model="checker")
    content, message = _chat(http, "checker", stream=stream)
    meta = plain["metadata"]["_aicore"]["attribution"]
    assert meta["mode"] == "verify" and meta["unsupported"] == 1 and meta["inferred"] == 1 and meta["model"] == 0
    (reported,) = meta["unsupported_citations"]
    assert reported["marker"] == "[Source 1]" and reported["retrieval_number"] == 1
    assert reported["text"] == UNSUPPORTED[:-1] and reported["support_score"] < 0.485
    annotations = _message(plain)["annotations"]
    assert [a["text"] for a in annotations] == [first]  # the unsupported claim is not presented as evidence
    # Chat ([Source N] style): the wrong marker is gone, the copied sentence carries its inferred marker.
    assert content.startswith(UNSUPPORTED[:-1] + ".") and "[Source 1]." not in content
    (citation,) = message["citations"]
    assert content.endswith(f"{first}[Source {citation['source_index']}]")
    assert message["_aicore"]["attribution"]["unsupported_citations"] == meta["unsupported_citations"]


def test_fake_markerless_quotes_whole_sentences(alps, http, fake) -> None:
    _responses(http, stream=False)
    for sentence in _quoted(fake):
        assert len(sentence.split()) >= 8 and sentence_spans(sentence) == [(0, len(sentence))]


def test_bot_attribution_is_validated_and_round_trips(api) -> None:
    refused = api.post("/v1/bots", json={"id": "odd", "attribution": "sometimes"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "attribution" and error["type"] == "invalid_request_error"
    created = api.post("/v1/bots", json={"id": "v", "attribution": "verify"}).json()
    assert created["attribution"] == "verify"
    assert api.get("/v1/bots/calypso-rag-agent").json()["attribution"] is None  # follows CALYPSO_ATTRIBUTION
    assert api.patch("/v1/bots/v", json={"attribution": "off"}).json()["attribution"] == "off"
