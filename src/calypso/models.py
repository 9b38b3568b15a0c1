"""Plain data objects shared by ingestion, storage, retrieval and the API."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Page:
    """One physical page of a document, as a span of the document text."""

    number: int  # 1-based physical page number
    label: str  # the document's own page label (PDF /PageLabels) or str(number)
    start: int  # offset into the document text, code points
    end: int  # end exclusive


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
    metadata: dict = field(default_factory=dict)


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
    heading_path: tuple[str, ...] = ()


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
    metadata: dict = field(default_factory=dict)


@dataclass
class Passage:
    """A retrieved chunk with its document and retrieval score."""

    document: Document
    chunk: Chunk
    score: float

    @property
    def page_label(self) -> str:
        return self.chunk.page_labels[0] if self.chunk.page_labels else str(self.chunk.page_start)

    @property
    def locator_label(self) -> str:
        labels = self.chunk.page_labels
        if len(labels) > 1:
            return f"pp. {labels[0]}–{labels[-1]}"
        return f"p. {self.page_label}"

    @property
    def display_label(self) -> str:
        return f"{self.document.filename} ({self.locator_label})"
