"""Bots created through the API: one row per (workspace, id), the settings as JSON.

The store knows nothing of bot validation; ``calypso.bots`` validates before
anything reaches it, and validates what it reads back.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from calypso.store.sqlite import SQLiteStore


@dataclass(frozen=True)
class StoredBot:
    workspace: str
    id: str
    config: dict
    created_at: int
    updated_at: int


def _row(row: sqlite3.Row | tuple) -> StoredBot:
    workspace, bot_id, config, created_at, updated_at = tuple(row)
    return StoredBot(workspace, bot_id, json.loads(config), created_at, updated_at)


_COLUMNS = "workspace, id, config, created_at, updated_at"


class BotStore:
    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    # -- reads -------------------------------------------------------------
    def get(self, workspace: str, bot_id: str) -> StoredBot | None:
        row = (
            self.store._connection()
            .execute(f"SELECT {_COLUMNS} FROM bots WHERE workspace = ? AND id = ?", (workspace, bot_id))
            .fetchone()
        )
        return _row(row) if row else None

    def list(self, workspace: str) -> list[StoredBot]:
        rows = self.store._connection().execute(
            f"SELECT {_COLUMNS} FROM bots WHERE workspace = ? ORDER BY id", (workspace,)
        )
        return [_row(r) for r in rows]

    def keys(self) -> list[tuple[str, str]]:
        """Every (workspace, id) stored, to warn at start about bots that shadow the bots file."""
        return [tuple(r) for r in self.store._connection().execute("SELECT workspace, id FROM bots")]  # type: ignore[misc]

    # -- writes ------------------------------------------------------------
    def insert(self, workspace: str, bot_id: str, config: dict) -> StoredBot | None:
        """Store a new bot; None when the id is already taken in the workspace."""
        now = int(time.time())

        def work(db: sqlite3.Connection) -> StoredBot | None:
            # Checked under the writer lock, so two concurrent creates cannot both win.
            if db.execute("SELECT 1 FROM bots WHERE workspace = ? AND id = ?", (workspace, bot_id)).fetchone():
                return None
            db.execute(
                "INSERT INTO bots (workspace, id, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (workspace, bot_id, json.dumps(config), now, now),
            )
            return StoredBot(workspace, bot_id, config, now, now)

        return self.store._write(work)  # type: ignore[return-value]

    def update(self, workspace: str, bot_id: str, apply: Callable[[dict | None], dict]) -> StoredBot:
        """Read, change and write one bot in a single transaction, so concurrent PATCHes never lose an update.

        ``apply`` gets the stored config (None when there is no row) and returns the
        new one; it may raise to abort. A missing row is created with the result.
        """
        now = int(time.time())

        def work(db: sqlite3.Connection) -> StoredBot:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM bots WHERE workspace = ? AND id = ?", (workspace, bot_id)
            ).fetchone()
            current = _row(row) if row else None
            config = apply(current.config if current else None)
            if current is None:
                db.execute(
                    "INSERT INTO bots (workspace, id, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                    (workspace, bot_id, json.dumps(config), now, now),
                )
                return StoredBot(workspace, bot_id, config, now, now)
            db.execute(
                "UPDATE bots SET config = ?, updated_at = ? WHERE workspace = ? AND id = ?",
                (json.dumps(config), now, workspace, bot_id),
            )
            return StoredBot(workspace, bot_id, config, current.created_at, now)

        return self.store._write(work)  # type: ignore[return-value]

    def delete(self, workspace: str, bot_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            return db.execute("DELETE FROM bots WHERE workspace = ? AND id = ?", (workspace, bot_id)).rowcount > 0

        return bool(self.store._write(work))
