"""The Responses dialect: ``file_search_call`` results, annotated ``output_text``, ``metadata._aicore``.

Two text modes over one GroundedAnswer:

* plain (seed 000, default): the text has no markers; each (segment, cited
  source) pair is a ``file_citation`` annotation spanning the segment.
* inline (seed 003, ``include=["inline_citations"]``): ``[[n]](url)`` links
  stand where the model cited, each spanned exactly by a ``url_citation``.

This module holds the pieces (annotations, links, file search results,
``metadata._aicore``); ``responses_stream.ResponsesStreamRenderer`` puts them
together marker by marker, and the non-streamed reply replays the finished
answer through it, so ``response.completed`` equals the non-streamed reply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from calypso.citations.grounded import (
    GroundedAnswer,
    MarkerPlacement,
    Quote,
    Segment,
    SegmentCitation,
    Source,
    grounding_status,
    quote_locator,
    utf16_len,
)
from calypso.citations.links import LinkSigner, quote_url, source_url
from calypso.citations.offsets import OffsetMap
from calypso.dialects.content import numbered_text, sources_appendix
from calypso.models import Passage


@dataclass
class RenderOptions:
    links: LinkSigner | None = None  # signs source links; None: bare paths
    inline: bool = False  # [[n]](url) links with url_citation annotations
    legacy: bool = True  # citation_compat "legacy": duplicate the citation data under metadata._aicore
    sources_appendix: bool = True  # "Sources:" list in _aicore.display_text (legacy)
    hidden: bool = False  # a sources policy hides them: no quotes, filenames or URLs anywhere
    annotate: bool = True  # False for a JSON reply: its text is the client's data, sources are beside it
    # document ids -> each one's file attributes (a vector store file's, as the client set them)
    file_attributes: Callable[[list[str]], dict[str, dict[str, Any]]] | None = None


class LinkSpan(NamedTuple):
    """One ``[[n]](url)`` link in the inline text and the citation it stands for."""

    start: int
    end: int
    url: str
    citation: SegmentCitation
    source: Source


def _url(source: Source, options: RenderOptions, quote: Quote | None = None) -> str:
    """The source's link: its passage, or with ``quote`` the quote marked on its page."""
    if quote is None:
        return source_url(source.passage, options.links)
    return quote_url(source.passage, options.links, quote)


def page_attributes(passage: Passage) -> dict[str, Any]:
    """``page_number``/``page_label`` of a passage, only when its document has pages."""
    if not passage.has_pages:
        return {}
    return {"page_number": passage.chunk.page_start, "page_label": passage.page_label}


def grounded_source(answer: GroundedAnswer, source: Source, options: RenderOptions) -> dict[str, Any]:
    """One ``grounded_sources`` entry. Its label, page and locator say where its quotes stand when the answer
    cites it (each quote's heading or page; the first quote's page), else where the passage is."""
    passage = source.passage
    quotes = answer.quotes_of(source)
    pages = page_attributes(passage)
    if quotes and pages:
        pages = dict(zip(("page_number", "page_label"), quote_locator(quotes[0], passage)[:2]))
    return {
        "source_index": source.display_number,
        "label": answer.source_label(source),
        "file_id": passage.document.file_id,
        "filename": passage.document.filename,
        "document_id": passage.document.id,
        "chunk_index": passage.chunk.chunk_index,
        **pages,
        "locator_label": answer.source_locator(source),
        "url": _url(source, options),
        "score": round(passage.score, 6),
        "cited": source.cited,
    }


# -- annotations ---------------------------------------------------------------------------


def _segment_fields(
    segment: Segment, citation: SegmentCitation, source: Source, start: int, end: int, text: str
) -> dict[str, Any]:
    quote = citation.quote
    page_number, page_label, locator = quote_locator(quote, source.passage)
    return {
        "segment_start": start,
        "segment_end": end,
        "segment_text": segment.text,
        "segment_start_utf16": utf16_len(text[:start]),
        "segment_end_utf16": utf16_len(text[:end]),
        "source_index": source.display_number,
        "support_score": quote.support,
        "supported": quote.supported,
        "quote_start": quote.passage_start,
        "quote_end": quote.passage_end,
        "document_id": source.passage.document.id,
        "chunk_index": source.passage.chunk.chunk_index,
        "page_number": page_number,
        "page_label": page_label,
        "locator_label": locator,
        "attribution": citation.attribution,
    }


def file_citation(answer_text: str, segment: Segment, citation: SegmentCitation, source: Source) -> dict[str, Any]:
    """A seed-000 file_citation: flat OpenAI fields, the legacy nested object, and ``_aicore`` segment fields."""
    document = source.passage.document
    return {
        "type": "file_citation",
        "text": segment.text,
        "start_index": segment.start,
        "end_index": segment.end,
        "file_id": document.file_id,
        "filename": document.filename,
        "index": segment.end,  # where a badge goes: right after the cited text
        "quote": citation.quote.text,  # also flat: the Vercel AI SDK titles sources with it
        "file_citation": {"file_id": document.file_id, "filename": document.filename, "quote": citation.quote.text},
        "_aicore": _segment_fields(segment, citation, source, segment.start, segment.end, answer_text),
    }


