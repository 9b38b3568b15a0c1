"""API keys in SQLite: only hashes are stored."""

from __future__ import annotations

import sqlite3

from calypso.models import ApiKey
from calypso.store.sqlite.database import Database

_COLUMNS = "id, workspace, name, prefix, created_at, revoked_at"


class SQLiteKeyStore:
    """``calypso.store.base.KeyStore`` on SQLite."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def insert(self, key: ApiKey, key_hash: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO api_keys (id, workspace, name, key_hash, prefix, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (key.id, key.workspace, key.name, key_hash, key.prefix, key.created_at),
            )

        self.database.write(work)

    def list_keys(self, workspace: str | None) -> list[ApiKey]:
        sql = f"SELECT {_COLUMNS} FROM api_keys"
        args: tuple[str, ...] = ()
        if workspace is not None:
            sql += " WHERE workspace = ?"
            args = (workspace,)
        return [ApiKey(*row) for row in self.database.rows(sql + " ORDER BY created_at, id", args)]

    def get(self, key_id: str) -> ApiKey | None:
        row = self.database.row(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        return ApiKey(*row) if row else None

    def revoke(self, key_id: str, at: int) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (at, key_id))

        self.database.write(work)

    def workspace_for_hash(self, key_hash: str) -> str | None:
        row = self.database.row("SELECT workspace FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL", (key_hash,))
        return row[0] if row else None
