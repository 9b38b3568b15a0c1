"""Plain data objects shared by ingestion, storage, retrieval, the services and the API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from calypso.ingest.formats import LocatorStyle
from calypso.locators import heading_locator, locator_style, page_locator

T = TypeVar("T")
Order = Literal["asc", "desc"]  # of a cursor listing
SourcesPolicy = Literal["visible", "hidden"]  # hidden: answers show no sources (grounding state "hidden")
# OpenAI's vector store file statuses: an upload is in_progress until its ingestion job ends.
DocumentStatus = Literal["in_progress", "completed", "failed", "cancelled"]


Modality = Literal["text", "ocr"]  # "ocr": the text was recognised from an image, not extracted


@dataclass(frozen=True)
class WordBox:
    """Where a recognised word stands on its page: its span of the document text and its box, as fractions
    of the page's width and height (origin top left, the page as a viewer shows it, after any rotation)."""

    start: int
    end: int
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class Page:
    """One page of a document (a PDF page, an image, a slide, a sheet region…), as a span of the document text.

    How a reader finds it (``calypso.locators``) depends on the document's type: "p. 4" for a PDF page,
    "slide 3", or the label itself ("Segments!A4:F19", "attachment report.pdf, p. 3").
    """

    number: int  # 1-based position among the document's pages
    label: str  # the document's own page label (PDF /PageLabels), str(number), or a full locator (see above)
    start: int  # offset into the document text, code points
    end: int  # end exclusive
    modality: Modality = "text"
    confidence: float | None = None  # OCR: the mean confidence of the page's recognised words, 0..1
    words: tuple[WordBox, ...] = ()  # OCR: the recognised words, in text order


@dataclass(frozen=True)
class Section:
    """Where a heading path begins inside a passage: ``offset`` into the passage text."""

    offset: int
    heading_path: tuple[str, ...]


@dataclass(frozen=True)
class Heading:
    """A heading in the document text; ``start`` is where its line begins."""

    level: int  # 1 = top level
    title: str
    start: int


