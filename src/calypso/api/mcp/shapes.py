"""What the MCP tools return as ``structuredContent``: the models their ``outputSchema`` is made from.

The fields are the citation fields of the HTTP dialects (``api/serialize.py``, ``dialects/responses.py``)
under the same names: a client that reads ``document_id``, ``page_label`` or ``locator_label`` from a
Responses annotation reads the same key here. Offsets are Python string indices, end exclusive.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PassageResult(BaseModel):
    """One passage: where it is (document, page or heading), its text, its score and a link to open it."""

    id: str = Field(description="Passage id '<document_id>:<chunk_index>': give it to `fetch`.")
    rank: int = Field(description="1-based position in these results; the [n] of the text.")
    document_id: str
    file_id: str
    filename: str
    title: str | None
    knowledge_base: str = Field(description="The namespace (vector store id) the document is in.")
    chunk_index: int
    page_number: int | None = Field(description="First physical page (1-based); null where the document has no pages.")
    page_end: int | None = Field(description="Last physical page; null where the document has no pages.")
    page_label: str | None = Field(description="The printed page label of page_number; null without pages.")
    heading_path: list[str] = Field(description="Headings above the passage, outermost first.")
    locator_label: str = Field(description="Where a reader finds it: 'p. 4', 'slide 3', or the heading path.")
    label: str = Field(description="Filename and locator, as shown to readers.")
    modality: str = Field(description="'text', or 'ocr' when read from an image of the page.")
    text: str = Field(description="The passage text, exactly document text[start_index:end_index].")
    start_index: int = Field(description="Offset of the passage in the document's extracted text.")
    end_index: int
    score: float | None = Field(description="Retrieval score in [0, 1]; null for a passage fetched by id.")
    link: str = Field(description="A signed link to the source (PDFs open at the page); no API key needed.")


class SearchResult(BaseModel):
    query: str
    knowledge_base: str
    results: list[PassageResult]


class CitationResult(BaseModel):
    """One (answer span, source) pair: the quote of the passage that supports that span of the answer."""

    source_index: int = Field(description="The [n] of the answer text: the source's display number.")
    passage_id: str
    document_id: str
    file_id: str
    filename: str
    page_number: int | None = Field(description="The quote's page; null where the document has no pages.")
    page_label: str | None
    locator_label: str = Field(description="Where the quote stands: its page, else the heading above it.")
    segment_text: str = Field(description="The span of the answer this citation supports.")
    segment_start: int
    segment_end: int
    quote: str = Field(description="The exact sentence(s) of the passage that support the span.")
    quote_start: int = Field(description="Offset of the quote in the passage text.")
    quote_end: int
    document_start: int = Field(description="Offset of the quote in the document's extracted text.")
    document_end: int
    support_score: float = Field(description="How well the quote supports the span, 0..1.")
    supported: bool
    attribution: str = Field(description="'model': the model cited it; 'inferred': Calypso found it.")
    link: str


class SentenceResult(BaseModel):
    """One sentence of the answer and whether the sources support it."""

    text: str
    start_index: int
    end_index: int
    status: str = Field(description="supported | weak | unsupported | not_a_claim")
    support_score: float | None


class AnswerSource(BaseModel):
    """A retrieved passage, numbered as in the answer text; ``cited`` when the answer rests on it."""

    source_index: int
    cited: bool
    passage: PassageResult


class AskResult(BaseModel):
    question: str
    bot: str
    answer: str = Field(description="The answer, plain (no markers).")
    answer_with_markers: str = Field(description="The answer with [n] markers after the spans each source supports.")
    citations: list[CitationResult]
    sources: list[AnswerSource]
    sentences: list[SentenceResult]
    grounding: dict[str, Any] = Field(
        description="retrieval_status, grounded_sources_state and hint, generator, attribution, and claims "
        "(support: supported | partial | unsupported | no_claims, coverage, counts, unsupported_spans): "
        "the block `metadata._aicore` carries over HTTP."
    )


class EvidenceResult(BaseModel):
    """The sentence(s) of one passage that best support the claim, and how well."""

    passage: PassageResult
    quote: str = Field(description="Exact sentence(s) of the passage: passage text[quote_start:quote_end].")
    quote_start: int
    quote_end: int
    document_start: int
    document_end: int
    page_number: int | None
    page_label: str | None
    locator_label: str
    support_score: float = Field(description="0..1, the support scorer's (the one answers' citations carry).")
    supported: bool = Field(description="support_score at or above the server's threshold.")
    link: str


class VerifyResult(BaseModel):
    claim: str
    supported: bool = Field(description="Whether any passage supports the claim.")
    support_score: float = Field(description="The best passage's support score, 0..1.")
    threshold: float
    evidence: list[EvidenceResult] = Field(description="Each passage scored, best first.")


class DocumentResult(BaseModel):
    document_id: str
    file_id: str
    filename: str
    title: str | None
    knowledge_base: str
    media_type: str
    page_count: int
    passage_count: int
    status: str
    source_url: str | None
    link: str


class FetchResult(BaseModel):
    id: str
    document: DocumentResult
    passages: list[PassageResult] = Field(description="The passages, in document order.")
    target: int | None = Field(description="Index in `passages` of the passage asked for; null for a document id.")
    text: str = Field(description="The passages' text joined without their overlaps: a span of the document.")
    truncated: bool = Field(description="True when the document has more passages than were returned.")


class KnowledgeBaseResult(BaseModel):
    id: str = Field(description="Give it as `knowledge_base` to `search` and `ask`.")
    name: str | None
    description: str | None
    documents: int
    completed: int
    in_progress: int
    failed: int
    bytes: int
    status: str
    default: bool = Field(description="Searched when no knowledge_base is given.")


class BotResult(BaseModel):
    id: str = Field(description="Give it as `bot` to `ask`.")
    knowledge_base: str | None


class KnowledgeBasesResult(BaseModel):
    knowledge_bases: list[KnowledgeBaseResult]
    bots: list[BotResult]


class ToolErrorResult(BaseModel):
    """An error, as HTTP sends it: OpenAI's ``error`` object plus the HTTP status."""

    message: str
    type: str
    param: str | None
    code: str | None
    status: int
