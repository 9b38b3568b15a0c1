"""xAI's chat dialect (seed 003, the ``xai-sdk`` gRPC client): content, inline citations, every source URL.

Over one GroundedAnswer, as the xAI Python SDK reads it:

* ``content``: plain text by default; with ``inline`` (the SDK's
  ``include=["inline_citations"]``, opt-in there) ``[[n]](url)`` links stand
  where the model cited, built by the same ``InlineLinker`` as the Responses
  dialect's inline mode, so numbers, URLs and spans are the same.
* ``inline_citations``: one per link, ``start_index``/``end_index`` spanning it
  exactly (Python string indices), with the passage it stands for.
* ``citations``: every retrieved source URL, cited or not (``all_source_urls``).

Wire-neutral: it yields ``XaiDelta`` objects; ``calypso.grpc_api`` turns them
into the protobuf messages the SDK ships. The non-streamed reply replays the
finished answer through the same renderer (``render_reply``), so the SDK's
accumulated stream equals the one-shot reply by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calypso.citations.events import AnswerEvent, Done, MarkerEvent, Retrieved, TextEvent, answer_events
from calypso.citations.grounded import GroundedAnswer
from calypso.dialects.responses import InlineLinker, LinkSpan, RenderOptions, all_source_urls
from calypso.models import Passage


def chunk_id(passage: Passage) -> str:
    """A passage's id on the xAI wire: its document and chunk index (what ``collections.search`` shows too)."""
    return f"{passage.document.id}:{passage.chunk.chunk_index}"


@dataclass(frozen=True)
class XaiInlineCitation:
    """xAI's ``InlineCitation`` with a ``collections_citation``: one ``[[n]](url)`` link and its passage."""

    id: str  # the display number, as shown in the link
    start_index: int
    end_index: int
    file_id: str
    chunk_id: str
    chunk_content: str
    score: float
    collection_ids: tuple[str, ...]  # a collection is a namespace


@dataclass
class XaiDelta:
    """One piece of the reply. The last one (``answer`` set) carries ``citations`` and the finish reason."""

    content: str = ""
    inline_citations: list[XaiInlineCitation] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)
    answer: GroundedAnswer | None = None


def _inline_citation(link: LinkSpan) -> XaiInlineCitation:
    passage = link.source.passage
    return XaiInlineCitation(
        id=str(link.source.display_number),
        start_index=link.start,
        end_index=link.end,
        file_id=passage.document.file_id,
        chunk_id=chunk_id(passage),
        chunk_content=passage.chunk.text,
        score=round(passage.score, 6),
        collection_ids=(passage.document.namespace,),
    )


class XaiRenderer:
    """Answer events in (``Retrieved`` first, ``Done`` last), ``XaiDelta`` pieces out."""

    def __init__(self, options: RenderOptions) -> None:
        self.options = options
        self._linker: InlineLinker | None = None
        self._length = 0  # of the content written so far

    def feed(self, event: AnswerEvent) -> list[XaiDelta]:
        if isinstance(event, Retrieved):
            inline = self.options.inline and not self.options.hidden
            self._linker = InlineLinker(event.sources, self.options) if inline else None
            return []
        if isinstance(event, TextEvent):
            return [self._text(event.text)] if event.text else []
        if isinstance(event, MarkerEvent):
            return self._marker(event)
        if isinstance(event, Done):
            return [XaiDelta(citations=all_source_urls(event.answer, self.options), answer=event.answer)]
        return []  # client tool calls: this surface takes no client tools

    def _text(self, text: str) -> XaiDelta:
        self._length += len(text)
        return XaiDelta(content=text)

    def _marker(self, event: MarkerEvent) -> list[XaiDelta]:
        if self._linker is None or event.segment is None:
            return []  # plain text: markers leave no trace in the content
        piece, links = self._linker.links(event.placement, event.segment, self._length)
        if not piece:
            return []
        delta = self._text(piece)
        delta.inline_citations = [_inline_citation(link) for link in links]
        return [delta]


def render_reply(answer: GroundedAnswer, options: RenderOptions) -> XaiDelta:
    """The non-streamed reply: the finished answer replayed through ``XaiRenderer``, its pieces joined."""
    renderer = XaiRenderer(options)
    pieces = renderer.feed(Retrieved(answer.sources, None))
    for event in answer_events(answer):
        pieces += renderer.feed(event)
    pieces += renderer.feed(Done(answer))
    return XaiDelta(
        content="".join(p.content for p in pieces),
        inline_citations=[c for p in pieces for c in p.inline_citations],
        citations=pieces[-1].citations,
        answer=answer,
    )
