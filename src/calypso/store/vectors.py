"""The passage vectors' contracts: the store of vectors and their embedding jobs, and a backend's own search.

Beside ``store/base.py`` (bundled into its ``Storage``): vectors are the one part of the store that the
in-memory indexes (``retrieval/``) and PostgreSQL's pgvector both search.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Protocol

import numpy as np

from calypso.models import EmbeddingJob


class EmbeddingStore(Protocol):
    """Passage vectors by model, and the queue of documents whose passages need them (``embeddings_sql``)."""

    def claim(self, worker_id: str, lease_seconds: float, model: str) -> EmbeddingJob | None: ...

    def renew(self, document_key: int, worker_id: str, lease_seconds: float) -> bool: ...

    def release(self, document_key: int, worker_id: str) -> None: ...

    def finish(self, document_key: int, worker_id: str) -> bool: ...

    def pending(self, model: str) -> int: ...

    def reset(self, model: str, workspace: str | None = None) -> int: ...

    def queue_other_models(self, model: str) -> int: ...

    def missing_chunks(self, document_key: int, model: str) -> list[tuple[int, str]]: ...

    def store_vectors(
        self, job: EmbeddingJob, worker_id: str, chunk_keys: Sequence[int], vectors: np.ndarray
    ) -> bool: ...

    def document_vectors(self, document_key: int, model: str) -> tuple[list[int], np.ndarray | None]: ...

    def namespace_vectors(
        self, workspace: str, namespace: str, model: str
    ) -> Iterator[tuple[int, list[int], np.ndarray]]: ...

    def embedded_counts(self, document_keys: Sequence[int], model: str) -> dict[int, int]: ...

    def stored_dimension(self, model: str) -> int | None: ...


class VectorSearch(Protocol):
    """One namespace's passage vectors of one model, searched by cosine.

    Implemented in memory by ``retrieval.vectors.ExactVectorIndex`` (exact, or an HNSW graph's candidates
    scored exactly; the services load it from ``EmbeddingStore`` and feed it the change feed) and in the
    database by ``store.postgres.vector_search.PgVectorSearch`` (current by construction: nothing to feed).
    Both match structurally; retrieval imports nothing from ``store``.
    """

    def __len__(self) -> int:
        """About how many vectors it holds; 0 only when it holds none (searches then return nothing)."""
        ...

    def search(
        self, query: np.ndarray, k: int = 10, doc_keys: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """Up to ``k`` ``(chunk_key, cosine)`` pairs, best first, for ``query`` (a unit vector of the model's
        dimension); only chunks of ``doc_keys`` when given (an empty collection: none). A deleted document's
        chunks stop coming back once the deletion reaches it (in the database at commit; in memory when the
        feed is applied)."""
        ...
