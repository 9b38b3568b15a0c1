"""API keys: each belongs to one workspace; only a hash is stored."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from calypso.errors import NotFound
from calypso.store.sqlite import SQLiteStore

KEY_PREFIX = "cal-"


def hash_key(key: str) -> str:
    # Keys are 256-bit random tokens, so a plain SHA-256 is enough (no stretching needed).
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class ApiKey:
    id: str
    workspace: str
    name: str
    prefix: str  # the first characters, to recognise a key in listings
    created_at: int
    revoked_at: int | None

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "object": "api_key",
            "workspace": self.workspace,
            "name": self.name,
            "prefix": self.prefix,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


class KeyStore:
    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def create(self, workspace: str, name: str = "") -> tuple[ApiKey, str]:
        """A new key; the plaintext is returned once and never stored."""
        plaintext = KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(f"key_{secrets.token_hex(8)}", workspace, name, plaintext[:10], int(time.time()), None)

        def work(db) -> None:
            db.execute(
                "INSERT INTO api_keys (id, workspace, name, key_hash, prefix, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (key.id, workspace, name, hash_key(plaintext), key.prefix, key.created_at),
            )

        self.store._write(work)
        return key, plaintext

    def list(self, workspace: str | None = None) -> list[ApiKey]:
        sql = "SELECT id, workspace, name, prefix, created_at, revoked_at FROM api_keys"
        args: tuple = ()
        if workspace is not None:
            sql += " WHERE workspace = ?"
            args = (workspace,)
        return [ApiKey(*row) for row in self.store._connection().execute(sql + " ORDER BY created_at, id", args)]

    def revoke(self, key_id: str) -> ApiKey:
        def work(db) -> int:
            return db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (int(time.time()), key_id)
            ).rowcount

        self.store._write(work)
        for key in self.list():
            if key.id == key_id:
                return key
        raise NotFound(f"No API key {key_id!r}; `calypso keys list` shows them.", param="key_id")

    def workspace_for(self, plaintext: str) -> str | None:
        """The workspace of a live key, or None for an unknown or revoked one."""
        row = (
            self.store._connection()
            .execute("SELECT workspace FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL", (hash_key(plaintext),))
            .fetchone()
        )
        return row[0] if row else None
