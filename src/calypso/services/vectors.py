"""The vectors service: the embedding model, the queue of documents waiting for vectors, and reindexing.

A completed document is queued for the configured model (``JobStore.complete`` adds the embedding job);
the embedding workers (``services/embed_worker.py``) fill the vectors in; this service says how far they
are and drops every vector to start again after the model changed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from calypso.config import Settings
from calypso.embeddings.base import Embedder, check_dimension
from calypso.errors import InvalidRequest
from calypso.models import Document
from calypso.services.index_sync import NamespaceIndexes
from calypso.store.base import DocumentStore
from calypso.store.vectors import EmbeddingStore

log = logging.getLogger("calypso.embeddings")


class VectorService:
    """The embedder (None: keyword-only search), its stored vectors and their queue."""

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder | None,
        embeddings: EmbeddingStore,
        documents: DocumentStore,
        indexes: NamespaceIndexes,
    ) -> None:
        """Raises DimensionMismatch when stored vectors were made by another model under the embedder's name."""
        self.settings = settings
        self.embedder = embedder
        self.embeddings = embeddings
        self._documents = documents
        self._indexes = indexes
        if embedder is not None:
            # Vectors are stored by model name: the same name with another dimension cannot be searched.
            check_dimension(embeddings.stored_dimension(embedder.name), embedder)

    @property
    def model(self) -> str | None:
        """The configured embedding model's name; None without one."""
        return self.embedder.name if self.embedder is not None else None

    def pending(self) -> int:
        """Documents whose passages wait for vectors of the configured model (0 without one)."""
        return self.embeddings.pending(self.embedder.name) if self.embedder is not None else 0

    def progress(self, documents: Sequence[Document]) -> dict[str, int]:
        """Passages embedded by the configured model so far, by document id (empty without a model)."""
        if self.embedder is None or not documents:
            return {}
        by_workspace: dict[str, list[str]] = {}
        for doc in documents:
            if doc.status == "completed":
                by_workspace.setdefault(doc.workspace, []).append(doc.id)
        keys: dict[int, str] = {}
        for workspace, ids in by_workspace.items():
            keys.update((key, doc_id) for doc_id, key in self._documents.document_keys(workspace, ids).items())
        counts = self.embeddings.embedded_counts(list(keys), self.embedder.name)
        return {doc_id: counts.get(key, 0) for key, doc_id in keys.items()}

    def reindex(self, workspace: str | None = None) -> int:
        """Drop every stored vector and queue every completed document for the configured model; returns how many."""
        if self.embedder is None:
            raise InvalidRequest(
                "No embedding model is configured (CALYPSO_EMBEDDING_MODEL is 'none' or its packages are missing); "
                "there is nothing to reindex with.",
                param="embedding_model",
            )
        return self.embeddings.reset(self.embedder.name, workspace)

    def adopt_model(self) -> int:
        """Queue the documents whose vectors another model made (the configured one changed) for re-embedding
        in the background; search goes on meanwhile with keywords and the vectors already made. Returns how many."""
        if self.embedder is None:
            return 0
        queued = self.embeddings.queue_other_models(self.embedder.name)
        if queued:
            log.warning(
                "%d documents hold vectors of another embedding model than %s: re-embedding them in the background "
                "(progress: /readyz checks.vectors.pending_documents); keyword search serves them meanwhile",
                queued,
                self.embedder.name,
            )
        return queued

    def catch_up(self) -> int:
        """Apply the change feed to this process's indexes now, so its searches use vectors just stored."""
        return self._indexes.catch_up()
