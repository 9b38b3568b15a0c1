"""The embedded backend: every entity store over one SQLite file."""

from __future__ import annotations

from pathlib import Path

from calypso.store.sqlite.bots import SQLiteBotStore
from calypso.store.sqlite.conversations import SQLiteConversationStore
from calypso.store.sqlite.database import Database
from calypso.store.sqlite.documents import SQLiteDocumentStore
from calypso.store.sqlite.keys import SQLiteKeyStore
from calypso.store.sqlite.policies import SQLitePolicyStore
from calypso.store.sqlite.responses import SQLiteResponseStore


class SQLiteStorage:
    """``calypso.store.base.Storage`` on one SQLite file (created and migrated on open)."""

    def __init__(self, path: Path) -> None:
        self.database = Database(path)
        self.documents = SQLiteDocumentStore(self.database)
        self.bots = SQLiteBotStore(self.database)
        self.conversations = SQLiteConversationStore(self.database)
        self.responses = SQLiteResponseStore(self.database)
        self.keys = SQLiteKeyStore(self.database)
        self.policies = SQLitePolicyStore(self.database)

    def close(self) -> None:
        self.database.close()


__all__ = ["SQLiteStorage"]
