"""Passages, answers and documents as the MCP tools give them: structured data, and text a model reads.

The text numbers each passage ``[n]`` with its document, locator and link, so a model can cite what it
read and a person can open it; the structured data carries the same facts field by field (``shapes``).
"""

from __future__ import annotations

from typing import Any

from calypso.citations.grounded import GroundedAnswer, quote_locator
from calypso.citations.links import LinkSigner, quote_url, source_url, view_path
from calypso.dialects.content import numbered_text
from calypso.errors import CalypsoError
from calypso.models import Document, Passage

PREVIEW_CHARS = 1200  # of each passage in a search's text: the structured data has it whole


def passage_id(passage: Passage) -> str:
    """``<document_id>:<chunk_index>``: what ``fetch`` takes back."""
    return f"{passage.document.id}:{passage.chunk.chunk_index}"


def passage_result(passage: Passage, rank: int, links: LinkSigner | None, score: bool = True) -> dict[str, Any]:
    doc, chunk = passage.document, passage.chunk
    pages = passage.has_pages
    return {
        "id": passage_id(passage),
        "rank": rank,
        "document_id": doc.id,
        "file_id": doc.file_id,
        "filename": doc.filename,
        "title": doc.title,
        "knowledge_base": doc.namespace,
        "chunk_index": chunk.chunk_index,
        "page_number": chunk.page_start if pages else None,
        "page_end": chunk.page_end if pages else None,
        "page_label": passage.page_label if pages else None,
        "heading_path": list(chunk.heading_path),
        "locator_label": passage.locator_label,
        "label": passage.display_label,
        "modality": chunk.modality,
        "ocr_confidence": chunk.confidence,
        "table_header": chunk.table_header or None,
        "text": chunk.text,
        "start_index": chunk.start,
        "end_index": chunk.end,
        "score": round(passage.score, 6) if score else None,
        "link": source_url(passage, links),
    }


