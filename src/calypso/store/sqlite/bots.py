"""Bots in SQLite: one row per (workspace, id), the validated config as JSON."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from calypso.models import StoredBot
from calypso.store.sqlite.database import Database


def _row(row: sqlite3.Row | tuple[Any, ...]) -> StoredBot:
    workspace, bot_id, config, created_at, updated_at = tuple(row)
    return StoredBot(workspace, bot_id, json.loads(config), created_at, updated_at)


_COLUMNS = "workspace, id, config, created_at, updated_at"


class SQLiteBotStore:
    """``calypso.store.base.BotStore`` on SQLite."""

    def __init__(self, database: Database) -> None:
        self.database = database

    # -- reads -------------------------------------------------------------
    def get(self, workspace: str, bot_id: str) -> StoredBot | None:
        row = self.database.row(f"SELECT {_COLUMNS} FROM bots WHERE workspace = ? AND id = ?", (workspace, bot_id))
        return _row(row) if row else None

    def list_bots(self, workspace: str) -> list[StoredBot]:
        rows = self.database.rows(f"SELECT {_COLUMNS} FROM bots WHERE workspace = ? ORDER BY id", (workspace,))
        return [_row(r) for r in rows]

    def keys(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self.database.rows("SELECT workspace, id FROM bots")]

    # -- writes ------------------------------------------------------------
    def insert(self, workspace: str, bot_id: str, config: dict[str, Any]) -> StoredBot | None:
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

        return self.database.write(work)

    def update(
        self, workspace: str, bot_id: str, apply: Callable[[dict[str, Any] | None], dict[str, Any]]
    ) -> StoredBot:
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

        return self.database.write(work)

    def delete(self, workspace: str, bot_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            return db.execute("DELETE FROM bots WHERE workspace = ? AND id = ?", (workspace, bot_id)).rowcount > 0

        return self.database.write(work)
