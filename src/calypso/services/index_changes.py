"""What one change of the document feed does to a namespace's BM25 index, and how a snapshot names the change at
its position (``services/index_sync.py``)."""

from __future__ import annotations

import hashlib

from calypso.models import DocumentChange, IndexedChunk
from calypso.retrieval.bm25 import BM25Index
from calypso.store.base import ChangeFeed
from calypso.text.tokenize import decode_language, decode_terms


def index_rows(
    store: ChangeFeed, doc_key: int, chunks: list[IndexedChunk]
) -> list[tuple[int, str, list[str] | None, str | None]]:
    """What ``BM25Index.add`` takes for one document: stored terms (and language) where usable, else the
    text to analyse."""
    rows = [(c.key, c.text, decode_terms(c.terms), decode_language(c.terms)) for c in chunks]
    if any(terms is None and not text for _, text, terms, _ in rows):
        # Terms of another analyzer version came without their text (see namespace_chunks): read it.
        rows = [
            (c.key, c.text, decode_terms(c.terms), decode_language(c.terms)) for c in store.document_chunks(doc_key)
        ]
    return rows


def fingerprint(store: ChangeFeed, change: DocumentChange) -> list[object]:
    """What identifies the feed's change at a snapshot's position: a recreated database reuses seqs and keys."""
    digest = hashlib.sha256()
    for chunk in store.document_chunks(change.document_key):  # empty once deleted
        digest.update(f"{chunk.key}\x00{chunk.terms}\x00{chunk.text}\x00".encode())
    return [change.workspace, change.namespace, change.document_key, change.kind, digest.hexdigest()[:16]]


def apply_change(store: ChangeFeed, index: BM25Index, change: DocumentChange) -> bool:
    """Apply one change idempotently; True when it changed the index."""
    if change.kind == "embedded":
        return False  # vectors only
    if change.kind == "deleted":
        if change.document_key not in index:
            return False
        index.remove(change.document_key)
        return True
    if change.document_key in index:
        return False
    chunks = store.document_chunks(change.document_key)
    if not chunks:  # deleted since: its own change follows
        return False
    index.add(change.document_key, index_rows(store, change.document_key, chunks))
    return True
