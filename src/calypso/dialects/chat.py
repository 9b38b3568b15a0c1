"""The Chat Completions dialects over a ``GroundedAnswer``: content, annotations, the ``citations`` list.

Two marker styles (a bot setting):

* ``numeric`` (seed 000, the default): each valid marker becomes ``[n]`` with
  display numbers, invalid markers are removed, and a plain-text
  ``"\\n\\nSources:\\n[1] label"`` appendix lists the cited sources.
* ``source`` (seed 004): valid markers are normalised to ``[Source N]`` with
  retrieval numbers; invalid ones stay exactly as the model wrote them; no appendix.

Under a ``hidden`` sources policy every marker is removed and no source
(quote, filename, URL) appears in content, annotations or citations.

In both, the number shown in the text equals ``source_index`` in ``citations``.
``ContentBuilder`` (dialects/content.py) is the one place that turns answer
events into content, used by the streaming path event by event and by
``render_chat`` replaying a finished answer, so both produce the same string
and the same offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from calypso.citations.events import MarkerEvent, SentenceEvent, TextEvent
from calypso.citations.grounded import GroundedAnswer, Source, grounding_status, quote_locator, utf16_len
from calypso.citations.links import LinkSigner, quote_url
from calypso.dialects.content import ContentBuilder, finished_content, place_claims, sentence_status
from calypso.dialects.styles import HIDDEN, NUMERIC, PLAIN, SOURCE, RenderStyle, style_for

if TYPE_CHECKING:
    from calypso.citations.events import Retrieved

# Importable from here, as the routes always have.
__all__ = [
    "ChatStreamRenderer",
    "RenderedChat",
    "chat_annotations",
    "citations",
    "finish_render",
    "is_citing",
    "render_chat",
    "source_index",
    "style_for",
]

PREVIEW_CHARS = 200  # seed 004: text_preview is the first 200 characters of the passage


def is_citing(answer: GroundedAnswer) -> bool:
    """Markers become numbers only where citations can exist (known before generation starts)."""
    return answer.knowledge_base and answer.citations_enabled


def source_index(source: Source, style: RenderStyle) -> int:
    """The number a client sees in the text for this source."""
    return source.retrieval_number if style == SOURCE else source.display_number


def chat_annotations(
    answer: GroundedAnswer, builder: ContentBuilder, content: str, links: LinkSigner | None = None
) -> list[dict[str, Any]]:
    """One nested ``url_citation`` per (segment, cited source), spanning the segment in ``content``."""
    if answer.citations_are_null or builder.style in (HIDDEN, PLAIN):
        return []  # a JSON reply (plain) is the client's data: its sources are in ``citations``
    out = []
    for segment in answer.segments:
        start, end = builder.offsets.start(segment.start), builder.offsets.end(segment.end)
        for citation in segment.citations:
            source = answer.source(citation.retrieval_number)
            passage = source.passage
            out.append(
                {
                    "type": "url_citation",
                    "url_citation": {
                        "url": quote_url(passage, links, citation.quote),
                        "title": passage.document.title or passage.document.filename,
                        "start_index": start,
                        "end_index": end,
                    },
                    # Extension: which citation this is, and offsets for JavaScript (UTF-16) clients.
                    "_aicore": {
                        "source_index": source_index(source, builder.style),
                        "start_index_utf16": utf16_len(content[:start]),
                        "end_index_utf16": utf16_len(content[:end]),
                        "attribution": citation.attribution,
                    },
                }
            )
    return out


def citations(
    answer: GroundedAnswer, style: RenderStyle, links: LinkSigner | None = None
) -> list[dict[str, Any]] | None:
    """Seed 004's ``citations``: null (no knowledge base, disabled, tool call) or one object per cited source.

    Ordered by first citation in the answer; the seed's six fields come first,
    then extensions (label, url, and the first quote with its page and support). ``label`` is the
    "Sources:" line's: the file and where its quotes stand (the heading or page above each, not the passage's).
    """
    if answer.citations_are_null:
        return None
    if style == HIDDEN:
        return []  # sources exist but policy hides them: nothing to show
    out = []
    for source in answer.cited_sources:
        passage = source.passage
        cited = [c for s in answer.segments for c in s.citations if c.retrieval_number == source.retrieval_number]
        quote = cited[0].quote
        page_number, page_label, _ = quote_locator(quote, passage)
        out.append(
            {
                "source_index": source_index(source, style),
                "document_id": passage.document.id,
                "source_filename": passage.document.filename,
                "chunk_index": passage.chunk.chunk_index,
                "text_preview": passage.chunk.text[:PREVIEW_CHARS],
                "score": round(passage.score, 4),
                "label": answer.source_label(source),  # the appendix line's: where its quotes stand
                "url": quote_url(passage, links, quote),
                "page_number": page_number,
                "page_label": page_label,
                "quote": quote.text,
                "support": quote.support,
                # "model" when the model cited this source anywhere; "inferred" when only Calypso did.
                "_aicore": {"attribution": "model" if any(c.attribution == "model" for c in cited) else "inferred"},
            }
        )
    return out


@dataclass
class RenderedChat:
    content: str
    annotations: list[dict[str, Any]]
    citations: list[dict[str, Any]] | None
    grounding: dict[str, Any] = field(default_factory=dict)  # the _aicore status block (grounded_sources_state…)


def finish_render(
    answer: GroundedAnswer, builder: ContentBuilder, content: str, links: LinkSigner | None = None
) -> RenderedChat:
    """Annotations and citations for ``content`` built by ``builder`` (streamed or replayed)."""
    return RenderedChat(
        content,
        chat_annotations(answer, builder, content, links),
        citations(answer, builder.style, links),
        place_claims(grounding_status(answer, hidden=builder.style == HIDDEN), builder.offsets, content),
    )


def render_chat(answer: GroundedAnswer, style: RenderStyle = NUMERIC, links: LinkSigner | None = None) -> RenderedChat:
    """The whole Chat Completions rendering of a finished answer."""
    builder = ContentBuilder(answer.sources, style, is_citing(answer))
    return finish_render(answer, builder, finished_content(answer, builder), links)


class ChatStreamRenderer:
    """Streaming counterpart of ``render_chat``: answer events in, content deltas out.

    ``delta(event)`` returns the content to send now (possibly ""), never half
    a marker; ``finish(answer)`` returns the trailing appendix delta and the
    final annotations and citations for the whole streamed content.
    """

    def __init__(
        self, sources: list[Source], style: RenderStyle = NUMERIC, citing: bool = True, links: LinkSigner | None = None
    ) -> None:
        self.builder = ContentBuilder(sources, style, citing)
        self.links = links
        self._parts: list[str] = []

    @classmethod
    def start(
        cls, retrieved: Retrieved, style: RenderStyle = NUMERIC, links: LinkSigner | None = None
    ) -> ChatStreamRenderer:
        """The renderer for an answer stream, from its first event (which says whether markers cite)."""
        return cls(retrieved.sources, style, retrieved.citing, links)

    def delta(self, event: TextEvent | MarkerEvent) -> str:
        out = self.builder.feed(event)
        self._parts.append(out)
        return out

    def sentence(self, event: SentenceEvent) -> dict[str, Any]:
        """A sentence's status, on the content streamed so far."""
        return sentence_status(event, self.builder.offsets, "".join(self._parts))

    def finish(self, answer: GroundedAnswer) -> tuple[str, RenderedChat]:
        tail = self.builder.appendix(answer)
        self._parts.append(tail)
        return tail, finish_render(answer, self.builder, "".join(self._parts), self.links)