def _oneline(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def passage_text(result: dict[str, Any], limit: int = PREVIEW_CHARS) -> str:
    """``[n] label — id — link`` then the passage: one numbered block of a search's text."""
    score = f", score {result['score']:.3f}" if result["score"] is not None else ""
    head = f"[{result['rank']}] {result['label']} (id {result['id']}{score})"
    return f"{head}\n{result['link']}\n{_oneline(result['text'], limit)}"


def search_text(query: str, knowledge_base: str, results: list[dict[str, Any]]) -> str:
    if not results:
        return f"No passages in knowledge base {knowledge_base!r} match {_oneline(query, 200)!r}."
    blocks = "\n\n".join(passage_text(r) for r in results)
    return (
        f"{len(results)} passage(s) from knowledge base {knowledge_base!r}. Cite them as [n]; "
        f"`fetch` an id for the passage with its neighbours.\n\n{blocks}"
    )


def answer_result(
    question: str, bot: str, answer: GroundedAnswer, links: LinkSigner | None, hidden: bool
) -> dict[str, Any]:
    """The grounded answer: its text, every (span, quote) citation, the sources, each sentence's status."""
    from calypso.citations.grounded import grounding_status

    citations = []
    sources = []
    if not hidden:  # a sources policy hides them: no quotes, filenames or links anywhere (as over HTTP)
        for segment in answer.segments:
            for citation in segment.citations:
                source = answer.source(citation.retrieval_number)
                passage, quote = source.passage, citation.quote
                page_number, page_label, locator = quote_locator(quote, passage)
                citations.append(
                    {
                        "source_index": source.display_number,
                        "passage_id": passage_id(passage),
                        "document_id": passage.document.id,
                        "file_id": passage.document.file_id,
                        "filename": passage.document.filename,
                        "page_number": page_number,
                        "page_label": page_label,
                        "locator_label": locator,
                        "segment_text": segment.text,
                        "segment_start": segment.start,
                        "segment_end": segment.end,
                        "quote": quote.text,
                        "quote_start": quote.passage_start,
                        "quote_end": quote.passage_end,
                        "document_start": quote.document_start,
                        "document_end": quote.document_end,
                        "support_score": quote.support,
                        "supported": quote.supported,
                        "attribution": citation.attribution,
                        "link": quote_url(passage, links, quote),
                    }
                )
        sources = [
            {
                "source_index": s.display_number,
                "cited": s.cited,
                "passage": passage_result(s.passage, s.display_number, links),
            }
            for s in answer.by_display_number
        ]
    sentences = [
        {
            "text": answer.text[s.start : s.end],
            "start_index": s.start,
            "end_index": s.end,
            "status": s.status,
            "support_score": s.support,
        }
        for s in answer.sentences
    ]
    return {
        "question": question,
        "bot": bot,
        "answer": answer.text,
        "answer_with_markers": answer.text if hidden else numbered_text(answer),
        "citations": citations,
        "sources": sources,
        "sentences": sentences,
        "grounding": grounding_status(answer, hidden),
    }


def answer_text(result: dict[str, Any]) -> str:
    """The answer with [n] markers, its cited sources with quote, locator and link, and how well it is supported."""
    lines = [result["answer_with_markers"]]
    if result["citations"]:
        lines.append("\nSources:")
        seen: set[tuple[int, str]] = set()
        for c in result["citations"]:
            key = (c["source_index"], c["quote"])
            if key in seen:
                continue
            seen.add(key)
            where = f" ({c['locator_label']})" if c["locator_label"] else ""
            lines.append(f"[{c['source_index']}] {c['filename']}{where} (passage {c['passage_id']}) {c['link']}")
            lines.append(f'    "{_oneline(c["quote"], 400)}" (support {c["support_score"]:.2f})')
    claims = result["grounding"]["claims"]
    coverage = claims["coverage"]
    shown = f", {coverage:.0%} of its claims supported" if coverage is not None else ""
    lines.append(f"\nGrounding: {result['grounding']['grounded_sources_state']}; support {claims['support']}{shown}.")
    for span in claims["unsupported_spans"]:
        lines.append(f"  {span['status']}: {_oneline(span['text'], 200)!r}")
    return "\n".join(lines)


def document_result(document: Document, links: LinkSigner | None, first: Passage | None) -> dict[str, Any]:
    link = source_url(first, links) if first is not None else view_path(document.file_id)
    return {
        "document_id": document.id,
        "file_id": document.file_id,
        "filename": document.filename,
        "title": document.title,
        "knowledge_base": document.namespace,
        "media_type": document.media_type,
        "page_count": document.page_count,
        "passage_count": document.chunk_count,
        "status": document.status,
        "source_url": document.source_url,
        "link": link,
    }


def joined_text(passages: list[Passage]) -> str:
    """The passages' span of the document: consecutive passages overlap, and each overlap is given once."""
    parts: list[str] = []
    end = -1
    for passage in passages:
        chunk = passage.chunk
        if end < 0 or chunk.start >= end:
            parts.append(("\n\n" if parts else "") + chunk.text)
        else:
            parts.append(chunk.text[end - chunk.start :])
        end = max(end, chunk.end)
    return "".join(parts)


def fetch_text(result: dict[str, Any]) -> str:
    doc = result["document"]
    shown = result["passages"]
    if not shown:
        return f"{doc['filename']} has no passages yet (status {doc['status']}).\n{doc['link']}"
    first, last = shown[0], shown[-1]
    ends = dict.fromkeys(label for label in (first["locator_label"], last["locator_label"]) if label)
    where = f" ({' – '.join(ends)})" if ends else ""
    more = " (the document goes on: fetch a later passage id for more)" if result["truncated"] else ""
    return (
        f"{doc['filename']}{where}, passages {first['id']} to {last['id']}{more}\n{first['link']}\n\n{result['text']}"
    )


def verify_text(result: dict[str, Any]) -> str:
    verdict = "supported" if result["supported"] else "NOT supported"
    lines = [
        f"The claim is {verdict} by the passages checked (best support {result['support_score']:.2f}, "
        f"threshold {result['threshold']:.2f})."
    ]
    for e in result["evidence"]:
        passage = e["passage"]
        where = f" ({e['locator_label']})" if e["locator_label"] else ""
        mark = "supports" if e["supported"] else "does not support"
        lines.append(
            f"- {passage['filename']}{where}, passage {passage['id']}: {mark} ({e['support_score']:.2f}) {e['link']}"
        )
        lines.append(f'    "{_oneline(e["quote"], 400)}"')
    return "\n".join(lines)


def error_fields(exc: CalypsoError) -> dict[str, Any]:
    """The HTTP error body's fields, and the HTTP status it would have had."""
    return {**exc.to_dict()["error"], "status": exc.status}


def error_text(exc: CalypsoError) -> str:
    code = f" (code {exc.code})" if exc.code else ""
    return f"Error {exc.status} {exc.type}{code}: {exc.message}"
