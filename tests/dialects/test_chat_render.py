"""The Chat Completions renderers over composed answers: content, offsets, citations, streaming = replay."""

from __future__ import annotations

import re

import pytest

from calypso.citations.composer import AnswerComposer
from calypso.citations.events import MarkerEvent, TextEvent
from calypso.citations.grounded import GroundedAnswer, Quote, Source, utf16_len
from calypso.citations.links import LinkSigner
from calypso.dialects.chat import ChatStreamRenderer, is_citing, render_chat
from calypso.models import Chunk, Document, Passage

SIGNER = LinkSigner(b"test-secret", "https://kb.example", 3600)

PASSAGES = [
    (
        "refund_policy_2026.pdf",
        "Refund Policy 2026",
        "Customers may request a full refund within 30 days of purchase. " * 5,
    ),
    ("gift_cards.md", None, "Gift cards are never refundable."),
    ("shipping.md", None, "Orders ship within two business days."),
]


def _sources() -> list[Source]:
    sources = []
    for number, (filename, title, text) in enumerate(PASSAGES, start=1):
        media = "application/pdf" if filename.endswith(".pdf") else "text/markdown"
        pages = 4 if media == "application/pdf" else 1  # Markdown has no pages a reader could find
        doc = Document(
            f"doc-{number}", f"file-{number}", "default", "general", filename, media, 10, "x", 0, pages, 3, title=title
        )
        chunk = Chunk(number - 1, text, 0, len(text), 4, 4, ("4",))
        sources.append(Source(number, Passage(doc, chunk, score=1.0 / number)))
    return sources


def _quote(segment_text: str, source: Source) -> Quote:
    text = source.passage.chunk.text.split(". ")[0]
    return Quote(text, 0, len(text), 0, len(text), 4, "4", 0.9, True)


def compose(tokens: list[str], **fields) -> tuple[list, GroundedAnswer]:
    """Events and the answer, as the Answerer would produce them for this token stream."""
    composer = AnswerComposer(_sources(), _quote)
    events = []
    for token in tokens:
        events += composer.feed(token)
    events += composer.flush()
    defaults = dict(generator="test", knowledge_base=True, citations_enabled=True, retrieval_ran=True)
    return events, composer.finish(**{**defaults, **fields})


def stream(events: list, answer: GroundedAnswer, style: str) -> tuple[list[str], object]:
    renderer = ChatStreamRenderer(answer.sources, style, is_citing(answer), SIGNER)
    deltas = [renderer.delta(e) for e in events if isinstance(e, (TextEvent, MarkerEvent))]
    tail, rendered = renderer.finish(answer)
    return [d for d in deltas + [tail] if d], rendered


RAW = (
    "Refunds are possible within 30 days [Source 1]. Gift cards are never refundable [Source 9][Source 2]. "
    "Orders ship fast.[Source 3][Source 2]"
)
SPLITS = [[RAW], list(RAW), [RAW[i : i + 3] for i in range(0, len(RAW), 3)]]


@pytest.mark.parametrize("tokens", SPLITS)
def test_numeric_content_offsets_and_appendix(tokens: list[str]) -> None:
    events, answer = compose(tokens)
    rendered = render_chat(answer, "numeric", SIGNER)
    assert rendered.content == (
        "Refunds are possible within 30 days [1]. Gift cards are never refundable [2]. Orders ship fast.[3][2]"
        "\n\nSources:\n[1] refund_policy_2026.pdf (p. 4)\n[2] gift_cards.md\n[3] shipping.md"
    )
    spans = [(a["url_citation"]["start_index"], a["url_citation"]["end_index"]) for a in rendered.annotations]
    assert [rendered.content[s:e] for s, e in spans] == [
        "Refunds are possible within 30 days",
        "Gift cards are never refundable",
        "Orders ship fast.",
        "Orders ship fast.",
    ]
    for annotation in rendered.annotations:
        # Right after each span come the markers, and one of them is this annotation's number.
        end = annotation["url_citation"]["end_index"]
        following = re.match(r"\s*((?:\[\d+\])+)", rendered.content[end:]).group(1)
        assert f"[{annotation['_aicore']['source_index']}]" in following
    first = rendered.annotations[0]["url_citation"]
    # The passage viewer, at the quote (its offsets in the passage) on its page.
    assert first["url"].startswith("https://kb.example/v1/files/file-1/view?expires=")
    assert re.search(r"&chunk=\d+&quote_start=\d+&quote_end=\d+&page=4$", first["url"])
    assert first["title"] == "Refund Policy 2026"
    assert rendered.annotations[1]["url_citation"]["title"] == "gift_cards.md"  # no title: the filename
    assert [c["source_index"] for c in rendered.citations] == [1, 2, 3]
    assert [c["document_id"] for c in rendered.citations] == ["doc-1", "doc-2", "doc-3"]
    assert (
        rendered.citations[0]["text_preview"] == PASSAGES[0][2][:200]
        and len(rendered.citations[0]["text_preview"]) == 200
    )

    deltas, streamed = stream(events, answer, "numeric")
    assert "".join(deltas) == rendered.content
    assert streamed.annotations == rendered.annotations and streamed.citations == rendered.citations
    assert not any(re.search(r"\[(S|So|Sou|Sour|Sourc|Source)?\s*\d*$", d) for d in deltas), deltas


