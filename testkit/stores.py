"""Documents written straight into a store, with no parsing: what store tests and scale benchmarks start from.

Through the contract's own writes, as ingestion makes them: a completed document in one transaction
(``JobStore.add_completed``, what a small text upload takes), any other status as a job that ended so.
"""

from __future__ import annotations

from collections.abc import Sequence

from calypso.models import Chunk, Document, Page
from calypso.store.base import Storage


def add_document(
    storage: Storage,
    doc: Document,
    pages: Sequence[Page],
    chunks: Sequence[Chunk],
    content: bytes,
    terms: Sequence[str | None] | None = None,
) -> tuple[int, list[int]]:
    """Store ``doc`` with its pages, chunks (and their stored terms) and bytes; (document key, chunk keys).
    Raises DuplicateContent when the namespace already holds these bytes (``doc.sha256``)."""
    stored_terms = list(terms) if terms is not None else [None] * len(chunks)
    if doc.status == "completed":
        chunk_keys = storage.jobs.add_completed(doc, content, pages, chunks, stored_terms)
    else:  # in progress, or a job that failed or was cancelled: nothing of it is searchable
        storage.jobs.submit(doc, content)
        chunk_keys = []
    key = storage.documents.document_key(doc.workspace, doc.id)
    assert key is not None
    if doc.status == "failed":
        job = storage.jobs.claim_document(key, "testkit", 30)
        assert job is not None and storage.jobs.fail(key, "testkit", doc.last_error or {"code": "invalid_file"})
    elif doc.status == "cancelled":
        assert storage.jobs.cancel(doc.workspace, doc.id) is not None
    return key, chunk_keys
