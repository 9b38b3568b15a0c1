"""Sources (synced origins of documents) and the items each brought, in SQL both backends speak.

A source row holds its type, its settings (secrets encrypted by the service before they arrive here), its
schedule, its last sync and the lease of the sync running now. An item row is one thing the source gave
(a page, a file, a message, a blob): its external id, its version, the document it became and what its
connector keeps to ask for it again cheaply (an ETag, the links of a page). JSON is kept as text, times as
Unix seconds in floating point, so the statements are the same on SQLite and PostgreSQL (``mark`` aside).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from calypso.store.shared_sql import D, SharedSQL

_SOURCE_COLUMNS = (
    "id, workspace, namespace, type, settings, secret, schedule_seconds, status, last_sync, created_at, "
    "next_run_at, sync_requested_at, lease_owner, lease_expires_at"
)


@dataclass
class StoredSource:
    """One source as stored; ``secret`` is the encrypted token, never shown."""

    id: str
    workspace: str
    namespace: str
    type: str
    settings: dict[str, Any]
    secret: str | None
    schedule_seconds: int | None
    status: str  # idle | queued | syncing | failed
    last_sync: dict[str, Any] | None
    created_at: int
    next_run_at: float | None = None
    sync_requested_at: float | None = None
    lease_owner: str | None = None
    lease_expires_at: float | None = None


@dataclass
class SourceItem:
    """One item a source brought: its external id, version, document and the connector's own state."""

    external_id: str
    version: str
    document_id: str
    state: dict[str, Any] = field(default_factory=dict)


def _source(row: Any) -> StoredSource:
    return StoredSource(
        id=row[0],
        workspace=row[1],
        namespace=row[2],
        type=row[3],
        settings=json.loads(row[4]),
        secret=row[5],
        schedule_seconds=row[6],
        status=row[7],
        last_sync=json.loads(row[8]) if row[8] else None,
        created_at=int(row[9]),
        next_run_at=row[10],
        sync_requested_at=row[11],
        lease_owner=row[12],
        lease_expires_at=row[13],
    )


