"""Per-workspace policies in SQLite."""

from __future__ import annotations

import sqlite3

from calypso.models import SourcesPolicy
from calypso.store.sqlite.database import Database


class SQLitePolicyStore:
    """``calypso.store.base.PolicyStore`` on SQLite."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def sources_policy(self, workspace: str) -> SourcesPolicy | None:
        row = self.database.row("SELECT sources_policy FROM workspace_policies WHERE workspace = ?", (workspace,))
        return row[0] if row else None

    def set_sources_policy(self, workspace: str, policy: SourcesPolicy) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO workspace_policies (workspace, sources_policy) VALUES (?, ?) "
                "ON CONFLICT (workspace) DO UPDATE SET sources_policy = excluded.sources_policy",
                (workspace, policy),
            )

        self.database.write(work)
