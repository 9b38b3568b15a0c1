"""POST /v1/chat/completions through the official openai SDK, over real documents.

Bots are created through the bots service before start-up. ``fake-*`` bots answer through the fake upstream; the
others use the built-in extractive answerer.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from calypso.bots import Bot
from calypso.generation.fake_upstream import FakeUpstream, Script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests_support import MARKER, render, served_knowledge_base

from testkit.live_server import LiveServer

REAL_DOCS = [
    "pdf/GeoTopo-komprimiert.pdf",
    "pdf/federal-register-2020-17221.pdf",
    "md/github-terms-of-service.md",
    "html/wiki_duck.html",
]
REFUND_Q = "How many days do customers have to request a full refund?"


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def live(tmp_path_factory, fake: FakeUpstream) -> Iterator[LiveServer]:
    bots = [
        Bot(id="source-bot", namespace="general", marker_style="source"),
        # Markers as the model wrote them (attribution off): fill would re-cite a sentence its marker names wrongly.
        Bot(id="fake-numeric", namespace="general", generator="upstream", attribution="off"),
        Bot(id="fake-source", namespace="general", marker_style="source", generator="upstream", attribution="off"),
        Bot(id="fake-no-kb", namespace=None, generator="upstream"),
        Bot(id="no-citations", namespace="general", include_citations=False),
    ]
    home = tmp_path_factory.mktemp("chat") / "home"
    with served_knowledge_base(home, fake.base_url, REAL_DOCS, bots) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_fake(fake: FakeUpstream) -> None:
    fake.reset()


@pytest.fixture
def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="test-key", max_retries=0)


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as c:
        yield c


def _user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def reassemble(stream) -> dict:
    """A message dict rebuilt from chunks, plus what the chunks looked like."""
    content, kinds, out = (
        [],
        [],
        {
            "annotations": [],
            "citations": None,
            "has_citations_key": False,
            "tool_calls": {},
            "usage": None,
            "finish_reason": None,
        },
    )
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.usage is not None:
            out["usage"] = chunk.usage
            kinds.append("usage")
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta, extra = choice.delta, choice.delta.model_extra or {}
        if delta.role:
            kinds.append("role")
        if delta.content:
            content.append(delta.content)
            kinds.append("content")
        if "annotations" in extra:
            out["annotations"] = extra["annotations"]
            kinds.append("annotations")
        for call in delta.tool_calls or []:
            entry = out["tool_calls"].setdefault(call.index, {"id": call.id, "name": "", "arguments": ""})
            entry["name"] += call.function.name or ""
            entry["arguments"] += call.function.arguments or ""
        if choice.finish_reason:
            kinds.append("finish")
            out["finish_reason"] = choice.finish_reason
            out["has_citations_key"] = "citations" in extra
            out["citations"] = extra.get("citations")
        else:
            assert "citations" not in extra  # seed 004: only on the finish chunk
    out.update(content="".join(content), deltas=content, kinds=kinds)
    return out


def as_message(completion) -> dict:
    message = completion.choices[0].message
    return {
        "content": message.content,
        "citations": message.model_extra["citations"],
        "annotations": [a.model_dump() | (a.model_extra or {}) for a in message.annotations or []],
    }


def expected_render(message: dict) -> str:
    """What render() must print, worked out independently: footnotes in order of first valid marker."""
    by_index = {c["source_index"]: c for c in message["citations"]}
    order: list[int] = []
    for n in (int(m) for m in MARKER.findall(message["content"])):
        if n in by_index and n not in order:
            order.append(n)
    body = MARKER.sub(
        lambda m: f"[{order.index(int(m.group(1))) + 1}]" if int(m.group(1)) in by_index else "", message["content"]
    ).strip()
    notes = [f'[{i}] {by_index[n]["source_filename"]}: "{by_index[n]["text_preview"]}"' for i, n in enumerate(order, 1)]
    return body + ("\n\n" + "\n".join(notes) if notes else "")


def check_previews(http: httpx.Client, citations: list[dict]) -> None:
    """Each citation's preview is the first 200 characters of the chunk it names."""
    for c in citations:
        chunks = http.get(f"/v1/documents/{c['document_id']}/chunks", params={"limit": 100}).json()["data"]
        chunk = next(ch for ch in chunks if ch["chunk_index"] == c["chunk_index"])
        assert c["text_preview"] == chunk["text"][:200]
        assert c["source_filename"] and isinstance(c["score"], float)