class SourceStore(SharedSQL[D]):
    """Sources and their items; the lease a sync runs under (claim, renew, finish)."""

    def __init__(self, database: D, mark: str) -> None:
        self.database = database
        self.mark = mark

    # -- sources ---------------------------------------------------------------
    def insert(self, source: StoredSource) -> None:
        statement = self._sql(
            "INSERT INTO sources (id, workspace, namespace, type, settings, secret, schedule_seconds, status, "
            "last_sync, created_at, next_run_at, sync_requested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        args = (
            source.id,
            source.workspace,
            source.namespace,
            source.type,
            json.dumps(source.settings),
            source.secret,
            source.schedule_seconds,
            source.status,
            None,
            source.created_at,
            source.next_run_at,
            source.sync_requested_at,
        )
        self.database.write(lambda db: db.execute(statement, args))

    def get(self, workspace: str, source_id: str) -> StoredSource | None:
        row = self.database.row(
            self._sql(f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE workspace = ? AND id = ?"), (workspace, source_id)
        )
        return _source(row) if row is not None else None

    def list_sources(self, workspace: str) -> list[StoredSource]:
        rows = self.database.rows(
            self._sql(f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE workspace = ? ORDER BY created_at, id"),
            (workspace,),
        )
        return [_source(row) for row in rows]

    def of_type(self, kind: str) -> list[StoredSource]:
        """Every workspace's sources of one type (the folder watch)."""
        rows = self.database.rows(self._sql(f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE type = ?"), (kind,))
        return [_source(row) for row in rows]

    def delete(self, workspace: str, source_id: str) -> bool:
        """Delete the source and its item rows (not the documents: the service deletes those first)."""
        statement = self._sql("DELETE FROM sources WHERE workspace = ? AND id = ?")
        return bool(self.database.write(lambda db: db.execute(statement, (workspace, source_id)).rowcount == 1))

    def request_sync(self, workspace: str, source_id: str, at: float) -> bool:
        """Ask for a sync (kept until a sync that started after ``at`` ends); False when the source is gone."""
        statement = self._sql(
            "UPDATE sources SET sync_requested_at = ?, status = CASE WHEN lease_owner IS NULL THEN 'queued' "
            "ELSE status END WHERE workspace = ? AND id = ?"
        )
        return bool(self.database.write(lambda db: db.execute(statement, (at, workspace, source_id)).rowcount == 1))

    # -- the lease a sync runs under ---------------------------------------------
    def claim(self, owner: str, lease_seconds: float, source_id: str | None = None) -> StoredSource | None:
        """Lease one due source (asked for, or its schedule's time come) whose lease is free or expired.

        With ``source_id``, only that one, whether due or not. A claim is a conditional update: two claimers
        never both win, on either backend.
        """
        now = time.time()
        if source_id is None:
            rows = self.database.rows(
                self._sql(
                    "SELECT id FROM sources WHERE (sync_requested_at IS NOT NULL OR next_run_at <= ?) "
                    "AND (lease_owner IS NULL OR lease_expires_at < ?) ORDER BY COALESCE(sync_requested_at, "
                    "next_run_at) LIMIT 5"
                ),
                (now, now),
            )
            candidates = [row[0] for row in rows]
        else:
            candidates = [source_id]
        statement = self._sql(
            "UPDATE sources SET lease_owner = ?, lease_expires_at = ?, status = 'syncing' "
            "WHERE id = ? AND (lease_owner IS NULL OR lease_expires_at < ?)"
        )
        for candidate in candidates:
            args = (owner, now + lease_seconds, candidate, now)
            if self.database.write(lambda db, args=args: db.execute(statement, args).rowcount == 1):
                row = self.database.row(self._sql(f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE id = ?"), (candidate,))
                if row is not None:
                    return _source(row)
        return None

    def renew(self, source_id: str, owner: str, lease_seconds: float) -> bool:
        """Extend the lease; False once it is no longer ``owner``'s (or the source is gone)."""
        statement = self._sql("UPDATE sources SET lease_expires_at = ? WHERE id = ? AND lease_owner = ?")
        args = (time.time() + lease_seconds, source_id, owner)
        return bool(self.database.write(lambda db: db.execute(statement, args).rowcount == 1))

    def finish(self, source_id: str, owner: str, last_sync: dict[str, Any], status: str) -> bool:
        """End a sync: record it, free the lease, clear a request it covered, set the next scheduled run."""
        started = float(last_sync["started_at"])
        statement = self._sql(
            "UPDATE sources SET lease_owner = NULL, lease_expires_at = NULL, last_sync = ?, "
            "status = CASE WHEN sync_requested_at IS NOT NULL AND sync_requested_at > ? THEN 'queued' ELSE ? END, "
            "sync_requested_at = CASE WHEN sync_requested_at IS NOT NULL AND sync_requested_at > ? "
            "THEN sync_requested_at ELSE NULL END, "
            "next_run_at = CASE WHEN schedule_seconds IS NULL THEN NULL ELSE ? + schedule_seconds END "
            "WHERE id = ? AND lease_owner = ?"
        )
        args = (json.dumps(last_sync), started, status, started, time.time(), source_id, owner)
        return bool(self.database.write(lambda db: db.execute(statement, args).rowcount == 1))

    # -- items -------------------------------------------------------------------
    def items(self, source_id: str) -> dict[str, SourceItem]:
        rows = self.database.rows(
            self._sql("SELECT external_id, version, document_id, state FROM source_items WHERE source_id = ?"),
            (source_id,),
        )
        return {row[0]: SourceItem(row[0], row[1], row[2], json.loads(row[3]) if row[3] else {}) for row in rows}

    def put_item(self, source_id: str, item: SourceItem) -> bool:
        """Insert or replace one item; False (nothing written) when the source is gone."""
        insert = self._sql(
            "INSERT INTO source_items (source_id, external_id, version, document_id, state, updated_at) "
            "SELECT id, ?, ?, ?, ?, ? FROM sources WHERE id = ? "
            "ON CONFLICT (source_id, external_id) DO UPDATE SET version = excluded.version, "
            "document_id = excluded.document_id, state = excluded.state, updated_at = excluded.updated_at"
        )
        args = (item.external_id, item.version, item.document_id, json.dumps(item.state), time.time(), source_id)
        return bool(self.database.write(lambda db: db.execute(insert, args).rowcount == 1))

    def remove_items(self, source_id: str, external_ids: Sequence[str]) -> None:
        statement = self._sql("DELETE FROM source_items WHERE source_id = ? AND external_id = ?")

        def work(db: Any) -> None:
            for external_id in external_ids:
                db.execute(statement, (source_id, external_id))

        if external_ids:
            self.database.write(work)


SQLITE_TABLES = """
CREATE TABLE sources (
    id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    namespace TEXT NOT NULL,
    type TEXT NOT NULL,
    settings TEXT NOT NULL,
    secret TEXT,
    schedule_seconds INTEGER,
    status TEXT NOT NULL,
    last_sync TEXT,
    created_at INTEGER NOT NULL,
    next_run_at REAL,
    sync_requested_at REAL,
    lease_owner TEXT,
    lease_expires_at REAL
);
CREATE INDEX sources_by_workspace ON sources (workspace, created_at);
CREATE TABLE source_items (
    source_id TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    external_id TEXT NOT NULL,
    version TEXT NOT NULL,
    document_id TEXT NOT NULL,
    state TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (source_id, external_id)
)
"""

POSTGRES_TABLES = SQLITE_TABLES.replace("REAL", "DOUBLE PRECISION").replace("INTEGER", "BIGINT")
