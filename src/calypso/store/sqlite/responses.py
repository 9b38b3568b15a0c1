"""Stored Responses in SQLite."""

from __future__ import annotations

import json
import sqlite3

from calypso.models import StoredResponse
from calypso.store.sqlite.database import Database


class SQLiteResponseStore:
    """``calypso.store.base.ResponseStore`` on SQLite."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def save(self, workspace: str, response: StoredResponse, previous_response_id: str | None) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR REPLACE INTO responses (id, workspace, bot_id, created_at, previous_response_id, body, history) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    response.id,
                    workspace,
                    response.bot_id,
                    response.body.get("created_at", 0),
                    previous_response_id,
                    json.dumps(response.body),
                    json.dumps(response.history_record()),
                ),
            )

        self.database.write(work)

    def get(self, workspace: str, response_id: str) -> StoredResponse | None:
        row = self.database.row(
            "SELECT id, bot_id, body, history FROM responses WHERE workspace = ? AND id = ?",
            (workspace, response_id),
        )
        if row is None:
            return None
        return StoredResponse(row[0], row[1], json.loads(row[2]), *StoredResponse.split_history(json.loads(row[3])))

    def delete(self, workspace: str, response_id: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            cursor = db.execute("DELETE FROM responses WHERE workspace = ? AND id = ?", (workspace, response_id))
            return cursor.rowcount > 0

        return self.database.write(work)
