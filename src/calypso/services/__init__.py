"""Services decide; routes and CLI commands translate; stores persist.

``Services`` is built once at start (``open_services``) and injected into the
API routes and CLI commands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from calypso.citations.links import load_secret
from calypso.config import Settings, revealed
from calypso.embeddings import Embedder, EmbeddingError, embeddings_off, open_embedder, open_sqlite_cache
from calypso.services.answering import Answerer
from calypso.services.bots import BotService
from calypso.services.conversations import ConversationService
from calypso.services.documents import DocumentService
from calypso.services.index_sync import NamespaceIndexes
from calypso.services.ingest_worker import JobRunner
from calypso.services.ingestion import IngestionService
from calypso.services.keys import KeyService, PolicyService
from calypso.services.reanalysis import TermsReanalysis
from calypso.services.responses import ResponseService
from calypso.services.search import SearchService
from calypso.services.sources import SourceService
from calypso.services.turns import TurnPreparer
from calypso.services.vector_stores import VectorStoreService
from calypso.services.vectors import VectorService
from calypso.store.base import Storage
from calypso.store.vectors import VectorSearch
from calypso.store.wait_budget import WaitBudget, one_request

log = logging.getLogger("calypso.services")


@dataclass
class Services:
    settings: Settings
    storage: Storage
    signing_secret: bytes
    ingestion: IngestionService
    documents: DocumentService
    vectors: VectorService
    search: SearchService
    answering: Answerer
    bots: BotService
    conversations: ConversationService
    responses: ResponseService
    keys: KeyService
    policies: PolicyService
    vector_stores: VectorStoreService
    reanalysis: TermsReanalysis
    sources: SourceService
    turns: TurnPreparer = field(init=False)  # what every surface asks through, over the services above

    def __post_init__(self) -> None:
        self.turns = TurnPreparer(self.settings, self.bots, self.policies, self.vector_stores, self.answering)

    async def aclose(self) -> None:
        """Close what answering holds open (upstream connections), then the storage."""
        await self.answering.aclose()
        self.close()

    def close(self) -> None:
        """Stop the index follower, save index snapshots, close the storage (for callers that never answered)."""
        try:
            self.reanalysis.close()
            self.search.close()
        finally:
            self.storage.close()


def request_budget() -> AbstractContextManager[WaitBudget]:
    """One budget for the database waits of the request or call run inside it (``store/wait_budget.py``):
    the HTTP middleware and the gRPC servicers open it, the backend spends it."""
    return one_request()


def open_storage(settings: Settings, *, exclusive: bool = False) -> Storage:
    """The configured storage backend: PostgreSQL when ``database_url`` is set, else the embedded SQLite file.

    ``exclusive``: this process keeps indexes and writes documents (serve, ingest). On SQLite a
    second such process on the same data directory is refused with DataDirectoryInUse. On
    PostgreSQL several processes are the point, so nothing is locked; each process's
    in-memory indexes follow the others' writes through the change feed (``services.index_sync``).
    Raises StoreUnavailable when PostgreSQL cannot be reached.
    """
    if settings.database_url:
        from calypso.store.postgres import PostgresStorage

        return PostgresStorage(settings.database_url, max_size=settings.database_pool_size)
    from calypso.store.sqlite import SQLiteStorage

    return SQLiteStorage(settings.database_path, exclusive=exclusive)


def data_directory_in_use(settings: Settings) -> bool:
    """Whether a serving or ingesting process holds the embedded database's data directory now (its lock)."""
    from calypso.store.sqlite.lock import is_held

    return is_held(settings.database_path)


def open_embedding_model(settings: Settings) -> Embedder | None:
    """The configured embedder with its content-hash cache beside the data, or None: keyword-only search.

    A missing local package or an unreachable embeddings server is one logged line, not a failed start;
    so is a cache that cannot be opened (a full disk). With the model off no cache file is opened at all.
    """
    if embeddings_off(settings):
        return None
    try:
        settings.home.mkdir(parents=True, exist_ok=True)
        embedder = open_embedder(settings, cache=open_sqlite_cache(settings.home / "embedding-cache.sqlite"))
        if embedder is not None:
            embedder.dimension  # noqa: B018 - an embeddings server is asked once, here, not mid-ingestion
    except EmbeddingError as exc:
        log.warning("embeddings are off, search is keyword-only: %s", exc.message)
        return None
    return embedder


def database_vector_search(
    settings: Settings, storage: Storage, embedder: Embedder | None
) -> Callable[[str, str], VectorSearch] | None:
    """The backend's own vector search (PostgreSQL with ``pg_vector_search=hnsw``), or None: vectors in memory."""
    if embedder is None or settings.pg_vector_search != "hnsw":
        return None
    return storage.vector_search(embedder.name, embedder.dimension, settings.pg_hnsw_ef_search)


def open_services(settings: Settings, storage: Storage | None = None, *, exclusive: bool = False) -> Services:
    """Every service over one storage; raises BotsFileError when the bots file is invalid, DimensionMismatch
    when stored vectors were made by another model under the configured model's name."""
    storage = storage if storage is not None else open_storage(settings, exclusive=exclusive)
    secret = load_secret(revealed(settings.signing_secret), settings.home)
    embedder = open_embedding_model(settings)
    indexes = NamespaceIndexes(
        storage.feed,
        settings.home / "index",  # on PostgreSQL, shared by the API processes of the host that use this home
        identity=storage.feed.identity(),
        embeddings=storage.embeddings,
        model=embedder.name if embedder is not None else None,
        dimension=embedder.dimension if embedder is not None else 0,
        vector_search=database_vector_search(settings, storage, embedder),
        ann_min_vectors=settings.ann_min_vectors,
    )
    vectors = VectorService(settings, embedder, storage.embeddings, storage.documents, indexes)
    runner = JobRunner(settings, storage.documents, storage.jobs, indexes, vectors.model)
    ingestion = IngestionService(settings, storage.documents, storage.jobs, runner)
    documents = DocumentService(settings, storage.documents, storage.jobs, vectors, indexes, secret)
    search = SearchService(
        settings,
        storage.documents,
        indexes,
        embedder=embedder,
        file_links=storage.vector_stores,
        reads=storage.search_reads,
    )
    reanalysis = TermsReanalysis(storage.terms)
    if exclusive:  # a server or worker: rewrite terms an older analyzer stored (search needs none of it)
        reanalysis.start()
        vectors.adopt_model()  # vectors of a model configured before: re-embedded by the workers
    return Services(
        settings=settings,
        storage=storage,
        signing_secret=secret,
        ingestion=ingestion,
        documents=documents,
        vectors=vectors,
        search=search,
        answering=Answerer(documents, search, settings),
        bots=BotService(settings, storage.bots),
        conversations=ConversationService(storage.conversations),
        responses=ResponseService(storage.responses),
        keys=KeyService(storage.keys),
        policies=PolicyService(storage.policies),
        vector_stores=VectorStoreService(documents, ingestion, search, storage.vector_stores),
        reanalysis=reanalysis,
        sources=SourceService(settings, storage.sources, ingestion, documents, secret),
    )


__all__ = ["Services", "data_directory_in_use", "open_services", "open_storage", "request_budget"]
