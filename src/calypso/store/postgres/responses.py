"""Stored Responses in PostgreSQL."""

from __future__ import annotations

from psycopg.types.json import Json

from calypso.models import StoredResponse
from calypso.store.postgres.database import Database


class PostgresResponseStore:
    """``calypso.store.base.ResponseStore`` on PostgreSQL."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def save(self, workspace: str, response: StoredResponse, previous_response_id: str | None) -> None:
        self.database.write(
            lambda db: db.execute(
                "INSERT INTO responses (id, workspace, bot_id, created_at, previous_response_id, body, history) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace, "
                "bot_id = excluded.bot_id, created_at = excluded.created_at, "
                "previous_response_id = excluded.previous_response_id, body = excluded.body, history = excluded.history",
                (
                    response.id,
                    workspace,
                    response.bot_id,
                    response.body.get("created_at", 0),
                    previous_response_id,
                    Json(response.body),
                    Json(response.history_record()),
                ),
            )
        )

    def get(self, workspace: str, response_id: str) -> StoredResponse | None:
        row = self.database.row(
            "SELECT id, bot_id, body, history FROM responses WHERE workspace = %s AND id = %s",
            (workspace, response_id),
        )
        if row is None:
            return None
        return StoredResponse(row[0], row[1], row[2], *StoredResponse.split_history(row[3]))

    def delete(self, workspace: str, response_id: str) -> bool:
        deleted = self.database.write(
            lambda db: db.execute(
                "DELETE FROM responses WHERE workspace = %s AND id = %s RETURNING 1", (workspace, response_id)
            ).fetchone()
        )
        return deleted is not None
