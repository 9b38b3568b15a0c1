"""A citation's label names where its quote stands, not where its passage starts or ends (issue 42).

Through a real server and the official clients (openai, mcp), over the demo knowledge base as `calypso serve
--demo` chunks it, a DOCX whose passage starts under "Annual leave" and quotes "Sick leave", and a PDF whose one
passage covers pages 1–2 and quotes page 2. Every dialect: Chat Completions (numeric, with its "Sources:"
appendix, and the ``[Source N]`` style a bot selects), Responses (annotations, ``grounded_sources``, the ``ui``
sources, ``display_text``), seed 004's conversations and OpenAI's conversation items read back, and MCP ``ask``.
A passage's own locator (search results, ``/v1/documents/{id}/chunks``) is where it starts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from quote_label_docs import handbook_docx, observatory_pdf

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.demo import ingest_demo
from calypso.services import open_services
from calypso.services.ingestion import Upload
from testkit.live_server import LiveServer, free_port

SOURCE_BOT = "source-markers"  # a bot with marker_style "source": how a client asks for [Source N]


@dataclass(frozen=True)
class Case:
    question: str
    filename: str
    quoted: str  # a piece of the sentence the answer quotes
    locator: str  # where that sentence stands
    passage_locator: str  # where the passage it is quoted from starts (what the labels used to say, or near it)

    @property
    def label(self) -> str:
        return f"{self.filename} ({self.locator})"


GIFT_CARD = Case(
    "Can I return a gift card?",
    "refund_policy_2026.md",
    "Gift cards are never refundable.",
    "Refund Policy 2026 › Eligibility",
    "Refund Policy 2026 › Eligibility",
)
CASES = [
    GIFT_CARD,
    # The passage starts with the end of "Eligibility" and quotes "How to request a refund".
    Case(
        "How do I request a refund?",
        "refund_policy_2026.md",
        "Open the order in your account",
        "Refund Policy 2026 › How to request a refund",
        "Refund Policy 2026 › Eligibility",
    ),
    Case(
        "Who must employees phone when they are ill?",
        "staff_handbook.docx",
        "must phone their line manager",
        "Staff handbook › Sick leave",
        "Staff handbook › Annual leave",
    ),
    Case("How wide is the telescope mirror?", "observatory.pdf", "mirror measuring 2.4 metres", "p. 2", "pp. 1–2"),
]
IDS = ["gift-card", "request-refund", "docx-second-heading", "pdf-second-page"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The demo knowledge base with the server's own chunking (as `make serve` has it), plus the two documents."""
    settings = Settings(home=tmp_path_factory.mktemp("quote-labels") / "home", generator="extractive")
    services = open_services(settings)
    ingest_demo(services.ingestion)
    services.ingestion.ingest(Upload(handbook_docx(), "staff_handbook.docx"))
    services.ingestion.ingest(Upload(observatory_pdf(), "observatory.pdf"))
    try:
        with LiveServer(create_app(settings, services), free_port()) as server:
            # How a client asks for [Source N] markers: a bot with that marker style, named as the model.
            made = httpx.post(f"{server.url}/v1/bots", json={"id": SOURCE_BOT, "marker_style": "source"})
            assert made.status_code in (200, 201), made.text
            yield server
    finally:
        services.close()


@pytest.fixture
def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="test-key", max_retries=0)


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=60) as c:
        yield c


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _citation(citations: list[dict[str, Any]], case: Case) -> dict[str, Any]:
    """The citation of ``case``'s quote: its file, and a quote holding the quoted words."""
    found = [c for c in citations if c["source_filename"] == case.filename and case.quoted in c["quote"]]
    assert found, [(c["source_filename"], c["quote"]) for c in citations]
    return found[0]


def _check_label(label: str, case: Case) -> None:
    assert label == case.label
    if case.passage_locator != case.locator:
        assert case.passage_locator not in label


def _appendix(content: str) -> dict[int, str]:
    """The "Sources:" lines of a numeric reply: number -> label."""
    _, found, tail = content.partition("\n\nSources:\n")
    assert found, content
    lines = [line.partition("] ") for line in tail.split("\n")]
    return {int(number.lstrip("[")): label for number, _, label in lines}


# -- a passage's own locator ------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES[1:], ids=IDS[1:])
def test_a_passage_is_located_where_it_starts(http: httpx.Client, case: Case) -> None:
    """The passage the quote comes from starts under another heading (or page): its own locator says that one."""
    documents = http.get("/v1/documents", params={"limit": 100}).json()["data"]
    (document,) = [d for d in documents if d["filename"] == case.filename]
    chunks = http.get(f"/v1/documents/{document['id']}/chunks", params={"limit": 100}).json()["data"]
    (passage,) = [c for c in chunks if case.quoted in c["text"]]
    assert passage["locator_label"] == case.passage_locator != case.locator


