"""POST /v1/responses through the official openai SDK, on loopback, over real documents."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncGenerator
from pathlib import Path

import httpx
import openai
import pytest

from calypso.demo import ingest_demo
from calypso.generation import registry
from calypso.generation.base import GenerationEvent, GenerationRequest, Generator, TextDelta
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.services.ingestion import Upload

QUESTION = "How many days do customers have to request a full refund?"


@pytest.fixture
def demo_kb(kb, data_dir: Path):
    ingest_demo(kb)
    pdf = data_dir / "ingestion-docs/pdf/GeoTopo-komprimiert.pdf"
    kb.ingest(Upload(pdf.read_bytes(), pdf.name))
    return kb


@pytest.fixture
def fake(demo_kb):
    with FakeUpstream() as upstream:
        demo_kb.settings.llm_base_url = upstream.base_url
        demo_kb.settings.llm_model = "fake-model"
        demo_kb.settings.generator = "upstream"
        yield upstream


def _message(response):
    return next(item for item in response.output if item.type == "message")


def _search(response):
    return next(item for item in response.output if item.type == "file_search_call")


def test_seed_000_shape_field_by_field(demo_kb, openai_client) -> None:
    response = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION)
    assert response.object == "response" and response.status == "completed" and response.model == "calypso-rag-agent"
    assert response.id.startswith("resp_") and response.created_at > 0
    assert [item.type for item in response.output] == ["file_search_call", "message"]

    search = _search(response)
    assert search.status == "completed" and search.queries == [QUESTION]
    assert search.id.startswith("fs_")
    indexes = []
    for result in search.results:
        assert result.file_id.startswith("file-") and result.filename and result.text
        assert isinstance(result.score, float)
        attributes = result.attributes
        for key in (
            "source_index",
            "label",
            "locator_label",
            "modality",
            "knowledge_id",
            "document_id",
            "chunk_index",
            "cited",
        ):
            assert key in attributes, key
        # Pages only where the document has them (GUIDE "Where a passage is"): never an invented "p. 1".
        has_pages = result.filename.endswith(".pdf")
        assert ("page_number" in attributes and "page_label" in attributes) == has_pages
        if attributes["locator_label"]:
            assert attributes["label"] == f"{result.filename} ({attributes['locator_label']})"
        else:
            assert attributes["label"] == result.filename
        assert attributes["modality"] == "text" and attributes["knowledge_id"] == "general"
        indexes.append(attributes["source_index"])
    assert indexes == list(range(1, len(indexes) + 1))

    message = _message(response)
    assert message.role == "assistant" and message.status == "completed"
    (content,) = message.content
    assert content.type == "output_text" and "30 days" in content.text
    assert "[" not in content.text  # plain by default
    assert content.annotations
    by_index = {r.attributes["source_index"]: r for r in search.results}
    for annotation in content.annotations:
        assert annotation.type == "file_citation"
        extra = annotation.model_extra
        assert content.text[extra["start_index"] : extra["end_index"]] == extra["text"]
        assert annotation.index == extra["end_index"]
        nested = extra["file_citation"]
        assert nested["file_id"] == annotation.file_id and nested["filename"] == annotation.filename
        aicore = extra["_aicore"]
        source = by_index[aicore["source_index"]]
        assert source.attributes["cited"] is True and source.file_id == annotation.file_id
        assert nested["quote"] in source.text  # the quote is an exact substring of the passage
        assert source.text[aicore["quote_start"] : aicore["quote_end"]] == nested["quote"]
        assert aicore["segment_text"] == extra["text"] and 0 <= aicore["support_score"] <= 1
    usage = response.usage
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens

    meta = response.metadata["_aicore"]
    assert meta["retrieval_status"] == "grounded" and meta["grounded_sources_state"] == "available"
    assert meta["grounded_sources_hint"]
    assert [s["source_index"] for s in meta["grounded_sources"]] == indexes
    assert meta["grounding_supports"] and "Sources:" in meta["display_text"] and meta["ui"]
    citations = response.model_extra["citations"]
    assert citations and all(url.startswith("http://127.0.0.1") for url in citations)


def test_badges_applied_in_descending_order_land_on_their_segments(demo_kb, openai_client) -> None:
    response = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION)
    content = _message(response).content[0]
    text = content.text
    annotations = sorted(content.annotations, key=lambda a: a.model_extra["start_index"], reverse=True)
    for annotation in annotations:
        end = annotation.model_extra["end_index"]
        text = text[:end] + f"[{annotation.model_extra['_aicore']['source_index']}]" + text[end:]
    for annotation in content.annotations:
        segment = annotation.model_extra["text"]
        assert f"{segment}[{annotation.model_extra['_aicore']['source_index']}]" in text


def test_inline_citations_links_span_exactly(demo_kb, openai_client) -> None:
    response = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, include=["inline_citations"])
    content = _message(response).content[0]
    results = {r.attributes["source_index"]: r for r in _search(response).results}
    assert "[[1]](" in content.text
    for annotation in content.annotations:
        assert annotation.type == "url_citation"
        link = content.text[annotation.start_index : annotation.end_index]
        assert link == f"[[{annotation.title}]]({annotation.url})"
        assert f"/v1/files/{results[int(annotation.title)].file_id}/view?expires=" in annotation.url
        aicore = annotation.model_extra["_aicore"]
        assert content.text[aicore["segment_start"] : aicore["segment_end"]] == aicore["segment_text"]
    # The link opens the passage viewer, the quote marked.
    opened = httpx.get(content.annotations[0].url)
    assert opened.status_code == 200 and '<mark id="quote">' in opened.text

    plain = openai_client.responses.create(
        model="calypso-rag-agent", input=QUESTION, include=["inline_citations", "no_inline_citations"]
    )
    assert "[[" not in _message(plain).content[0].text  # no_inline_citations wins


def test_pdf_sources_link_to_the_page(demo_kb, openai_client) -> None:
    response = openai_client.responses.create(
        model="calypso-rag-agent",
        input="Was ist die Fundamentalgruppe?",
        include=["inline_citations"],
        tools=[{"type": "file_search", "vector_store_ids": ["general"], "max_num_results": 3}],
    )
    annotation = _message(response).content[0].annotations[0]
    page = annotation.model_extra["_aicore"]["page_number"]
    assert annotation.url.endswith(f"&page={page}")
    assert all(re.search(r"&page=\d+$", url) for url in response.model_extra["citations"])
    assert len(_search(response).results) == 3


def test_native_mode_and_sources_appendix(demo_kb, openai_client) -> None:
    native = openai_client.responses.create(
        model="calypso-rag-agent", input=QUESTION, metadata={"citation_compat": "native", "sources_appendix": "omit"}
    )
    meta = native.metadata["_aicore"]
    # The status block, with the attribution counts (docs/citations.md "Inferred citations") and each
    # sentence's support (docs/citations.md "What each sentence rests on").
    assert set(meta) == {
        "retrieval_status",
        "grounded_sources_state",
        "grounded_sources_hint",
        "generator",
        "attribution",
        "claims",
    }
    assert native.metadata["citation_compat"] == "native"
    nested = openai_client.responses.create(
        model="calypso-rag-agent", input=QUESTION, metadata={"_aicore": {"sources_appendix": "omit"}}
    )
    assert "Sources:" not in nested.metadata["_aicore"]["display_text"]
    assert "grounding_supports" in nested.metadata["_aicore"]
    # Native drops duplicates and nothing else: same output either way.
    legacy = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION)
    assert _message(legacy).content[0].text == _message(native).content[0].text
    assert len(_message(legacy).content[0].annotations) == len(_message(native).content[0].annotations)


def test_streaming_events_and_final_response(demo_kb, openai_client) -> None:
    events = list(openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, stream=True))
    types = [e.type for e in events]
    assert types[:9] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert types[-5:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.done",
        "response.completed",
    ]
    # The file_search_call is done once display numbers exist: its streamed results equal the completed ones.
    search_done = events[-2]
    assert search_done.output_index == 0 and search_done.item.type == "file_search_call"
    streamed_results = [r.model_dump() for r in search_done.item.results]
    assert streamed_results == [r.model_dump() for r in _search(events[-1].response).results]
    assert all("source_index" in r["attributes"] and "cited" in r["attributes"] for r in streamed_results)
    assert any(r["attributes"]["cited"] for r in streamed_results)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert text == final.output_text
    added = [e for e in events if e.type == "response.output_text.annotation.added"]
    assert [e.annotation_index for e in added] == list(range(len(added)))
    final_annotations = _message(final).content[0].annotations
    assert [
        a["start_index"] if isinstance(a, dict) else a.model_extra["start_index"] for a in [e.annotation for e in added]
    ] == [a.model_extra["start_index"] for a in final_annotations]
    # Each annotation arrives right after the delta that completes its segment.
    for event in added:
        position = types.index("response.output_text.annotation.added", events.index(event))
        so_far = "".join(e.delta for e in events[:position] if e.type == "response.output_text.delta")
        end = (
            event.annotation["end_index"]
            if isinstance(event.annotation, dict)
            else event.annotation.model_extra["end_index"]
        )
        assert len(so_far) >= end
        assert event.item_id == _message(final).id and event.output_index == 1 and event.content_index == 0


def test_stream_equals_non_stream_apart_from_ids(demo_kb, openai_client) -> None:
    streamed = list(openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, stream=True))[-1].response
    plain = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION)

    def strip(response) -> dict:
        data = json.loads(response.model_dump_json())
        for key in ("id", "created_at"):
            data.pop(key)
        for item in data["output"]:
            item.pop("id")
        return data

    assert strip(streamed) == strip(plain)


def test_inline_streaming_deltas_concatenate_to_final_text(demo_kb, openai_client) -> None:
    events = list(
        openai_client.responses.create(
            model="calypso-rag-agent", input=QUESTION, stream=True, include=["inline_citations"]
        )
    )
    final = events[-1].response
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == final.output_text and "[[1]](" in text
    for event in (e for e in events if e.type == "response.output_text.annotation.added"):
        annotation = event.annotation if isinstance(event.annotation, dict) else event.annotation.model_dump()
        assert text[annotation["start_index"] : annotation["end_index"]].startswith("[[")


def test_stored_response_and_previous_response_id(demo_kb, openai_client, fake) -> None:
    fake.script(Script.from_text("Customers may request a full refund within 30 days [Source 1]."))
    first = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION)
    fetched = openai_client.responses.retrieve(first.id)
    assert fetched.id == first.id and fetched.output_text == first.output_text

    fake.script(Script.from_text("Store credit applies after that [Source 1]."))
    second = openai_client.responses.create(
        model="calypso-rag-agent", input="And after 30 days?", previous_response_id=first.id
    )
    sent = fake.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == "Customers may request a full refund within 30 days [Source 1]."
    assert second.previous_response_id == first.id

    unstored = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, store=False)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(unstored.id)


def test_upstream_markers_split_across_tokens(demo_kb, openai_client, fake) -> None:
    fake.script(
        Script(tokens=["Customers may request a full refund", " within 30 days [Sou", "rce 1][Sour", "ce 42]."])
    )
    events = list(openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Customers may request a full refund within 30 days."
    assert not any("[" in d or "Sou" in d for d in deltas)
    final = events[-1].response
    annotations = _message(final).content[0].annotations
    assert len(annotations) == 1  # [Source 42] names no retrieved passage
    assert final.metadata["_aicore"]["generator"].startswith("upstream")


def test_upstream_failure_mid_stream_ends_with_error_and_failed(demo_kb, openai_client, fake) -> None:
    fake.script(Script(tokens=["Partial", " answer", " then", " gone"], disconnect_after=2))
    events = list(openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, stream=True))
    assert [e.type for e in events[-2:]] == ["error", "response.failed"]
    assert events[-1].response.status == "failed"
    with pytest.raises(openai.APIStatusError):
        fake.script(Script(status=500, fail_times=5))
        openai_client.responses.create(model="calypso-rag-agent", input=QUESTION)


class _BreaksAfterOneToken(Generator):
    """A backend with a bug: one token, then an exception that is not a CalypsoError."""

    name = "breaks-after-one-token"

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        yield TextDelta("Customers may request")
        raise RuntimeError("secret internal detail")


@pytest.fixture
def breaking_generator(demo_kb, monkeypatch):
    registry.register(_BreaksAfterOneToken.name, _BreaksAfterOneToken)
    monkeypatch.setattr(demo_kb.settings, "generator", _BreaksAfterOneToken.name)
    yield
    registry.unregister(_BreaksAfterOneToken.name)


def _assert_fails_cleanly(events: list, request_id: str | None) -> str:
    """The stream started normally, then ended with error + response.failed hiding the exception; returns the id."""
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in types and "response.completed" not in types
    assert types[-2:] == ["error", "response.failed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    error, failed = events[-2], events[-1]
    match = re.fullmatch(r"Internal server error; see the server log \(request id (\S+)\)\.", error.message)
    assert match, error.message
    assert error.code == "server_error" and error.param is None
    assert failed.response.status == "failed" and failed.response.id == events[0].response.id
    assert failed.response.error.message == error.message and failed.response.error.code == "server_error"
    assert not any("secret internal detail" in e.model_dump_json() for e in events)
    if request_id is not None:
        assert match.group(1) == request_id
    return match.group(1)


def test_unexpected_error_mid_stream_ends_with_error_and_failed(
    demo_kb, breaking_generator, openai_client, caplog
) -> None:
    with caplog.at_level(logging.ERROR, logger="calypso.api"):
        events = list(openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, stream=True))
    request_id = _assert_fails_cleanly(events, None)
    (record,) = [r for r in caplog.records if request_id in r.getMessage()]
    assert record.exc_info and isinstance(record.exc_info[1], RuntimeError)  # the traceback is in the log


def test_stream_error_names_the_callers_request_id(demo_kb, breaking_generator, openai_client) -> None:
    events = list(
        openai_client.responses.create(
            model="calypso-rag-agent", input=QUESTION, stream=True, extra_headers={"x-request-id": "req-from-client"}
        )
    )
    _assert_fails_cleanly(events, "req-from-client")


def test_ungrounded_and_no_retrieval_states(demo_kb, openai_client) -> None:
    nothing = openai_client.responses.create(model="calypso-rag-agent", input="xylophone zebra quasar")
    meta = nothing.metadata["_aicore"]
    assert meta["grounded_sources_state"] == "missing" and meta["retrieval_status"] == "ungrounded"
    assert _message(nothing).content[0].annotations == []
    assert nothing.model_extra["citations"] == []


@pytest.mark.parametrize(
    ("payload", "status", "code", "param"),
    [
        ({"input": QUESTION, "bogus": 1}, 400, "unknown_parameter", "bogus"),
        ({"input": ""}, 400, None, "input"),
        ({"input": []}, 400, None, "input"),
        ({"input": [{"role": "wizard", "content": "x"}]}, 400, "invalid_value", "input[0].role"),
        ({"input": QUESTION, "include": ["everything"]}, 400, None, "include"),
        ({"input": QUESTION, "metadata": {"citation_compat": "weird"}}, 400, None, "metadata.citation_compat"),
        ({"input": QUESTION, "tools": [{"type": "web_search"}]}, 400, "invalid_value", "tools[0].type"),
        (
            {"input": QUESTION, "tools": [{"type": "file_search", "vector_store_ids": ["bad name"]}]},
            400,
            "invalid_namespace",
            "tools[0].vector_store_ids",
        ),
        (
            {
                "input": QUESTION,
                "tools": [
                    {
                        "type": "file_search",
                        "vector_store_ids": ["general"],
                        "filters": {"type": "gt", "key": "x", "value": [1]},
                    }
                ],
            },
            400,
            "invalid_type",
            "tools[0].filters.value",
        ),
        ({"input": QUESTION, "temperature": 7}, 400, "decimal_above_max_value", "temperature"),
        ({"input": QUESTION, "model": "no-such-bot"}, 404, "model_not_found", "model"),
        # OpenAI: a 400, not a 404, for an unknown response to continue from (issue 25).
        (
            {"input": QUESTION, "previous_response_id": "resp_missing"},
            400,
            "previous_response_not_found",
            "previous_response_id",
        ),
        # OpenAI requires vector_store_ids on a file_search tool (issue 25).
        (
            {"input": QUESTION, "tools": [{"type": "file_search"}]},
            400,
            "missing_required_parameter",
            "tools[0].vector_store_ids",
        ),
        ({"input": QUESTION, "background": True}, 400, "unsupported_parameter", "background"),
    ],
)
def test_bad_requests(demo_kb, api, payload: dict, status: int, code: str | None, param: str) -> None:
    body = {"model": "calypso-rag-agent", **payload}
    response = api.post("/v1/responses", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, param)
    assert error["message"]


# Unfiltered, this is answered from refund_policy_2026.md; the handbook answers only its first half.
MIXED_QUESTION = "Who must accompany visitors, and within how many days can customers request a refund?"


@pytest.mark.parametrize("kind", ["document_id", "file_id", "or"])
def test_document_filter_restricts_citations(demo_kb, openai_client, http, kind: str) -> None:
    documents = http.get("/v1/documents", params={"limit": 100}).json()["data"]
    handbook = next(d for d in documents if d["filename"] == "office_handbook.md")
    filters = {
        "document_id": {"type": "eq", "key": "document_id", "value": handbook["id"]},
        "file_id": {"type": "eq", "key": "file_id", "value": handbook["file_id"]},
        # An unknown file id matches nothing; it neither fails nor widens the filter.
        "or": {
            "type": "or",
            "filters": [
                {"type": "in", "key": "file_id", "value": ["file-unknown", handbook["file_id"]]},
                {"type": "eq", "key": "document_id", "value": handbook["id"]},
            ],
        },
    }[kind]
    response = openai_client.responses.create(
        model="calypso-rag-agent",
        input=MIXED_QUESTION,
        tools=[{"type": "file_search", "vector_store_ids": ["general"], "filters": filters}],
    )
    results = _search(response).results
    annotations = _message(response).content[0].annotations
    assert results and annotations  # the filter narrowed the search, it did not empty it
    assert {(r.file_id, r.attributes["document_id"]) for r in results} == {(handbook["file_id"], handbook["id"])}
    for annotation in annotations:
        assert annotation.type == "file_citation"
        assert annotation.file_id == handbook["file_id"] and annotation.filename == "office_handbook.md"
        assert annotation.model_extra["_aicore"]["document_id"] == handbook["id"]


def test_sdk_stream_helper_accumulates_the_same_response(demo_kb, openai_client) -> None:
    with openai_client.responses.stream(model="calypso-rag-agent", input=QUESTION) as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text and "30 days" in final.output_text
    assert _message(final).content[0].annotations


def test_client_disconnect_stops_the_upstream(demo_kb, server, fake) -> None:
    fake.script(Script(tokens=[f"word{i} " for i in range(300)], token_delay=0.02))
    body = {"model": "calypso-rag-agent", "input": QUESTION, "stream": True}
    with (
        httpx.Client(base_url=server.url, timeout=30) as client,
        client.stream("POST", "/v1/responses", json=body) as response,
    ):
        for line in response.iter_lines():
            if '"response.output_text.delta"' in line:
                break
    assert fake.wait_for_disconnects(1, timeout=10)


def test_an_answer_citing_none_of_the_passages_found_says_so(demo_kb, openai_client, fake) -> None:
    """Passages were found but the model answered from elsewhere: the hint names that, instead of saying nothing
    usable was found beside the sources it lists; a search that finds nothing keeps that hint."""
    fake.script(Script.from_text("Gift cards may be exchanged for cash at any branch office."))
    response = openai_client.responses.create(model="calypso-rag-agent", input="Can I get cash for a gift card?")
    meta = response.metadata["_aicore"]
    assert meta["grounded_sources_state"] == "missing" and meta["retrieval_status"] == "ungrounded"
    assert meta["grounded_sources"] and not any(s["cited"] for s in meta["grounded_sources"])
    assert meta["grounded_sources_hint"].startswith("Passages were found, but the answer cites none of them")
    assert meta["claims"]["unsupported"] >= 1
    fake.script(Script.from_text("I could not find that."))
    nothing = openai_client.responses.create(model="calypso-rag-agent", input="zxqv wplk trnn")
    hint = nothing.metadata["_aicore"]["grounded_sources_hint"]
    assert not nothing.metadata["_aicore"]["grounded_sources"] and "nothing usable was found" in hint