@dataclass
class ParsedDocument:
    """What a parser returns: the full text plus its page and heading structure.

    ``pages`` always covers the whole text (formats without pages get one page).
    """

    text: str
    pages: list[Page]
    headings: list[Heading] = field(default_factory=list)
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Every page starts a passage and no passage spans two (spreadsheet blocks, slides: each page is a unit
    # a reader is sent to, and a block repeats its table's header so that its passage reads on its own).
    break_at_pages: bool = False


@dataclass(frozen=True)
class Chunk:
    """A passage of a document: the unit of retrieval and citation."""

    chunk_index: int  # 0-based, stable for the life of the document
    text: str
    start: int  # offset into the document text (code points), end exclusive
    end: int
    page_start: int  # physical page numbers covered, 1-based, inclusive
    page_end: int
    page_labels: tuple[str, ...]
    heading_path: tuple[str, ...] = ()  # the section the passage starts in (headings opening it included)
    # Where each heading path inside the passage begins (the first at offset 0), so a quote is located by
    # the heading above it; () when the passage lies in one section (``heading_path``).
    sections: tuple[Section, ...] = ()
    modality: Modality = "text"  # "ocr" when any page it covers was recognised
    # How sure the recogniser was of the text (0..1): its recognised pages' confidences, weighted by the text
    # of each inside the passage; None for extracted text.
    confidence: float | None = None
    # The header rows of the Markdown table this passage begins inside, when they lie above it (the passage's
    # text stays an exact slice of the document): a row's column names (``ingest/table_headers.py``).
    table_header: str = ""

    def heading_path_at(self, offset: int) -> tuple[str, ...]:
        """The heading path that stands above ``offset`` (into the passage text)."""
        path = self.sections[0].heading_path if self.sections else self.heading_path
        for section in self.sections:
            if section.offset > offset:
                break
            path = section.heading_path
        return path


@dataclass(frozen=True)
class StaticChunking:
    """OpenAI's static chunking strategy, in tokens (``ingest/tokens.py`` counts them)."""

    max_chunk_size_tokens: int
    chunk_overlap_tokens: int


@dataclass
class Document:
    id: str
    file_id: str
    workspace: str
    namespace: str
    filename: str
    media_type: str
    bytes: int
    sha256: str
    created_at: int
    page_count: int
    chunk_count: int
    title: str | None = None
    source_url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    status: DocumentStatus = "completed"
    # When failed: {"code": unsupported_file|invalid_file|server_error, "message": ...}; the store may keep
    # more keys (the original error's class, code and param, so `wait` can raise it again).
    last_error: dict[str, Any] | None = None
    # How it is chunked: a static strategy asked for when it was attached to a vector store, or None for
    # the server's own chunking (CALYPSO_CHUNK_SIZE / CALYPSO_CHUNK_OVERLAP, in characters).
    chunking: StaticChunking | None = None
    purpose: str | None = None  # the Files API's purpose it was uploaded with ("user_data"); None: "assistants"
    expires_at: int | None = None  # the Files API's expires_after, as a time (Unix seconds); None: never

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now


@dataclass
class VectorStore:
    """An OpenAI vector store: a named namespace of a workspace (its id is the namespace's name)."""

    id: str
    workspace: str
    namespace: str
    name: str | None
    created_at: int
    last_active_at: int
    metadata: dict[str, str] = field(default_factory=dict)
    expires_after: dict[str, Any] | None = None  # {"anchor": "last_active_at", "days": N}
    description: str | None = None


@dataclass
class VectorStoreFile:
    """A document as a file of its namespace's vector store, with the file id the client knows it by.

    ``file_id`` is the id the client attached (``/v1/files``), or the document's own file id when it
    came in through ``/v1/documents``; ``attributes`` are OpenAI's per-file filterable attributes.
    """

    workspace: str
    vector_store_id: str
    file_id: str
    document_id: str
    attributes: dict[str, str | bool | int | float] = field(default_factory=dict)


@dataclass
class FileBatch:
    """Files attached to a vector store in one request: ``file_ids`` in the order given."""

    id: str
    workspace: str
    vector_store_id: str
    file_ids: list[str]
    created_at: int
    cancelled: bool = False


@dataclass
class Passage:
    """A retrieved chunk with its document and retrieval score.

    ``score`` is what clients see, always in [0, 1] (OpenAI's file search documents it so); the raw
    values it came from stay beside it for attributes and debugging.
    """

    document: Document
    chunk: Chunk
    score: float
    keyword_score: float | None = None  # raw BM25
    vector_score: float | None = None  # raw cosine similarity, when the passage was found by embedding

    @property
    def locator_style(self) -> LocatorStyle:
        return locator_style(self.document.media_type, self.document.page_count)

    @property
    def has_pages(self) -> bool:
        """Whether the document has pages a reader could find (PDF pages, slides, sheet regions…).

        DOCX, HTML, Markdown and text are parsed as one page, which is not a page a reader could find:
        such passages are located by their heading path instead (GUIDE, "Where a passage is").
        """
        return self.locator_style != "heading"

    @property
    def page_label(self) -> str:
        return self.chunk.page_labels[0] if self.chunk.page_labels else str(self.chunk.page_start)

    @property
    def heading_label(self) -> str:
        """The heading path as readers see it: "Chapter 3 › Trustee Compensation"; "" when there is none."""
        return heading_locator(self.chunk.heading_path)

    @property
    def locator_label(self) -> str:
        """Where the passage is: its page(s) when the document has pages, else its heading path (maybe "")."""
        if not self.has_pages:
            return self.heading_label
        return page_locator(self.locator_style, self.chunk.page_labels or (self.page_label,))

    def quote_locator_label(self, offset: int, page_label: str) -> str:
        """Where a quote starting at ``offset`` (into the passage text) on page ``page_label`` stands: its
        page, else the heading path above it (not the passage's)."""
        if self.has_pages:
            return page_locator(self.locator_style, (page_label,))
        return heading_locator(self.chunk.heading_path_at(offset))

    @property
    def display_label(self) -> str:
        """The passage's own label, "file (locator)": where no quote names a place (search results)."""
        return self.labelled(self.locator_label)

    def labelled(self, locator: str) -> str:
        """ "file (locator)", or the file name alone when ``locator`` is empty."""
        return f"{self.document.filename} ({locator})" if locator else self.document.filename


# -- records that storage hands back ---------------------------------------------------------


@dataclass
class Listing(Generic[T]):
    """One page of a cursor listing."""

    items: list[T]
    has_more: bool


@dataclass
class StoredChunk:
    key: int  # store-wide unique integer id, the retrieval index's chunk key
    document_id: str
    chunk: Chunk


@dataclass
class IndexedChunk:
    """What a retrieval index needs of one chunk: its key, text and the terms retrieval stored with it."""

    key: int
    text: str
    terms: str | None  # opaque to the store: retrieval encodes and decodes it


@dataclass(frozen=True)
class RankingOptions:
    """How a search ranks and cuts passages: OpenAI's ``file_search.ranking_options``.

    ``score_threshold`` drops passages whose (0..1) score is below it. The weights set the share of
    keyword and embedding ranks in hybrid fusion (``hybrid_search {text_weight, embedding_weight}``);
    None leaves the server's default.
    """

    score_threshold: float = 0.0
    text_weight: float | None = None
    embedding_weight: float | None = None


@dataclass(frozen=True)
class DocumentChange:
    """One entry of the document change feed: a document became searchable, or went away."""

    seq: int  # feed position; seq order is commit order
    workspace: str
    namespace: str
    document_key: int
    kind: Literal["added", "deleted", "embedded"]  # embedded: a batch of the document's vectors landed


@dataclass(frozen=True)
class EmbeddingJob:
    """A completed document whose passages need vectors of ``model``, leased to one embedding worker."""

    document_key: int
    workspace: str
    namespace: str
    model: str
    attempts: int


@dataclass
class IngestJob:
    """An ingestion job: the document it builds (with its key) and how far it got."""

    document: Document
    document_key: int
    attempts: int  # claims so far, the current one included
    lease_owner: str | None  # the worker holding it, or None while queued
    pages_parsed: int = 0
    passages_written: int = 0


@dataclass(frozen=True)
class StoredBot:
    workspace: str
    id: str
    config: dict[str, Any]
    created_at: int
    updated_at: int


@dataclass
class Conversation:
    id: str
    workspace: str
    bot_id: str
    created_at: int
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoredMessage:
    id: str
    role: str  # "user" | "assistant"
    content: str | None
    citations: list[dict[str, Any]] | None  # always None on user messages
    created_at: int
    extra: dict[str, Any] = field(default_factory=dict)  # annotations, finish_reason, usage, plain text for the history


@dataclass
class StoredResponse:
    id: str
    bot_id: str
    body: dict[str, Any]
    history: list[dict[str, Any]]  # chat messages up to and including this reply, for previous_response_id
    input_items: list[dict[str, Any]] = field(default_factory=list)  # the request's ``input``, as items

    def history_record(self) -> dict[str, Any]:
        """What the ``history`` column stores: the messages and the input items."""
        return {"messages": self.history, "input_items": self.input_items}

    @staticmethod
    def split_history(record: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(history, input_items) from the column; a row written before input items were kept is a list."""
        if isinstance(record, list):
            return record, []
        return list(record.get("messages") or []), list(record.get("input_items") or [])


@dataclass
class ApiKey:
    id: str
    workspace: str
    name: str
    prefix: str  # the first characters, to recognise a key in listings
    created_at: int
    revoked_at: int | None


@dataclass(frozen=True)
class QueueStats:
    """The ingestion queue now: jobs waiting or running, and when the oldest of them was submitted."""

    queued: int
    running: int
    oldest_created_at: int | None  # epoch seconds; None when the queue is empty