def check_numeric(message: dict) -> None:
    """The Sources appendix, the [n] markers, citations and annotations all agree."""
    body, _, appendix = message["content"].partition("\n\nSources:\n")
    citations = message["citations"]
    assert [c["source_index"] for c in citations] == list(range(1, len(citations) + 1))
    assert appendix.split("\n") == [f"[{c['source_index']}] {c['label']}" for c in citations]
    assert {int(n) for n in re.findall(r"\[(\d+)\]", body)} == {c["source_index"] for c in citations}
    first_seen = list(dict.fromkeys(int(n) for n in re.findall(r"\[(\d+)\]", body)))
    assert first_seen == sorted(first_seen)  # display numbers: 1..m in order of first citation
    assert message["annotations"]
    by_index = {c["source_index"]: c for c in citations}
    for annotation in message["annotations"]:
        span, number = annotation["url_citation"], annotation["_aicore"]["source_index"]
        assert 0 <= span["start_index"] < span["end_index"] <= len(body)
        following = re.match(r"\s*((?:\[\d+\])+)", message["content"][span["end_index"] :]).group(1)
        assert f"[{number}]" in following
        # The same passage in the viewer; each annotation marks its own quote (the citation, its first one).
        passage_link = re.sub(r"&quote_start=\d+&quote_end=\d+|&page=\d+", "", span["url"])
        assert passage_link == re.sub(r"&quote_start=\d+&quote_end=\d+|&page=\d+", "", by_index[number]["url"])


# -- numeric (default) style, extractive answers ----------------------------------------------


def test_numeric_answer_over_demo_docs(client, http) -> None:
    completion = client.chat.completions.create(model="calypso-rag-agent", messages=_user(REFUND_Q))
    assert completion.object == "chat.completion" and completion.model == "calypso-rag-agent"
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    message = as_message(completion)
    assert message["content"].startswith("Customers may request a full refund within 30 days of purchase. [1]")
    assert message["content"].endswith("\n\nSources:\n[1] refund_policy_2026.md (Refund Policy 2026 › Eligibility)")
    assert message["annotations"][0]["type"] == "url_citation"
    assert message["annotations"][0]["url_citation"]["start_index"] == 0
    assert message["annotations"][0]["url_citation"]["title"] == "Refund Policy 2026"
    check_numeric(message)
    check_previews(http, message["citations"])
    assert set(message["citations"][0]) >= {
        "source_index",
        "document_id",
        "source_filename",
        "chunk_index",
        "text_preview",
        "score",
    }
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens


@pytest.mark.parametrize(
    "question", ["What is the minimum age to use GitHub?", "How do ducks fly?", "Was ist eine Fundamentalgruppe?"]
)
def test_numeric_stream_matches_non_streaming_on_real_documents(client, http, question: str) -> None:
    completion = client.chat.completions.create(model="calypso-rag-agent", messages=_user(question))
    message = as_message(completion)
    streamed = reassemble(
        client.chat.completions.create(
            model="calypso-rag-agent", messages=_user(question), stream=True, stream_options={"include_usage": True}
        )
    )
    assert streamed["content"] == message["content"]
    assert streamed["citations"] == message["citations"] and streamed["annotations"] == message["annotations"]
    assert streamed["kinds"][0] == "role" and streamed["kinds"][-3:] == ["annotations", "finish", "usage"]
    assert streamed["usage"].total_tokens == completion.usage.total_tokens
    if "GitHub" in question or "ducks" in question:
        check_numeric(message)
    check_previews(http, message["citations"])
    if "Fundamentalgruppe" in question:
        # A PDF: the links open the viewer at the cited page.
        assert all(re.search(r"&page=\d+$", a["url_citation"]["url"]) for a in message["annotations"])
        assert message["citations"][0]["source_filename"] == "GeoTopo-komprimiert.pdf"


# -- [Source N] style: seed 004's render() ----------------------------------------------------


def test_source_style_render_on_extractive_answer(client, http) -> None:
    completion = client.chat.completions.create(model="source-bot", messages=_user(REFUND_Q))
    message = as_message(completion)
    assert "[Source 1]" in message["content"] and "Sources:" not in message["content"]
    rendered = render(message)
    assert rendered == expected_render(message)
    assert rendered.startswith("Customers may request a full refund within 30 days of purchase. [1]")
    check_previews(http, message["citations"])
    streamed = reassemble(client.chat.completions.create(model="source-bot", messages=_user(REFUND_Q), stream=True))
    assert render(streamed) == rendered


SOURCE_TOKENS = [
    "Gift cards are never refundable",
    " [Sou",
    "rce 2",
    "]",
    " and refunds take 30 days [",
    "Source 1][Source 9]. Downloads are special [Source 2",
    "].",
]