def url_citation(link: LinkSpan, segment: Segment, segment_start: int, segment_end: int, text: str) -> dict[str, Any]:
    """A seed-003 url_citation spanning exactly one ``[[n]](url)`` link; ``title`` is the number.

    ``segment_start``/``segment_end`` are the segment's offsets in the inline ``text``.
    """
    source = link.source
    document = source.passage.document
    return {
        "type": "url_citation",
        "url": link.url,
        "title": str(source.display_number),
        "start_index": link.start,
        "end_index": link.end,
        "file_id": document.file_id,
        "filename": document.filename,
        "_aicore": _segment_fields(segment, link.citation, source, segment_start, segment_end, text),
    }


class InlineLinker:
    """Builds ``[[n]](url)`` links marker by marker; ``offsets`` tracks where they land in the inline text."""

    def __init__(self, answer_sources: list[Source], options: RenderOptions) -> None:
        self.sources = answer_sources
        self.options = options
        self.offsets = OffsetMap()

    def links(
        self, placement: MarkerPlacement, segment: Segment | None, inline_text_len: int
    ) -> tuple[str, list[LinkSpan]]:
        """(text to insert, one span per link) for one marker; ``inline_text_len`` is the text written so far."""
        if segment is None or not placement.valid_numbers:
            return "", []
        by_number = {c.retrieval_number: c for c in segment.citations}
        piece = placement.leading_space
        spans = []
        for number in placement.valid_numbers:
            citation = by_number.get(number)
            if citation is None:
                continue
            source = self.sources[number - 1]
            url = _url(source, self.options, citation.quote)
            link = f"[[{source.display_number}]]({url})"
            start = inline_text_len + len(piece)
            piece += link
            spans.append(LinkSpan(start, start + len(link), url, citation, source))
        self.offsets.insert(placement.position, len(piece))
        return piece, spans


# -- file search results, metadata -------------------------------------------------------------


def file_search_results(sources: list[Source], options: RenderOptions) -> list[dict[str, Any]]:
    """Every retrieved passage, in the order given (``answer.by_display_number``), with ``source_index``
    and ``cited``: the streamed ``output_item.done`` and the completed response carry the same results."""
    if options.hidden:
        return []
    lookup = options.file_attributes
    own = lookup([s.passage.document.id for s in sources]) if lookup is not None and sources else {}
    results = []
    for source in sources:
        passage = source.passage
        attributes: dict[str, Any] = {
            # The file's own attributes first (an app keeps a URL or a title there); seed 000's keys win.
            **own.get(passage.document.id, {}),
            "label": passage.display_label,
            **page_attributes(passage),
            "locator_label": passage.locator_label,
            "modality": passage.chunk.modality,
            **({"ocr_confidence": passage.chunk.confidence} if passage.chunk.confidence is not None else {}),
            **({"table_header": passage.chunk.table_header} if passage.chunk.table_header else {}),
            "knowledge_id": passage.document.namespace,
            "document_id": passage.document.id,
            "chunk_index": passage.chunk.chunk_index,
        }
        attributes = {"source_index": source.display_number, **attributes, "cited": source.cited}
        results.append(
            {
                "file_id": passage.document.file_id,
                "filename": passage.document.filename,
                "text": passage.chunk.text,
                "score": round(passage.score, 6),
                "attributes": attributes,
            }
        )
    return results


def all_source_urls(answer: GroundedAnswer, options: RenderOptions) -> list[str]:
    """Seed 003's ``citations``: every source URL retrieved, cited or not, without repeats.

    A cited source is listed by the links the text gives it (its quotes in the viewer, in text order),
    so every ``[[n]](url)`` of the answer is in the list; an uncited one by its passage's link.
    """
    if options.hidden:
        return []
    urls: list[str] = []
    for source in answer.by_display_number:
        quotes = [
            c.quote for s in answer.segments for c in s.citations if c.retrieval_number == source.retrieval_number
        ]
        for url in [_url(source, options, q) for q in quotes] or [_url(source, options)]:
            if url not in urls:
                urls.append(url)
    return urls


def _display_text(answer: GroundedAnswer, options: RenderOptions) -> str:
    """The text as the numeric chat style shows it: ``[n]`` markers and, unless omitted, the "Sources:" list."""
    body = numbered_text(answer)
    return body + sources_appendix(answer) if options.sources_appendix else body


def aicore_metadata(answer: GroundedAnswer, options: RenderOptions) -> dict[str, Any]:
    meta = grounding_status(answer, options.hidden)
    state = meta["grounded_sources_state"]
    if not options.legacy:
        return meta
    if options.hidden:
        meta.update(grounded_sources=[], grounding_supports=[], display_text=answer.text)
        meta["ui"] = [{"type": "text", "text": answer.text}]
        return meta
    meta["grounded_sources"] = [grounded_source(answer, s, options) for s in answer.by_display_number]
    meta["grounding_supports"] = [
        {
            "support_index": i,
            "chunks": [c.display_number for c in segment.citations],
            "text": segment.text,
            "start_index": segment.start,
            "end_index": segment.end,
            "support_scores": [c.quote.support for c in segment.citations],
        }
        for i, segment in enumerate(answer.segments)
    ]
    display_text = _display_text(answer, options)
    meta["display_text"] = display_text
    meta["ui"] = [{"type": "text", "text": display_text}]
    if state == "available":
        meta["ui"].append(
            {
                "type": "sources",
                "items": [
                    {"source_index": s.display_number, "label": answer.source_label(s), "url": _url(s, options)}
                    for s in answer.cited_sources
                ],
            }
        )
    return meta
