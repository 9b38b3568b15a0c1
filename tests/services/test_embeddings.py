"""Passage vectors on both backends: queued at completion, filled by a worker, searched hybrid (issue 12).

The real local model (all-MiniLM-L6-v2 int8 from the ``embed`` extra) embeds small documents; the
queries share no word with the passage they should find, so only the vectors can find it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from postgres_support import RawDatabase

from calypso.config import Settings
from calypso.embeddings import DimensionMismatch
from calypso.models import RankingOptions
from calypso.services import Services, open_services, open_storage
from calypso.services.embed_worker import embed_all, run_once
from calypso.services.ingest_worker import worker_id
from calypso.services.ingestion import IngestionService, Upload
from calypso.services.vectors import VectorService

pytest.importorskip("onnxruntime")

MODEL = "minilm-l6-v2-int8"
DOCS = {
    "canteen.txt": "The staff canteen serves breakfast from seven and a hot lunch from noon until two.",
    "remote.txt": "Employees may work from home two days each week once their manager approves.",
    "parking.txt": "Parking permits are issued by the facilities team every January.",
}
MEANING_ONLY = "when can I eat in the cafeteria"  # no word in common with the canteen passage


@pytest.fixture
def embedding_settings(settings: Settings) -> Settings:
    return replace_settings(settings, embedding_model=MODEL)


def replace_settings(settings: Settings, **changes: object) -> Settings:
    return settings.model_copy(update=changes)


@pytest.fixture
def embedded(embedding_settings: Settings) -> Iterator[Services]:
    opened = open_services(embedding_settings)
    assert opened.vectors.embedder is not None, "the embed extra is part of the test install"
    yield opened
    opened.close()


def _ingest_all(ingestion: IngestionService) -> dict[str, str]:
    return {name: ingestion.ingest(Upload(text.encode(), name, "hr")).document.id for name, text in DOCS.items()}


def test_keyword_searchable_first_then_found_by_meaning(embedded: Services, raw: RawDatabase) -> None:
    vectors = embedded.vectors
    searcher = embedded.search
    ids = _ingest_all(embedded.ingestion)
    assert vectors.pending() == 3
    listed = [embedded.documents.get(i) for i in ids.values()]
    assert set(vectors.progress(listed).values()) == {0}
    assert searcher.search(MEANING_ONLY, searcher.scope("hr")) == []  # keywords alone find nothing
    assert searcher.search("canteen lunch", searcher.scope("hr"))[0].document.id == ids["canteen.txt"]

    assert embed_all(vectors) == 3
    assert vectors.pending() == 0
    assert vectors.progress(listed) == {i: 1 for i in ids.values()}
    kinds = [r[0] for r in raw.execute("SELECT kind FROM document_changes ORDER BY seq")]
    assert kinds.count("embedded") == 3

    hits = searcher.search(MEANING_ONLY, searcher.scope("hr"))
    assert hits[0].document.id == ids["canteen.txt"]
    assert hits[0].keyword_score is None and hits[0].vector_score is not None and hits[0].vector_score > 0.3
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert (
        searcher.search("How do volcanoes form?", searcher.scope("hr")) == []
    )  # nearest by vector is not a match by meaning
    # Keyword-only by weight: the vectors are not asked.
    keyword_only = RankingOptions(text_weight=1.0, embedding_weight=0.0)
    assert searcher.search(MEANING_ONLY, searcher.scope("hr", ranking=keyword_only)) == []
    # The threshold cuts on the fused score.
    assert searcher.search(MEANING_ONLY, searcher.scope("hr", ranking=RankingOptions(score_threshold=0.99))) == [
        h for h in hits if h.score >= 0.99
    ]


def test_another_process_sees_new_vectors(embedding_settings: Settings, embedded: Services) -> None:
    # PostgreSQL: another process's own home; SQLite: a second reader of the same file (a CLI beside the server).
    other_home = embedding_settings.home.parent / "other-home" if embedding_settings.database_url else None
    other = open_services(replace_settings(embedding_settings, home=other_home or embedding_settings.home))
    try:
        assert other.search.search(MEANING_ONLY, other.search.scope("hr")) == []
        ids = _ingest_all(embedded.ingestion)
        embed_all(embedded.vectors)
        other.search.catch_up()  # what its follower thread does within a second
        assert other.search.search(MEANING_ONLY, other.search.scope("hr"))[0].document.id == ids["canteen.txt"]
    finally:
        other.close()


def test_a_restart_loads_each_vector_once(embedding_settings: Settings, embedded: Services) -> None:
    # The keyword index (a snapshot on SQLite) is older than the vectors, as after any embedding run:
    # the feed's embedded changes before the vectors' load must not be applied again on top of it.
    searcher = embedded.search
    ids = _ingest_all(embedded.ingestion)
    searcher.search("canteen lunch", searcher.scope("hr"))  # the keyword index, before any vector
    embed_all(embedded.vectors)
    embedded.close()
    again = open_services(embedding_settings)
    try:
        assert again.search.search(MEANING_ONLY, again.search.scope("hr"))[0].document.id == ids["canteen.txt"]
        vectors = again.search.vectors("hr")
        assert vectors is not None and len(vectors) == len(DOCS)
        assert vectors.rows == len(DOCS)  # rows held, live or dead: no document was removed and added again
        assert vectors.capacity == len(DOCS)  # trimmed after the load: no doubling slack held
    finally:
        again.close()


def test_unchanged_text_is_not_embedded_again(embedded: Services) -> None:
    vectors = embedded.vectors
    ids = _ingest_all(embedded.ingestion)
    embed_all(vectors)
    sent = vectors.embedder.embedded  # type: ignore[union-attr]  # CachedEmbedder's count
    assert sent == 3
    embedded.documents.delete(ids["canteen.txt"])
    embedded.ingestion.ingest(Upload(DOCS["canteen.txt"].encode(), "canteen-again.txt", "hr"))
    assert embed_all(vectors) == 1  # stored again, from the cache
    assert vectors.embedder.embedded == sent  # type: ignore[union-attr]


def test_deleting_a_document_takes_its_vectors(embedded: Services, raw: RawDatabase) -> None:
    searcher = embedded.search
    ids = _ingest_all(embedded.ingestion)
    embed_all(embedded.vectors)
    embedded.documents.delete(ids["canteen.txt"])
    assert raw.scalar("SELECT COUNT(*) FROM chunk_embeddings") == 2
    assert all(h.document.id != ids["canteen.txt"] for h in searcher.search(MEANING_ONLY, searcher.scope("hr")))


def test_a_worker_that_lost_its_lease_stores_nothing(embedded: Services, raw: RawDatabase) -> None:
    embedded.ingestion.ingest(Upload(DOCS["canteen.txt"].encode(), "canteen.txt", "hr"))
    store = embedded.vectors.embeddings
    first = store.claim(worker_id("a"), -1.0, MODEL)  # a lease that has already run out
    assert first is not None
    second = store.claim(worker_id("b"), 60.0, MODEL)
    assert second is not None and second.document_key == first.document_key and second.attempts == 2
    vectors = np.ones((1, 384), dtype=np.float32) / np.sqrt(384)
    key = store.missing_chunks(first.document_key, MODEL)[0][0]
    assert store.store_vectors(first, "not-the-owner", [key], vectors) is False
    assert raw.scalar("SELECT COUNT(*) FROM chunk_embeddings") == 0


def test_reindex_drops_and_rebuilds_every_vector(embedded: Services, raw: RawDatabase) -> None:
    vectors = embedded.vectors
    searcher = embedded.search
    ids = _ingest_all(embedded.ingestion)
    embed_all(vectors)
    assert vectors.reindex() == 3
    assert raw.scalar("SELECT COUNT(*) FROM chunk_embeddings") == 0
    vectors.catch_up()
    assert embed_all(vectors) == 3
    assert searcher.search(MEANING_ONLY, searcher.scope("hr"))[0].document.id == ids["canteen.txt"]


def test_a_changed_model_re_embeds_in_the_background_and_search_goes_on(
    embedding_settings: Settings, embedded: Services, raw: RawDatabase
) -> None:
    """Issue 43: a knowledge base embedded by MiniLM, reopened with the multilingual model as a server opens it,
    is queued for the new vectors; keyword search serves meanwhile, and the new vectors replace the old."""
    ids = _ingest_all(embedded.ingestion)
    embed_all(embedded.vectors)
    embedded.close()
    switched = replace_settings(embedding_settings, embedding_model="multilingual-e5-small-int8")
    reopened = open_services(switched, exclusive=True)
    try:
        assert reopened.vectors.pending() == 3  # every document holds MiniLM's vectors: all queued
        assert reopened.vectors.adopt_model() == 0  # queued once, not again
        found = reopened.search.search("canteen breakfast", reopened.search.scope("hr"))
        assert found[0].document.id == ids["canteen.txt"]  # searchable throughout, by keywords
        assert embed_all(reopened.vectors) == 3
        models = raw.scalar("SELECT COUNT(DISTINCT model) FROM chunk_embeddings")
        assert models == 1 and raw.scalar("SELECT MIN(model) FROM chunk_embeddings") == switched.embedding_model
        reopened.vectors.catch_up()
        spanish = "¿cuándo puedo comer en la cafetería?"  # another language, no shared word: only vectors find it
        assert reopened.search.search(spanish, reopened.search.scope("hr"))[0].document.id == ids["canteen.txt"]
    finally:
        reopened.close()


class EightDimensions:
    """An embedder under the real model's name that makes 8-dimensional vectors: a changed model."""

    name = MODEL
    dimension = 8
    languages = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)