def test_source_style_through_fake_upstream_with_split_markers(client, http, fake) -> None:
    question = "Can I get a refund for a gift card?"
    fake.script(Script(tokens=SOURCE_TOKENS), Script(tokens=SOURCE_TOKENS))
    message = as_message(client.chat.completions.create(model="fake-source", messages=_user(question)))
    # Valid markers as written, the invalid [Source 9] left in place (seed 004).
    assert message["content"] == "".join(SOURCE_TOKENS)
    assert sorted(c["source_index"] for c in message["citations"]) == [1, 2]
    rendered = render(message)
    assert rendered == expected_render(message)
    assert "[Source" not in rendered and rendered.splitlines()[0].endswith("Downloads are special [1].")
    check_previews(http, message["citations"])

    streamed = reassemble(client.chat.completions.create(model="fake-source", messages=_user(question), stream=True))
    assert streamed["content"] == message["content"] and render(streamed) == rendered
    partial = re.compile(r"\[(S(o(u(r(c(e( \d*)?)?)?)?)?)?)?$")
    assert not any(partial.search(d) for d in streamed["deltas"]), streamed["deltas"]
    assert streamed["annotations"] == message["annotations"]
    assert streamed["kinds"][-2:] == ["annotations", "finish"]


def test_numeric_through_fake_upstream(client, fake) -> None:
    fake.script(Script(tokens=SOURCE_TOKENS), Script(tokens=SOURCE_TOKENS))
    question = "Can I get a refund for a gift card?"
    message = as_message(client.chat.completions.create(model="fake-numeric", messages=_user(question)))
    assert message["content"].startswith(
        "Gift cards are never refundable [1] and refunds take 30 days [2]. Downloads are special [1].\n\nSources:\n"
    )
    check_numeric(message)
    streamed = reassemble(client.chat.completions.create(model="fake-numeric", messages=_user(question), stream=True))
    assert streamed["content"] == message["content"] and streamed["deltas"].count(" [1]") == 2
    assert streamed["citations"] == message["citations"]


# -- null and empty citations (seed 004) ------------------------------------------------------


def test_no_knowledge_base_gives_null_and_stream_omits_the_key(client, fake) -> None:
    fake.script(Script.from_text("A refund returns money [Source 1]."), Script.from_text("A refund returns money."))
    completion = client.chat.completions.create(model="fake-no-kb", messages=_user("What is a refund?"))
    message = completion.choices[0].message
    assert "citations" in message.model_extra and message.model_extra["citations"] is None
    assert message.content == "A refund returns money." and message.annotations == []
    streamed = reassemble(
        client.chat.completions.create(model="fake-no-kb", messages=_user("What is a refund?"), stream=True)
    )
    assert streamed["finish_reason"] == "stop" and not streamed["has_citations_key"]


def test_citations_disabled_gives_null(client) -> None:
    message = client.chat.completions.create(model="no-citations", messages=_user(REFUND_Q)).choices[0].message
    assert message.model_extra["citations"] is None and message.annotations == []
    assert "[1]" not in message.content and "Sources:" not in message.content


def test_nothing_retrieved_gives_empty_list(client) -> None:
    message = (
        client.chat.completions.create(model="calypso-rag-agent", messages=_user("xylophone zebra quasar"))
        .choices[0]
        .message
    )
    assert message.model_extra["citations"] == [] and message.annotations == []
    streamed = reassemble(
        client.chat.completions.create(model="calypso-rag-agent", messages=_user("xylophone zebra quasar"), stream=True)
    )
    assert streamed["has_citations_key"] and streamed["citations"] == []


def test_no_valid_marker_gives_empty_list(client, fake) -> None:
    fake.script(Script.from_text("Refunds take a month [Source 42]."))
    message = client.chat.completions.create(model="fake-source", messages=_user(REFUND_Q)).choices[0].message
    assert message.model_extra["citations"] == [] and message.content == "Refunds take a month [Source 42]."


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Order status",
            "parameters": {"type": "object", "properties": {"order": {"type": "string"}}},
        },
    }
]


