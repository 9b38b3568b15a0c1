"""The Responses renderer: streamed events, the replayed reply, and the pieces they share."""

from __future__ import annotations

import pytest

from calypso.citations.composer import AnswerComposer
from calypso.citations.events import Done, MarkerEvent, Retrieved, answer_events
from calypso.citations.grounded import GroundedAnswer, Quote, Source
from calypso.citations.links import LinkSigner
from calypso.citations.offsets import OffsetMap
from calypso.dialects.chat import ChatStreamRenderer
from calypso.dialects.content import numbered_text, sources_appendix
from calypso.dialects.responses import RenderOptions
from calypso.dialects.responses_stream import ResponsesStreamRenderer, render_response
from calypso.dialects.responses_wire import ResponseEcho, ResponseWire
from calypso.models import Chunk, Document, Passage

SIGNER = LinkSigner(b"test-secret", "https://kb.example", 3600)
TEXTS = [
    ("refund_policy_2026.pdf", "Customers may request a full refund within 30 days of purchase."),
    ("gift_cards.md", "Gift cards are never refundable."),
    ("shipping.md", "Orders ship within two business days."),
]
RAW = (
    "Refunds 💸 are possible within 30 days [Source 1]. Gift cards are never refundable [Source 9][Source 2]. "
    "Orders ship fast.[Source 3][Source 2] Again [Source 1][Source 1]."
)
SPLITS = [[RAW], list(RAW), [RAW[i : i + 4] for i in range(0, len(RAW), 4)]]
OPTIONS = {
    "plain": RenderOptions(links=SIGNER),
    "inline": RenderOptions(links=SIGNER, inline=True),
    "native": RenderOptions(links=SIGNER, legacy=False),
    "hidden": RenderOptions(links=SIGNER, hidden=True),
}


def _sources() -> list[Source]:
    sources = []
    for number, (filename, text) in enumerate(TEXTS, start=1):
        doc = Document(
            f"doc-{number}", f"file-{number}", "default", "general", filename, "text/plain", 10, "x", 0, 1, 1
        )
        sources.append(Source(number, Passage(doc, Chunk(0, text, 0, len(text), 1, 1, ("1",)), score=1.0 / number)))
    return sources


def _quote(segment_text: str, source: Source) -> Quote:
    text = source.passage.chunk.text
    return Quote(text, 0, len(text), 0, len(text), 1, "1", 0.9, True)


def compose(tokens: list[str]) -> tuple[list, GroundedAnswer]:
    composer = AnswerComposer(_sources(), _quote)
    events = [Retrieved(composer.sources, "refunds?")]
    for token in tokens:
        events += composer.feed(token)
    events += composer.flush()
    answer = composer.finish(generator="test", prompt_tokens=5, completion_tokens=9)
    return [*events, Done(answer)], answer


@pytest.mark.parametrize("mode", OPTIONS)
@pytest.mark.parametrize("tokens", SPLITS)
def test_streamed_completion_equals_the_replayed_reply(tokens: list[str], mode: str) -> None:
    events, answer = compose(tokens)
    wire = ResponseWire("bot", ResponseEcho())
    renderer = ResponsesStreamRenderer(wire, OPTIONS[mode])
    out = renderer.opening() + [e for event in events for e in renderer.feed(event)]
    final = out[-1]["response"]
    assert out[-1]["type"] == "response.completed" and final == renderer.response
    assert final == render_response(answer, "refunds?", wire, OPTIONS[mode])

    content = final["output"][-1]["content"][0]
    assert "".join(e["delta"] for e in out if e["type"] == "response.output_text.delta") == content["text"]
    added = [e for e in out if e["type"] == "response.output_text.annotation.added"]
    assert [e["annotation"] for e in added] == content["annotations"]
    assert [e["annotation_index"] for e in added] == list(range(len(added)))
    if mode == "hidden":
        assert content["annotations"] == [] and content["text"] == answer.text
    if mode == "inline":
        assert "[[1]](https://kb.example/" in content["text"]
        for annotation in content["annotations"]:
            link = content["text"][annotation["start_index"] : annotation["end_index"]]
            assert link == f"[[{annotation['title']}]]({annotation['url']})"
            aicore = annotation["_aicore"]
            assert content["text"][aicore["segment_start"] : aicore["segment_end"]] == aicore["segment_text"]


def test_failed_events_follow_openai_shapes() -> None:
    renderer = ResponsesStreamRenderer(ResponseWire("bot", ResponseEcho()), RenderOptions())
    error, failed = renderer.failed("server_error", "Internal server error.")
    assert error == {"type": "error", "code": "server_error", "message": "Internal server error.", "param": None}
    assert failed["type"] == "response.failed" and failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": "server_error", "message": "Internal server error."}


@pytest.mark.parametrize("tokens", SPLITS)
def test_replayed_events_match_the_composed_ones(tokens: list[str]) -> None:
    events, answer = compose(tokens)
    live = [(e.placement, e.segment, e.newly_cited, e.added) for e in events if isinstance(e, MarkerEvent)]
    replayed = [
        (e.placement, e.segment, e.newly_cited, e.added) for e in answer_events(answer) if isinstance(e, MarkerEvent)
    ]
    assert replayed == live and len(live) == 7
    assert "".join(e.text for e in answer_events(answer) if not isinstance(e, MarkerEvent)) == answer.text


def test_display_text_is_the_numeric_chat_content() -> None:
    _, answer = compose([RAW])
    assert numbered_text(answer) == (
        "Refunds 💸 are possible within 30 days [1]. Gift cards are never refundable [2]. "
        "Orders ship fast.[3][2] Again [1][1]."
    )
    assert (
        sources_appendix(answer)
        == (
            "\n\nSources:\n[1] refund_policy_2026.pdf\n[2] gift_cards.md\n[3] shipping.md"  # text/plain: no page, no heading
        )
    )


def test_offset_map_moves_starts_past_insertions_at_their_position_but_not_ends() -> None:
    offsets = OffsetMap()
    offsets.insert(10, 4)
    offsets.insert(10, 0)  # nothing inserted: ignored
    assert (offsets.start(10), offsets.end(10)) == (14, 10)
    assert (offsets.start(9), offsets.end(11)) == (9, 15)


@pytest.mark.parametrize("citing", [True, False])
def test_chat_renderer_takes_citing_from_the_retrieved_event(citing: bool) -> None:
    events, answer = compose([RAW])
    renderer = ChatStreamRenderer.start(Retrieved(answer.sources, "q", citing=citing), "numeric")
    content = "".join(renderer.delta(e) for e in events[1:-1])
    assert ("[1]" in content) is citing