def test_a_model_of_another_dimension_under_the_same_name_is_refused(
    embedding_settings: Settings, embedded: Services
) -> None:
    _ingest_all(embedded.ingestion)
    embed_all(embedded.vectors)
    with pytest.raises(DimensionMismatch, match="calypso reindex"):
        VectorService(
            embedding_settings,
            EightDimensions(),
            embedded.storage.embeddings,
            embedded.storage.documents,
            embedded.search.indexes,
        )


def test_embedding_workers_stop_between_batches(embedded: Services) -> None:
    text = " ".join(f"Sentence {i} about canteen lunches." for i in range(2000))
    embedded.ingestion.ingest(Upload(text.encode(), "long.txt", "hr"))
    stopping = threading.Event()
    stopping.set()
    assert embed_all(embedded.vectors, stopping) == 0
    assert embedded.vectors.pending() == 1


def test_keyword_only_without_a_model(services: Services, settings: Settings, tmp_path: Path) -> None:
    assert services.vectors.embedder is None  # CALYPSO_EMBEDDING_MODEL=none in the test environment
    doc = services.ingestion.ingest(Upload(DOCS["canteen.txt"].encode(), "canteen.txt", "hr")).document
    assert services.vectors.progress([doc]) == {}
    assert services.search.search(MEANING_ONLY, services.search.scope("hr")) == []


def test_small_documents_are_embedded_together(embedded: Services) -> None:
    vectors = embedded.vectors
    searcher = embedded.search
    ids = _ingest_all(embedded.ingestion)  # three one-passage documents
    # One claim round takes all three into one model call (one text per call is a third of the speed).
    assert run_once(vectors, worker_id("test"), threading.Event()) == 3
    assert vectors.pending() == 0
    listed = [embedded.documents.get(i) for i in ids.values()]
    assert vectors.progress(listed) == {i: 1 for i in ids.values()}
    assert searcher.search(MEANING_ONLY, searcher.scope("hr"))[0].document.id == ids["canteen.txt"]


def test_only_postgresql_offers_a_vector_search_of_its_own(settings: Settings) -> None:
    storage = open_storage(settings)
    try:
        search = storage.vector_search(MODEL, 8, 40)  # SQLite: None, its vectors are searched in memory
        assert (search is not None) == bool(settings.database_url)
        if search is not None:
            assert len(search("default", "empty")) == 0
    finally:
        storage.close()
