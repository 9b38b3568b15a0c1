"""The ingestion pipeline: bytes → parsed pages → chunks → analysed terms, writing nothing.

A function of its inputs (the document, its bytes, the options, a progress callback), so the job runner
and the one-transaction path of small text uploads (``services/ingestion.py``) share it without either
being a host object the pipeline calls back into.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from calypso.config import Settings
from calypso.errors import EmptyDocument
from calypso.ingest.chunking import chunk_document
from calypso.ingest.isolation import parse_isolated
from calypso.ingest.limits import ParseLimits
from calypso.ingest.ocr_share import local_progress
from calypso.ingest.parsers import parse_document
from calypso.models import Chunk, Document, Page, ParsedDocument
from calypso.text.tokenize import analyze_many

PASSAGE_BATCH = 256  # passages analysed between progress reports (and checks that the job still holds)

# (pages parsed, passages analysed, passages in all) → False to stop there.
StepProgress = Callable[[int, int, int], bool]
PageProgress = Callable[[int, int], None]  # (pages read, pages to read) while a scan is recognised


@dataclass(frozen=True)
class PipelineOptions:
    """What the pipeline reads of the settings: parse limits and isolation, the server's chunking."""

    limits: ParseLimits
    parse_processes: int
    parse_timeout_seconds: float
    parse_memory_bytes: int
    chunk_size: int
    chunk_overlap: int

    @classmethod
    def from_settings(cls, settings: Settings) -> PipelineOptions:
        return cls(
            limits=ParseLimits.from_settings(settings),
            parse_processes=settings.parse_processes,
            parse_timeout_seconds=settings.parse_timeout_seconds,
            parse_memory_bytes=settings.parse_memory_bytes,
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
        )


@dataclass(frozen=True)
class Prepared:
    """A document ready to store: completed (detected type, title, metadata, counts), with its pages, chunks and
    their analysed terms, ``(language, terms)`` per chunk."""

    document: Document
    pages: Sequence[Page]
    chunks: list[Chunk]
    terms: list[tuple[str, list[str]]]


def parse(
    data: bytes, filename: str, media_type: str, options: PipelineOptions, on_pages: PageProgress | None = None
) -> tuple[ParsedDocument, str]:
    """Parse in child processes (``parse_processes``), under the parse limits; ``(parsed, media type)``.
    ``parse_processes=0`` parses in this process, uncapped (tests, trusted batch loads)."""
    if options.parse_processes == 0:
        with local_progress(on_pages):
            return parse_document(data, filename, media_type, options.limits)
    return parse_isolated(
        data,
        filename,
        media_type,
        options.limits,
        timeout=options.parse_timeout_seconds,
        memory_bytes=options.parse_memory_bytes,
        processes=options.parse_processes,
        on_pages=on_pages,
    )


def prepare(doc: Document, data: bytes, options: PipelineOptions, progress: StepProgress) -> Prepared | None:
    """Parse, chunk and analyse ``doc``'s bytes, writing nothing; None once ``progress`` says stop.

    ``progress(pages parsed, passages analysed, passages in all)`` runs after chunking and after each batch of
    PASSAGE_BATCH passages analysed; it returns False to stop there. While a scan is recognised, it runs after
    each page with the pages read so far (and no passages yet): a stop then waits for the parse to end.
    """

    def pages_read(read: int, total: int) -> None:
        progress(read, 0, 0)

    parsed, detected = parse(data, doc.filename, doc.media_type, options, on_pages=pages_read)
    if doc.chunking is not None:  # a static strategy asked for when attached to a vector store
        static = doc.chunking
        chunks = chunk_document(parsed, static.max_chunk_size_tokens, static.chunk_overlap_tokens, "tokens")
    else:
        chunks = chunk_document(parsed, options.chunk_size, options.chunk_overlap)
    if not chunks:
        raise EmptyDocument(f"{doc.filename} contains no text to index.", param="file")
    if not progress(len(parsed.pages), 0, len(chunks)):
        return None
    terms: list[tuple[str, list[str]]] = []
    # Analysed once here, stored with the chunks, indexed from the store; in batches, to report progress.
    for start in range(0, len(chunks), PASSAGE_BATCH):
        terms.extend(analyze_many(c.text for c in chunks[start : start + PASSAGE_BATCH]))
        if not progress(len(parsed.pages), len(terms), len(chunks)):
            return None
    finished = replace(
        doc,
        media_type=detected,
        title=parsed.title,
        metadata={**parsed.metadata, **doc.metadata},
        page_count=len(parsed.pages),
        chunk_count=len(chunks),
        status="completed",
    )
    return Prepared(finished, parsed.pages, chunks, terms)
