"""Bots in PostgreSQL: one row per (workspace, id), the validated config as JSON."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from psycopg.types.json import Json

from calypso.models import StoredBot
from calypso.store.postgres.database import Connection, Database, Row

_COLUMNS = "workspace, id, config, created_at, updated_at"


def _row(row: Row) -> StoredBot:
    workspace, bot_id, config, created_at, updated_at = row
    return StoredBot(workspace, bot_id, config, created_at, updated_at)


class PostgresBotStore:
    """``calypso.store.base.BotStore`` on PostgreSQL."""

    def __init__(self, database: Database) -> None:
        self.database = database

    # -- reads -------------------------------------------------------------
    def get(self, workspace: str, bot_id: str) -> StoredBot | None:
        row = self.database.row(f"SELECT {_COLUMNS} FROM bots WHERE workspace = %s AND id = %s", (workspace, bot_id))
        return _row(row) if row else None

    def list_bots(self, workspace: str) -> list[StoredBot]:
        rows = self.database.rows(f"SELECT {_COLUMNS} FROM bots WHERE workspace = %s ORDER BY id", (workspace,))
        return [_row(r) for r in rows]

    def keys(self) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in self.database.rows("SELECT workspace, id FROM bots ORDER BY workspace, id")]

    # -- writes ------------------------------------------------------------
    def insert(self, workspace: str, bot_id: str, config: dict[str, Any]) -> StoredBot | None:
        now = int(time.time())
        # The primary key decides: of two concurrent creates, one inserts and the other gets None.
        row = self.database.write(
            lambda db: db.execute(
                "INSERT INTO bots (workspace, id, config, created_at, updated_at) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (workspace, id) DO NOTHING RETURNING 1",
                (workspace, bot_id, Json(config), now, now),
            ).fetchone()
        )
        return StoredBot(workspace, bot_id, config, now, now) if row else None

    def update(
        self, workspace: str, bot_id: str, apply: Callable[[dict[str, Any] | None], dict[str, Any]]
    ) -> StoredBot:
        now = int(time.time())

        def work(db: Connection) -> StoredBot:
            while True:
                # FOR UPDATE: a concurrent update of the same bot waits here until this one commits.
                row = db.execute(
                    f"SELECT {_COLUMNS} FROM bots WHERE workspace = %s AND id = %s FOR UPDATE", (workspace, bot_id)
                ).fetchone()
                if row is not None:
                    current = _row(row)
                    config = apply(current.config)
                    db.execute(
                        "UPDATE bots SET config = %s, updated_at = %s WHERE workspace = %s AND id = %s",
                        (Json(config), now, workspace, bot_id),
                    )
                    return StoredBot(workspace, bot_id, config, current.created_at, now)
                config = apply(None)
                created = db.execute(
                    "INSERT INTO bots (workspace, id, config, created_at, updated_at) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT (workspace, id) DO NOTHING RETURNING 1",
                    (workspace, bot_id, Json(config), now, now),
                ).fetchone()
                if created:
                    return StoredBot(workspace, bot_id, config, now, now)
                # Another process created the row meanwhile: apply the change to what it stored instead.

        return self.database.write(work)

    def delete(self, workspace: str, bot_id: str) -> bool:
        deleted = self.database.write(
            lambda db: db.execute(
                "DELETE FROM bots WHERE workspace = %s AND id = %s RETURNING 1", (workspace, bot_id)
            ).fetchone()
        )
        return deleted is not None
