"""The PostgreSQL backend: every entity store over one database, for many processes.

Through psycopg 3 and a connection pool; the schema is migrated on open (safe
when several processes start at once, see ``migrations``), with the
``vector`` extension (pgvector) created by the first migration.

Several API processes may share the database: that is the point of this
backend, so there is no data-directory lock (``exclusive`` means nothing
here). Each process searches a BM25 index per namespace that follows the
database's change feed; the processes of one host share its snapshot files
(``services/index_sync.py``), stamped with ``DATABASE_IDENTITY``.
"""

from __future__ import annotations

from collections.abc import Callable

from calypso.store.base import (
    BotStore,
    ChangeFeed,
    ConversationStore,
    DocumentStore,
    JobStore,
    KeyStore,
    PolicyStore,
    ResponseStore,
    SearchReads,
    StoredTerms,
    VectorStoreStore,
)
from calypso.store.embeddings_sql import SQLEmbeddingStore, postgres_dialect
from calypso.store.feed_sql import ChangeFeedSQL
from calypso.store.portable import PortableStore
from calypso.store.portable_sql import PortableSQL, postgres_portable
from calypso.store.postgres.bots import PostgresBotStore
from calypso.store.postgres.conversations import PostgresConversationStore
from calypso.store.postgres.database import Database, redact_url
from calypso.store.postgres.documents import FEED_CHANNEL, PostgresDocumentStore, _record_change
from calypso.store.postgres.jobs import PostgresJobStore
from calypso.store.postgres.keys import PostgresKeyStore
from calypso.store.postgres.policies import PostgresPolicyStore
from calypso.store.postgres.responses import PostgresResponseStore
from calypso.store.postgres.search_reads import PostgresSearchReads
from calypso.store.postgres.vector_search import ITERATIVE_SCANS, PgVectorSearch, ensure_hnsw_index, pgvector_version
from calypso.store.sources import SourceStore
from calypso.store.terms_sql import StoredTermsSQL
from calypso.store.vector_stores_sql import SQLVectorStoreStore
from calypso.store.vectors import EmbeddingStore

# A recreated database (or another cluster's with the same name) gets another oid or system identifier, so a host's
# index snapshots of the old one are refused; a replica of this one shares both.
DATABASE_IDENTITY = (
    "SELECT 'postgresql:' || (SELECT system_identifier FROM pg_control_system()) || ':' || "
    "(SELECT oid FROM pg_database WHERE datname = current_database())"
)


class PostgresStorage:
    """``calypso.store.base.Storage`` on one PostgreSQL database (migrated on open).

    Raises StoreUnavailable, naming the URL without its password, when the database cannot be reached.
    ``max_size``: pooled connections at most; ``timeout``: seconds a request waits for one.
    """

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10, timeout: float = 5.0) -> None:
        self.database = Database(url, min_size=min_size, max_size=max_size, timeout=timeout)
        self.documents: DocumentStore = PostgresDocumentStore(self.database)
        database = self.database
        self.feed: ChangeFeed = ChangeFeedSQL(
            database, "%s", lambda timeout: database.wait_for_notify(FEED_CHANNEL, timeout), DATABASE_IDENTITY
        )
        self.terms: StoredTerms = StoredTermsSQL(database, "%s")
        self.jobs: JobStore = PostgresJobStore(self.database)
        self.bots: BotStore = PostgresBotStore(self.database)
        self.conversations: ConversationStore = PostgresConversationStore(self.database)
        self.responses: ResponseStore = PostgresResponseStore(self.database)
        self.keys: KeyStore = PostgresKeyStore(self.database)
        self.policies: PolicyStore = PostgresPolicyStore(self.database)
        files = SQLVectorStoreStore(self.database, "%s")
        self.vector_stores: VectorStoreStore = files
        self.search_reads: SearchReads | None = PostgresSearchReads(self.database, files)
        vectors = postgres_dialect(_record_change)
        self.embeddings: EmbeddingStore = SQLEmbeddingStore(self.database, vectors)
        self.portable: PortableStore = PortableSQL(
            database.snapshot, lambda work, _needs: database.write(work), postgres_portable(vectors)
        )
        self.sources: SourceStore[Database] = SourceStore(database, "%s")

    def vector_search(self, model: str, dimension: int, ef_search: int) -> Callable[[str, str], PgVectorSearch]:
        """Passage vectors searched in the database (pgvector HNSW) instead of loaded by each process:
        ``(workspace, namespace) -> PgVectorSearch``; the dimension's HNSW index is built if missing (at 200k
        vectors, 80-110 s on 2 cores, once: every process that starts meanwhile waits for it)."""
        ensure_hnsw_index(self.database, dimension)
        iterative = pgvector_version(self.database) >= ITERATIVE_SCANS  # read once: the server's pgvector
        return lambda workspace, namespace: PgVectorSearch(
            self.database, workspace, namespace, model, dimension, ef_search=ef_search, iterative=iterative
        )

    async def open_on_loop(self) -> None:
        await self.database.open_on_loop()

    async def close_on_loop(self) -> None:
        await self.database.close_on_loop()

    def close(self) -> None:
        self.database.close()


__all__ = ["PostgresStorage", "redact_url"]
