"""The embedded backend: every entity store over one SQLite file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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
from calypso.store.embeddings_sql import SQLEmbeddingStore, sqlite_dialect
from calypso.store.feed_sql import ChangeFeedSQL
from calypso.store.portable import PortableStore
from calypso.store.portable_sql import PortableSQL, sqlite_portable
from calypso.store.sources import SourceStore
from calypso.store.sqlite.bots import SQLiteBotStore
from calypso.store.sqlite.conversations import SQLiteConversationStore
from calypso.store.sqlite.database import Database
from calypso.store.sqlite.documents import SQLiteDocumentStore, _record_change
from calypso.store.sqlite.jobs import SQLiteJobStore, release_dead_leases
from calypso.store.sqlite.keys import SQLiteKeyStore
from calypso.store.sqlite.lock import ProcessLock
from calypso.store.sqlite.policies import SQLitePolicyStore
from calypso.store.sqlite.responses import SQLiteResponseStore
from calypso.store.terms_sql import StoredTermsSQL
from calypso.store.vector_stores_sql import SQLVectorStoreStore
from calypso.store.vectors import EmbeddingStore, VectorSearch


class SQLiteStorage:
    """``calypso.store.base.Storage`` on one SQLite file (created and migrated on open).

    ``exclusive``: hold the data directory against other serving or ingesting processes.
    """

    def __init__(self, path: Path, *, exclusive: bool = False) -> None:
        self._lock = ProcessLock(path) if exclusive else None
        if self._lock is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        self.database = Database(path)
        self.documents: DocumentStore = SQLiteDocumentStore(self.database)
        self.feed: ChangeFeed = ChangeFeedSQL(self.database, "?")  # SQLite cannot notify: readers poll
        self.terms: StoredTerms = StoredTermsSQL(self.database, "?")
        self.jobs: JobStore = SQLiteJobStore(self.database)
        self.bots: BotStore = SQLiteBotStore(self.database)
        self.conversations: ConversationStore = SQLiteConversationStore(self.database)
        self.responses: ResponseStore = SQLiteResponseStore(self.database)
        self.keys: KeyStore = SQLiteKeyStore(self.database)
        self.policies: PolicyStore = SQLitePolicyStore(self.database)
        self.vector_stores: VectorStoreStore = SQLVectorStoreStore(self.database, "?")
        vectors = sqlite_dialect(_record_change)
        self.embeddings: EmbeddingStore = SQLEmbeddingStore(self.database, vectors)
        database = self.database
        self.portable: PortableStore = PortableSQL(
            database.snapshot, lambda work, needs: database.write(work, needs=needs), sqlite_portable(vectors)
        )
        self.sources: SourceStore[Database] = SourceStore(self.database, "?")
        self.search_reads: SearchReads | None = None  # the file is read where the search runs, the loop included
        if self._lock is not None and self._lock.previous_owner is not None:
            release_dead_leases(self.database, self._lock.previous_owner)

    def vector_search(self, model: str, dimension: int, ef_search: int) -> Callable[[str, str], VectorSearch] | None:
        """None: SQLite has no vector search of its own; the services search vectors in memory."""
        return None

    async def open_on_loop(self) -> None:
        """Nothing: SQLite's reads need no pool of their own on the event loop."""

    async def close_on_loop(self) -> None:
        """Nothing to close."""

    def close(self) -> None:
        self.database.close()
        if self._lock is not None:
            self._lock.release()


__all__ = ["SQLiteStorage"]
