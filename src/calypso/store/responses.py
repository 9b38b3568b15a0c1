"""Stored Responses: the reply body as sent, and the conversation to continue from."""

from __future__ import annotations

import json
from dataclasses import dataclass

from calypso.store.sqlite import SQLiteStore


@dataclass
class StoredResponse:
    id: str
    bot_id: str
    body: dict
    history: list[dict]  # chat messages up to and including this reply, for previous_response_id


class ResponseStore:
    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def save(self, workspace: str, response: StoredResponse, previous_response_id: str | None) -> None:
        def work(db) -> None:
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
                    json.dumps(response.history),
                ),
            )

        self.store._write(work)

    def get(self, workspace: str, response_id: str) -> StoredResponse | None:
        row = (
            self.store._connection()
            .execute(
                "SELECT id, bot_id, body, history FROM responses WHERE workspace = ? AND id = ?",
                (workspace, response_id),
            )
            .fetchone()
        )
        if row is None:
            return None
        return StoredResponse(row[0], row[1], json.loads(row[2]), json.loads(row[3]))

    def delete(self, workspace: str, response_id: str) -> bool:
        def work(db) -> bool:
            return (
                db.execute("DELETE FROM responses WHERE workspace = ? AND id = ?", (workspace, response_id)).rowcount
                > 0
            )

        return bool(self.store._write(work))