# -- Chat Completions -------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_chat_citation_and_appendix_name_the_quotes_place(client: openai.OpenAI, case: Case) -> None:
    completion = client.chat.completions.create(model="calypso-rag-agent", messages=_user(case.question))
    message = completion.choices[0].message.model_dump()
    citation = _citation(message["citations"], case)
    _check_label(citation["label"], case)
    assert _appendix(message["content"])[citation["source_index"]] == citation["label"]
    if case.filename.endswith(".pdf"):
        assert (citation["page_number"], citation["page_label"]) == (2, "2")
    else:
        assert citation["page_number"] is None and citation["page_label"] is None

    chunks = list(client.chat.completions.create(model="calypso-rag-agent", messages=_user(case.question), stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    streamed = [c.choices[0].delta.model_extra.get("citations") for c in chunks if c.choices]
    assert content == message["content"]
    assert [c for c in streamed if c] == [message["citations"]]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_source_marker_style_names_the_quotes_place(client: openai.OpenAI, case: Case) -> None:
    completion = client.chat.completions.create(model=SOURCE_BOT, messages=_user(case.question))
    message = completion.choices[0].message.model_dump()
    citation = _citation(message["citations"], case)
    assert f"[Source {citation['source_index']}]" in message["content"] and "Sources:" not in message["content"]
    _check_label(citation["label"], case)


# -- Responses --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("inline", [False, True], ids=["file_citation", "inline"])
def test_responses_annotations_and_sources_name_the_quotes_place(
    client: openai.OpenAI, case: Case, inline: bool
) -> None:
    include = ["inline_citations"] if inline else []
    response = client.responses.create(model="calypso-rag-agent", input=case.question, include=include)
    message = next(item for item in response.output if item.type == "message")
    annotations = [a.model_dump() for a in message.content[0].annotations]
    ours = [a for a in annotations if a["filename"] == case.filename and case.quoted in _quote_of(a, response)]
    assert ours, annotations
    number = ours[0]["_aicore"]["source_index"]
    for annotation in ours:
        assert annotation["_aicore"]["locator_label"] == case.locator

    meta = response.metadata["_aicore"]
    (source,) = [s for s in meta["grounded_sources"] if s["source_index"] == number]
    _check_label(source["label"], case)
    assert source["locator_label"] == case.locator
    if case.filename.endswith(".pdf"):
        assert (source["page_number"], source["page_label"]) == (2, "2")
    (sources,) = [part["items"] for part in meta["ui"] if part["type"] == "sources"]
    assert [s["label"] for s in sources if s["source_index"] == number] == [case.label]
    assert _appendix(meta["display_text"])[number] == case.label

    # The search results are passages, not quotes: each says where it starts.
    search = next(item for item in response.output if item.type == "file_search_call")
    (result,) = [r for r in search.results if r.attributes["source_index"] == number]
    assert result.attributes["label"] == f"{case.filename} ({result.attributes['locator_label']})"


def _quote_of(annotation: dict[str, Any], response: Any) -> str:
    """The quote an annotation marks: ``quote`` on a file citation, else its span of the search result's passage."""
    if annotation.get("quote"):
        return str(annotation["quote"])
    fields = annotation["_aicore"]
    search = next(item for item in response.output if item.type == "file_search_call")
    (result,) = [r for r in search.results if r.attributes["source_index"] == fields["source_index"]]
    return str(result.text[fields["quote_start"] : fields["quote_end"]])


# -- conversations ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", [GIFT_CARD, CASES[2]], ids=["gift-card", "docx-second-heading"])
def test_conversation_messages_keep_the_quotes_label(http: httpx.Client, case: Case) -> None:
    made = http.post("/v1/conversations", json={"bot": "calypso-rag-agent"})
    assert made.status_code == 201, made.text
    cid = made.json()["id"]
    reply = http.post(f"/v1/conversations/{cid}/messages", json={"content": case.question})
    assert reply.status_code == 200, reply.text
    message = reply.json()["message"]
    citation = _citation(message["citations"], case)
    _check_label(citation["label"], case)
    assert _appendix(message["content"])[citation["source_index"]] == citation["label"]
    stored = http.get(f"/v1/conversations/{cid}").json()["messages"][1]
    assert stored["citations"] == message["citations"] and stored["content"] == message["content"]


def test_conversation_items_read_back_keep_the_quotes_locator(client: openai.OpenAI) -> None:
    case = CASES[2]
    conversation = client.conversations.create()
    client.responses.create(model="calypso-rag-agent", conversation=conversation.id, input=case.question)
    items = client.conversations.items.list(conversation.id, order="asc").data
    (answer,) = [item for item in items if item.type == "message" and item.role == "assistant"]
    dumped = json.dumps(answer.model_dump(), ensure_ascii=False)
    assert case.locator in dumped and case.passage_locator not in dumped


# -- MCP --------------------------------------------------------------------------------------


def _ask(url: str, question: str) -> Any:
    async def run() -> Any:
        async with (
            create_mcp_http_client() as session_http,
            Client(streamable_http_client(f"{url}/mcp", http_client=session_http)) as mcp,
        ):
            return await mcp.call_tool("ask", {"question": question})

    return asyncio.run(run())


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_mcp_ask_names_the_quotes_place(live: LiveServer, case: Case) -> None:
    result = _ask(live.url, case.question)
    assert not result.is_error, result.content
    citations = result.structured_content["citations"]
    ours = [c for c in citations if c["filename"] == case.filename and case.quoted in c["quote"]]
    assert ours, citations
    assert {c["locator_label"] for c in ours} == {case.locator}
    # The text's "Sources:" line of this quote (its link marks the quote): the file and the quote's place.
    (line,) = [line for line in result.content[0].text.split("\n") if line.endswith(" " + ours[0]["link"])]
    assert f"] {case.label} (passage {ours[0]['passage_id']})" in line
