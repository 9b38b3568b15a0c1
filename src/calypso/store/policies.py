"""Per-workspace policies (for now: whether sources may be shown)."""

from __future__ import annotations

from calypso.store.sqlite import SQLiteStore

SOURCES_POLICIES = ("visible", "hidden")


class PolicyStore:
    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def sources_policy(self, workspace: str) -> str:
        row = (
            self.store._connection()
            .execute("SELECT sources_policy FROM workspace_policies WHERE workspace = ?", (workspace,))
            .fetchone()
        )
        return row[0] if row else "visible"

    def set_sources_policy(self, workspace: str, policy: str) -> None:
        def work(db) -> None:
            db.execute(
                "INSERT INTO workspace_policies (workspace, sources_policy) VALUES (?, ?) "
                "ON CONFLICT (workspace) DO UPDATE SET sources_policy = excluded.sources_policy",
                (workspace, policy),
            )

        self.store._write(work)