def test_tool_call_turn_then_follow_up_after_tool_result(client, fake) -> None:
    fake.script(Script(tokens=[], tool_calls=[{"name": "lookup_order", "arguments": {"order": "A1"}}]))
    first = client.chat.completions.create(
        model="fake-numeric",
        messages=_user("Where is my order A1?"),
        tools=TOOLS,
        tool_choice="auto",
        temperature=0.2,
        max_completion_tokens=50,
    )
    sent = fake.requests[-1]
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto" and sent["temperature"] == 0.2
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 50
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.model_extra["citations"] is None
    call = choice.message.tool_calls[0]
    assert call.function.name == "lookup_order" and call.function.arguments == '{"order": "A1"}'

    # The follow-up sends the assistant message back as returned (extra fields and all).
    fake.script(Script.from_text("Your order A1 has shipped [Source 1]."))
    history = _user("Where is my order A1?") + [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"status": "shipped"}'},
    ]
    after = client.chat.completions.create(model="fake-numeric", messages=history, tools=TOOLS)
    message = after.choices[0].message
    assert message.model_extra["citations"] == []  # seed 004: no retrieval after a tool result
    assert message.content == "Your order A1 has shipped."
    assert [m["role"] for m in fake.requests[-1]["messages"]] == ["system", "user", "assistant", "tool"]
    assert "citations" not in fake.requests[-1]["messages"][2]

    fake.script(Script(tokens=[], tool_calls=[{"name": "lookup_order", "arguments": {"order": "A2"}}]))
    streamed = reassemble(
        client.chat.completions.create(model="fake-numeric", messages=_user("Where is A2?"), tools=TOOLS, stream=True)
    )
    assert streamed["finish_reason"] == "tool_calls" and not streamed["has_citations_key"]
    assert streamed["tool_calls"][0]["name"] == "lookup_order"
    assert streamed["tool_calls"][0]["arguments"] == '{"order": "A2"}'


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"n": 2}, "n"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"top_p": 1.5}, "top_p"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"temperature": 3}, "temperature"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"}]}, "messages"),
        ({"stream": True, "messages": [{"role": "user", "content": " "}]}, "messages"),
    ],
)
def test_bad_requests_are_400_in_openai_shape(http, body: dict, param: str) -> None:
    response = http.post("/v1/chat/completions", json={"model": "calypso-rag-agent", "messages": _user("hi"), **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_sdk_sees_errors_as_exceptions(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="calypso-rag-agent", messages=_user("hi"), n=2)
    assert info.value.param == "n"
    for stream in (False, True):
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model="no-such-bot", messages=_user("hi"), stream=stream)
        assert missing.value.code == "model_not_found"


def test_upstream_failure_before_first_token_is_an_http_error(client, fake) -> None:
    fake.script(Script(status=500, fail_times=10))
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="fake-numeric", messages=_user(REFUND_Q), stream=True)
    assert info.value.status_code in (502, 504)


def test_error_mid_stream_is_an_error_event(client, fake, live) -> None:
    fake.script(Script(tokens=["Customers may ", "request a ", "full refund ", "within 30 days."], disconnect_after=2))
    chunks = []
    with pytest.raises(openai.APIError) as info:
        for chunk in client.chat.completions.create(model="fake-numeric", messages=_user(REFUND_Q), stream=True):
            chunks.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Customers may request a"
    assert info.value.body["type"] == "upstream_error"
    # Raw: the error object, then the stream ends without [DONE].
    fake.script(Script(tokens=["Customers may ", "request a ", "full refund."], disconnect_after=1))
    with httpx.Client(base_url=live.url, timeout=30) as raw:
        text = raw.post(
            "/v1/chat/completions", json={"model": "fake-numeric", "messages": _user(REFUND_Q), "stream": True}
        ).text
    events = [line for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1].startswith('data: {"error":') and "[DONE]" not in text


def test_metadata_and_max_tokens_accepted(client, fake) -> None:
    fake.script(Script.from_text("Refunds within 30 days [Source 1]."))
    completion = client.chat.completions.create(
        model="fake-numeric", messages=_user(REFUND_Q), max_tokens=20, metadata={"ticket": "T-1"}, user="u-1"
    )
    assert completion.choices[0].message.model_extra["citations"]
    assert fake.requests[-1].get("max_tokens", fake.requests[-1].get("max_completion_tokens")) == 20


def test_client_leaving_mid_stream_stops_the_upstream(live, fake) -> None:
    fake.script(Script(tokens=[f"word{i} " for i in range(300)], token_delay=0.02))
    with (
        httpx.Client(base_url=live.url, timeout=30) as raw,
        raw.stream(
            "POST", "/v1/chat/completions", json={"model": "fake-numeric", "messages": _user(REFUND_Q), "stream": True}
        ) as response,
    ):
        for line in response.iter_lines():
            if '"content":"word' in line:
                break
    assert fake.wait_for_disconnects(1, timeout=5)


def test_a_request_without_model_uses_the_default_bot_on_both_endpoints(http) -> None:
    # docs/bots.md: a request without `model` uses calypso-rag-agent, on Chat Completions as on Responses.
    chat = http.post("/v1/chat/completions", json={"messages": _user(REFUND_Q)})
    assert chat.status_code == 200, chat.text
    assert chat.json()["model"] == "calypso-rag-agent" and "30 days" in chat.json()["choices"][0]["message"]["content"]
    responses = http.post("/v1/responses", json={"input": REFUND_Q})
    assert responses.status_code == 200 and responses.json()["model"] == "calypso-rag-agent"
