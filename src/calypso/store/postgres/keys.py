"""API keys in PostgreSQL: only hashes are stored."""

from __future__ import annotations

from calypso.models import ApiKey
from calypso.store.postgres.database import Database, text

_COLUMNS = "id, workspace, name, prefix, created_at, revoked_at"


class PostgresKeyStore:
    """``calypso.store.base.KeyStore`` on PostgreSQL."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def insert(self, key: ApiKey, key_hash: str) -> None:
        self.database.write(
            lambda db: db.execute(
                "INSERT INTO api_keys (id, workspace, name, key_hash, prefix, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (key.id, key.workspace, text(key.name), key_hash, key.prefix, key.created_at),
            )
        )

    def list_keys(self, workspace: str | None) -> list[ApiKey]:
        if workspace is None:
            rows = self.database.rows(f"SELECT {_COLUMNS} FROM api_keys ORDER BY created_at, id")
        else:
            rows = self.database.rows(
                f"SELECT {_COLUMNS} FROM api_keys WHERE workspace = %s ORDER BY created_at, id", (workspace,)
            )
        return [ApiKey(*row) for row in rows]

    def get(self, key_id: str) -> ApiKey | None:
        row = self.database.row(f"SELECT {_COLUMNS} FROM api_keys WHERE id = %s", (key_id,))
        return ApiKey(*row) if row else None

    def revoke(self, key_id: str, at: int) -> None:
        self.database.write(
            lambda db: db.execute(
                "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL", (at, key_id)
            )
        )

    def workspace_for_hash(self, key_hash: str) -> str | None:
        row = self.database.row(
            "SELECT workspace FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL", (key_hash,)
        )
        return row[0] if row else None
