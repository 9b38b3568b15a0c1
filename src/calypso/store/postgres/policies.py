"""Per-workspace policies in PostgreSQL."""

from __future__ import annotations

from calypso.models import SourcesPolicy
from calypso.store.postgres.database import Database


class PostgresPolicyStore:
    """``calypso.store.base.PolicyStore`` on PostgreSQL."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def sources_policy(self, workspace: str) -> SourcesPolicy | None:
        row = self.database.row("SELECT sources_policy FROM workspace_policies WHERE workspace = %s", (workspace,))
        return row[0] if row else None

    def set_sources_policy(self, workspace: str, policy: SourcesPolicy) -> None:
        self.database.write(
            lambda db: db.execute(
                "INSERT INTO workspace_policies (workspace, sources_policy) VALUES (%s, %s) "
                "ON CONFLICT (workspace) DO UPDATE SET sources_policy = excluded.sources_policy",
                (workspace, policy),
            )
        )
