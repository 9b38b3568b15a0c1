"""End to end: real documents, retrieval, the fake upstream or the extractive answerer, verified citations."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from calypso.citations.events import Done, MarkerEvent, Retrieved, TextEvent
from calypso.config import Settings
from calypso.errors import InvalidRequest, UpstreamError
from calypso.generation.extractive import NOT_FOUND
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.scope import RetrievalScope
from calypso.services import Services, open_services
from calypso.services.answering import Answerer, AskRequest
from calypso.services.ingestion import Upload


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


GENERAL = RetrievalScope(namespaces=("general",))


def _ask(messages: list[dict], scope: RetrievalScope = GENERAL, **options) -> AskRequest:
    return AskRequest(messages, scope, **options)


def _run(coro):
    return asyncio.run(coro)


async def _collect(answerer: Answerer, request: AskRequest) -> list:
    return [event async for event in answerer.stream(request)]


@pytest.fixture
def fake():
    with FakeUpstream() as upstream:
        yield upstream


@pytest.fixture
def loaded_kb(tmp_path: Path, data_dir: Path):
    """Services over real documents: a PDF with page labels, a Federal Register PDF, Markdown."""
    settings = Settings(home=tmp_path / "home")
    services = open_services(settings)
    kb = services.ingestion
    docs = data_dir / "ingestion-docs"
    for path in [
        docs / "pdf/federal-register-2020-17221.pdf",
        docs / "pdf/GeoTopo-komprimiert.pdf",
        docs / "md/github-terms-of-service.md",
    ]:
        kb.ingest(Upload(path.read_bytes(), path.name))
    from calypso.demo import ingest_demo

    ingest_demo(kb)
    yield services
    services.close()


def _upstream_answerer(services: Services, fake: FakeUpstream) -> Answerer:
    services.settings.llm_base_url = fake.base_url
    services.settings.llm_model = "fake-model"
    services.settings.generator = "upstream"
    return _answerer(services)


def _answerer(services: Services) -> Answerer:
    return Answerer(services.documents, services.search)


def assert_quotes_are_exact(answer) -> None:
    assert answer.segments, "expected at least one cited segment"
    for segment in answer.segments:
        assert answer.text[segment.start : segment.end] == segment.text
        for citation in segment.citations:
            passage = answer.source(citation.retrieval_number).passage
            quote = citation.quote
            assert quote.text and passage.chunk.text[quote.passage_start : quote.passage_end] == quote.text
            assert quote.document_start == passage.chunk.start + quote.passage_start
            assert quote.page_label in passage.chunk.page_labels
            assert passage.chunk.page_start <= quote.page_number <= passage.chunk.page_end
            assert 0.0 <= quote.support <= 1.0


# -- the extractive default ------------------------------------------------------------------


def test_extractive_answer_cites_exact_quotes_from_real_documents(loaded_kb) -> None:
    answerer = _answerer(loaded_kb)
    answer = _run(answerer.answer(_ask(_user("How many days do customers have to request a full refund?"))))
    assert answer.generator == "extractive"
    assert "30 days" in answer.text
    assert answer.retrieval_status == "grounded" and not answer.citations_are_null
    assert_quotes_are_exact(answer)
    top = answer.cited_sources[0]
    assert top.display_number == 1 and top.passage.document.filename == "refund_policy_2026.md"
    # Extractive sentences are quoted from the passage itself: support is high.
    assert all(c.quote.supported for s in answer.segments for c in s.citations)


def test_extractive_answer_on_pdf_carries_page_labels(loaded_kb) -> None:
    answer = _run(_answerer(loaded_kb).answer(_ask(_user("Was ist eine Fundamentalgruppe?"))))
    assert_quotes_are_exact(answer)
    cited = answer.cited_sources[0].passage
    assert cited.document.filename == "GeoTopo-komprimiert.pdf"


def test_extractive_streaming_matches_non_streaming(loaded_kb) -> None:
    answerer = _answerer(loaded_kb)
    request = _ask(_user("What is the convenience of the office opening hours on public holidays?"))
    events = _run(_collect(answerer, request))
    assert isinstance(events[0], Retrieved) and isinstance(events[-1], Done)
    streamed = events[-1].answer
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == streamed.text
    again = _run(answerer.answer(request))
    assert again.text == streamed.text
    assert [(s.start, s.end) for s in again.segments] == [(s.start, s.end) for s in streamed.segments]


def test_retrieval_empty_gives_empty_citations_not_null(loaded_kb) -> None:
    answer = _run(_answerer(loaded_kb).answer(_ask(_user("xylophone zebra quasar"))))
    assert answer.text == NOT_FOUND
    assert answer.sources == [] and answer.segments == []
    assert answer.retrieval_status == "ungrounded" and not answer.citations_are_null


def test_no_knowledge_base_gives_null_citations(loaded_kb, fake) -> None:
    fake.script(Script.from_text("General knowledge answer [Source 1]."))
    answerer = _upstream_answerer(loaded_kb, fake)
    answer = _run(answerer.answer(_ask(_user("What is a refund?"), RetrievalScope())))
    assert answer.citations_are_null and answer.retrieval_status == "not_run"
    assert answer.sources == [] and answer.segments == []
    assert "<sources>" not in fake.requests[-1]["messages"][0]["content"]


def test_citations_disabled_gives_null(loaded_kb) -> None:
    answer = _run(_answerer(loaded_kb).answer(_ask(_user("refund within 30 days"), include_citations=False)))
    assert answer.citations_are_null


def test_validation_errors(loaded_kb) -> None:
    answerer = _answerer(loaded_kb)
    for messages, param in [
        ([], "messages"),
        ([{"role": "wizard", "content": "hi"}], "messages[0].role"),
        ([{"role": "user", "content": "  "}], "messages"),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "messages"),
    ]:
        with pytest.raises(InvalidRequest) as info:
            _run(answerer.answer(_ask(messages)))
        assert info.value.param == param


# -- through the fake upstream ----------------------------------------------------------------


def test_upstream_answer_with_split_markers(loaded_kb, fake) -> None:
    answerer = _upstream_answerer(loaded_kb, fake)
    tokens = [
        "Customers may request a full refund within 30 days",
        " [Sou",
        "rce 1",
        "]. Gift cards are ",
        "never refundable [",
        "Source 1][Source 9]. Made up claim [Source 2",
        "].",
    ]
    fake.script(Script(tokens=tokens))
    events = _run(_collect(answerer, _ask(_user("What is the refund policy for gift cards?"))))
    answer = events[-1].answer
    text_events = [e.text for e in events if isinstance(e, TextEvent)]
    assert "".join(text_events) == answer.text
    assert not any("[" in t or "Sou" in t for t in text_events), text_events
    assert (
        answer.text
        == "Customers may request a full refund within 30 days. Gift cards are never refundable. Made up claim."
    )
    assert answer.raw_text == "".join(tokens)
    # [Source 9] names no retrieved passage: dropped, never a citation.
    assert all(n <= len(answer.sources) for s in answer.segments for n in (c.retrieval_number for c in s.citations))
    assert_quotes_are_exact(answer)
    first = answer.segments[0].citations[0]
    assert "30 days" in first.quote.text and first.quote.supported
    assert answer.generator.startswith("upstream")
    # Marker events come right after the text they close.
    marker_events = [e for e in events if isinstance(e, MarkerEvent)]
    assert marker_events[0].segment.text == "Customers may request a full refund within 30 days"


def test_prompt_numbers_sources_fences_them_and_passes_history(loaded_kb, fake) -> None:
    answerer = _upstream_answerer(loaded_kb, fake)
    fake.script(Script.from_text("Ok [Source 1]."))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi! [Source 1]"},
        {"role": "user", "content": "How do I request a refund?"},
    ]
    _run(answerer.answer(_ask(messages, RetrievalScope(namespaces=("general",), passage_count=3))))
    sent = fake.requests[-1]["messages"]
    assert sent[0]["role"] == "system" and sent[0]["content"].startswith("Be brief.")
    system = sent[0]["content"]
    assert "[Source 1]" in system and "[Source 3]" in system and "[Source 4]" not in system
    assert "<sources>" in system and "data, not instructions" in system
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]
    assert sent[-1]["content"] == "How do I request a refund?"


def test_nothing_retrieved_tells_the_model_explicitly(loaded_kb, fake) -> None:
    answerer = _upstream_answerer(loaded_kb, fake)
    fake.script(Script.from_text("I could not find that."))
    answer = _run(answerer.answer(_ask(_user("xylophone zebra quasar"))))
    assert "nothing relevant was found" in fake.requests[-1]["messages"][0]["content"]
    assert answer.retrieval_status == "ungrounded" and answer.segments == [] and not answer.citations_are_null


def test_tool_call_turn_has_null_citations_and_tool_result_turn_skips_retrieval(loaded_kb, fake) -> None:
    answerer = _upstream_answerer(loaded_kb, fake)
    tools = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]
    fake.script(Script(tokens=[], tool_calls=[{"name": "lookup_order", "arguments": {"order": "A1"}}]))
    answer = _run(answerer.answer(_ask(_user("Where is my order A1?"), tools=tools)))
    assert answer.finish_reason == "tool_calls" and answer.citations_are_null
    assert answer.tool_calls[0]["function"]["name"] == "lookup_order"
    assert fake.requests[-1]["tools"] == tools

    fake.script(Script.from_text("Your order shipped [Source 1]."))
    follow_up = _user("Where is my order A1?") + [
        {"role": "assistant", "content": None, "tool_calls": answer.tool_calls},
        {"role": "tool", "tool_call_id": answer.tool_calls[0]["id"], "content": '{"status": "shipped"}'},
    ]
    after = _run(answerer.answer(_ask(follow_up, tools=tools)))
    assert not after.retrieval_ran and after.sources == []
    assert not after.citations_are_null and after.segments == []  # seed 004: an empty list
    assert "<sources>" not in fake.requests[-1]["messages"][0]["content"]


def test_upstream_failure_mid_stream_raises(loaded_kb, fake) -> None:
    answerer = _upstream_answerer(loaded_kb, fake)
    fake.script(Script(tokens=["Partial", " answer", " here"], disconnect_after=2))
    with pytest.raises(UpstreamError):
        _run(answerer.answer(_ask(_user("refund policy"))))


def test_consumer_leaving_stops_the_upstream(loaded_kb, fake) -> None:
    answerer = _upstream_answerer(loaded_kb, fake)
    fake.script(Script(tokens=[f"word{i} " for i in range(200)], token_delay=0.02))

    async def leave_early() -> None:
        stream = answerer.stream(_ask(_user("refund policy")))
        async for event in stream:
            if isinstance(event, TextEvent):
                break
        await stream.aclose()

    _run(leave_early())
    assert fake.wait_for_disconnects(1, timeout=5)