@pytest.mark.parametrize("tokens", SPLITS)
def test_source_style_normalises_valid_markers_and_keeps_invalid_ones(tokens: list[str]) -> None:
    events, answer = compose(tokens)
    rendered = render_chat(answer, "source", SIGNER)
    assert rendered.content == (
        "Refunds are possible within 30 days [Source 1]. Gift cards are never refundable [Source 9][Source 2]. "
        "Orders ship fast.[Source 3][Source 2]"
    )
    assert [c["source_index"] for c in rendered.citations] == [1, 2, 3]  # retrieval numbers, in citation order
    for annotation in rendered.annotations:
        end = annotation["url_citation"]["end_index"]
        assert rendered.content[end:].lstrip().startswith("[Source ")
    deltas, streamed = stream(events, answer, "source")
    assert "".join(deltas) == rendered.content and streamed.citations == rendered.citations


def test_source_style_citation_numbers_are_retrieval_numbers() -> None:
    _, answer = compose(["Ships fast [3]. Gift cards [Sources 2, 7]. Odd one [Source 8]."])
    rendered = render_chat(answer, "source")
    assert rendered.content == "Ships fast [Source 3]. Gift cards [Source 2][Source 7]. Odd one [Source 8]."
    assert [c["source_index"] for c in rendered.citations] == [3, 2]
    numeric = render_chat(answer, "numeric")
    assert numeric.content.startswith("Ships fast [1]. Gift cards [2]. Odd one.")
    assert [c["source_index"] for c in numeric.citations] == [1, 2]


def test_removed_marker_gives_its_space_to_the_next() -> None:
    _, answer = compose(["Gift cards are never refundable [Source 7][Source 2]."])
    assert render_chat(answer, "numeric").content.startswith("Gift cards are never refundable [1].")


def test_emoji_offsets_in_utf16() -> None:
    _, answer = compose(["Refunds 💸 take 30 days [Source 1]. Gift cards 🎁 never [Source 2]."])
    rendered = render_chat(answer, "numeric")
    for annotation in rendered.annotations:
        span, extra = annotation["url_citation"], annotation["_aicore"]
        assert extra["start_index_utf16"] == utf16_len(rendered.content[: span["start_index"]])
        assert extra["end_index_utf16"] - extra["start_index_utf16"] == utf16_len(
            rendered.content[span["start_index"] : span["end_index"]]
        )
    assert (
        rendered.annotations[1]["_aicore"]["start_index_utf16"]
        == rendered.annotations[1]["url_citation"]["start_index"] + 1
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"knowledge_base": False}, None),
        ({"citations_enabled": False}, None),
        ({"finish_reason": "tool_calls", "tool_calls": [{"id": "c1"}]}, None),
    ],
)
def test_null_citations(fields: dict, expected) -> None:
    events, answer = compose(["Refunds within 30 days [Source 1]."], **fields)
    for style in ("numeric", "source"):
        rendered = render_chat(answer, style)
        assert rendered.citations is expected and rendered.annotations == []
        assert "Sources:" not in rendered.content
        deltas, streamed = stream(events, answer, style)
        assert "".join(deltas) == rendered.content and streamed.citations is None
    if not is_citing(answer):
        assert render_chat(answer, "numeric").content == "Refunds within 30 days."  # no numbers without citations


def test_empty_citations_without_valid_markers_or_sources() -> None:
    _, answer = compose(["Nothing relevant [Source 12]."])
    assert (
        render_chat(answer, "numeric").citations == [] and render_chat(answer, "numeric").content == "Nothing relevant."
    )
    assert render_chat(answer, "source").content == "Nothing relevant [Source 12]."
    composer = AnswerComposer([], _quote)
    composer.feed("Your order shipped [Source 1].")
    composer.flush()
    after_tool = composer.finish(generator="t", knowledge_base=True, citations_enabled=True, retrieval_ran=False)
    assert render_chat(after_tool, "numeric").citations == []  # seed 004: the turn after a tool result
