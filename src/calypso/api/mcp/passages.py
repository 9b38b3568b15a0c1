"""The MCP tools that read passages by id, and the document resource: ``fetch``, ``verify``,
``calypso://documents/{id}``; the same calls as the HTTP routes, rendered by ``render``.

They run on a worker thread (they touch the store), as ``calls.py``'s do.
"""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult

from calypso.api.mcp import render
from calypso.api.mcp.calls import Caller, check_text, namespace_of, tool_result
from calypso.citations.grounded import Source, quote_locator
from calypso.citations.links import quote_url
from calypso.citations.support import SUPPORT_THRESHOLD
from calypso.errors import InvalidRequest, NotFound
from calypso.models import Document, Passage

MAX_NEIGHBOURS = 5
MAX_VERIFY_PASSAGES = 20
MAX_FETCH_PASSAGES = 12  # of a whole document: about 10,000 characters at the default chunk size
MAX_RESOURCE_PASSAGES = 400  # of a document resource: about 300,000 characters


def _parse_id(raw: str) -> tuple[str, int | None]:
    document_id, sep, index = raw.strip().rpartition(":")
    if not sep:
        return raw.strip(), None
    if not index.isdigit() or not document_id:
        raise InvalidRequest(
            f"Invalid id {raw!r}: give a passage id '<document_id>:<chunk_index>' from `search`, or a document id.",
            param="id",
        )
    return document_id, int(index)


def _document(caller: Caller, document_id: str, param: str) -> Document:
    documents, workspace = caller.services.documents, caller.workspace
    if not document_id:
        raise InvalidRequest(f"{param} is empty: give a passage id from `search`, or a document id.", param=param)
    try:
        if document_id.startswith("file-"):
            return documents.get_by_file_id(document_id, workspace)
        return documents.get(document_id, workspace)
    except NotFound as exc:  # the HTTP message, naming the tool's argument
        raise NotFound(exc.message, param=param, code=exc.code) from exc


def _missing_passage(raw_id: str, document: Document, param: str) -> NotFound:
    return NotFound(
        f"No passage {raw_id!r}: document {document.id!r} has {document.chunk_count} passage(s), "
        f"numbered 0 to {document.chunk_count - 1}.",
        param=param,
    )


def run_fetch(caller: Caller, raw_id: str, neighbours: int) -> CallToolResult:
    documents, workspace = caller.services.documents, caller.workspace
    document_id, index = _parse_id(check_text(raw_id, "id"))
    document = _document(caller, document_id, "id")
    if index is None:
        listing = documents.chunks(document.id, MAX_FETCH_PASSAGES, None, workspace)
        target = None
    else:
        first = max(0, index - neighbours)
        listing = documents.chunks(document.id, index + neighbours - first + 1, first - 1 if first else None, workspace)
        found = [c.chunk.chunk_index for c in listing.items]
        if index not in found:
            raise _missing_passage(raw_id, document, "id")
        target = found.index(index)
    passages = [Passage(document, c.chunk, 0.0) for c in listing.items]
    results = [render.passage_result(p, rank, caller.links, score=False) for rank, p in enumerate(passages, start=1)]
    structured = {
        "id": raw_id,
        "document": render.document_result(document, caller.links, passages[0] if passages else None),
        "passages": results,
        "target": target,
        "text": render.joined_text(passages),
        "truncated": index is None and listing.has_more,
    }
    return tool_result(render.fetch_text(structured), structured)


def _passage(caller: Caller, raw_id: str, param: str) -> Passage:
    """The passage a ``<document_id>:<chunk_index>`` id names, in the caller's workspace only."""
    document_id, index = _parse_id(raw_id)
    if index is None:
        raise InvalidRequest(f"{param}: {raw_id!r} is not a passage id '<document_id>:<chunk_index>'.", param=param)
    document = _document(caller, document_id, param)
    listing = caller.services.documents.chunks(document.id, 1, index - 1 if index else None, caller.workspace)
    if not listing.items or listing.items[0].chunk.chunk_index != index:
        raise _missing_passage(raw_id, document, param)
    return Passage(document, listing.items[0].chunk, 0.0)


def run_verify(
    caller: Caller, claim: str, passage_ids: list[str] | None, knowledge_base: str | None, max_passages: int
) -> CallToolResult:
    services = caller.services
    if not check_text(claim, "claim").strip():
        raise InvalidRequest("The claim is empty; send the sentence to check against the documents.", param="claim")
    if passage_ids:
        passages = [_passage(caller, raw, f"passage_ids[{i}]") for i, raw in enumerate(passage_ids)]
        score = False
    else:
        namespace = namespace_of(caller, knowledge_base)
        passages = services.search.search(
            claim, services.search.scope(namespace, max_results=max_passages), caller.workspace
        )
        score = True
    threshold = services.settings.support_threshold
    threshold = SUPPORT_THRESHOLD if threshold is None else threshold
    evidence: list[dict[str, Any]] = []
    for rank, passage in enumerate(passages, start=1):
        quote = services.answering.find_quote(claim, Source(rank, passage))
        page_number, page_label, locator = quote_locator(quote, passage)
        evidence.append(
            {
                "passage": render.passage_result(passage, rank, caller.links, score=score),
                "quote": quote.text,
                "quote_start": quote.passage_start,
                "quote_end": quote.passage_end,
                "document_start": quote.document_start,
                "document_end": quote.document_end,
                "page_number": page_number,
                "page_label": page_label,
                "locator_label": locator,
                "support_score": quote.support,
                "supported": quote.supported,
                "link": quote_url(passage, caller.links, quote),
            }
        )
    evidence.sort(key=lambda e: -float(e["support_score"]))
    best = float(evidence[0]["support_score"]) if evidence else 0.0
    structured = {
        "claim": claim,
        "supported": any(e["supported"] for e in evidence),
        "support_score": best,
        "threshold": threshold,
        "evidence": evidence,
    }
    return tool_result(render.verify_text(structured), structured)


def read_document(caller: Caller, document_id: str) -> str:
    """``calypso://documents/{id}``: the document's extracted text (its passages joined) under a header
    with its locators and link; the first MAX_RESOURCE_PASSAGES passages of a longer one."""
    documents, workspace = caller.services.documents, caller.workspace
    document = _document(caller, document_id, "uri")
    passages: list[Passage] = []
    after = None
    while len(passages) < MAX_RESOURCE_PASSAGES:
        listing = documents.chunks(document.id, 100, after, workspace)
        passages += [Passage(document, c.chunk, 0.0) for c in listing.items]
        if not listing.has_more or not listing.items:
            break
        after = listing.items[-1].chunk.chunk_index
    shown = passages[:MAX_RESOURCE_PASSAGES]
    head = render.document_result(document, caller.links, shown[0] if shown else None)
    more = len(shown) < document.chunk_count
    lines = [
        f"# {document.title or document.filename}",
        f"document {document.id} ({document.filename}, {document.media_type}, {document.page_count} page(s), "
        f"{document.chunk_count} passage(s), knowledge base {document.namespace})",
        f"source: {head['link']}",
    ]
    if more:
        lines.append(f"(the first {len(shown)} passages: `fetch` '{document.id}:{len(shown)}' for the rest)")
    return "\n".join(lines) + "\n\n" + render.joined_text(shown)
