"""``VectorStoreStore`` in SQL both backends speak; each backend names its placeholder.

Attributes and metadata are JSON text in both, so the queries stay the same; only the tables'
DDL differs (``sqlite/migrations.py`` 010, ``postgres/migrations.py`` 008).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from calypso.errors import NotFound
from calypso.models import FileBatch, Listing, Order, VectorStore, VectorStoreFile

_STORE_COLUMNS = "id, workspace, namespace, name, created_at, last_active_at, metadata, expires_after"
FILE_LINKS_SQL = (
    "SELECT d.workspace, d.namespace, l.file_id, d.id, l.attributes FROM vector_store_files l "
    "JOIN documents d ON d.key = l.document_key WHERE d.id IN ({marks})"
)


class _Database(Protocol):
    def rows(self, sql: str, params: Any = ()) -> list[Any]: ...

    def row(self, sql: str, params: Any = ()) -> Any: ...

    def write(self, work: Any) -> Any: ...


def _store(row: Any) -> VectorStore:
    store_id, workspace, namespace, name, created_at, last_active_at, metadata, expires_after = row
    return VectorStore(
        id=store_id,
        workspace=workspace,
        namespace=namespace,
        name=name,
        created_at=int(created_at),
        last_active_at=int(last_active_at),
        metadata=json.loads(metadata),
        expires_after=json.loads(expires_after) if expires_after else None,
    )


class SQLVectorStoreStore:
    """``calypso.store.base.VectorStoreStore`` over a backend's ``Database``."""

    def __init__(self, database: _Database, placeholder: str) -> None:
        self.database = database
        self.mark = placeholder

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.mark)

    def insert(self, store: VectorStore) -> bool:
        sql = self._sql(
            f"INSERT INTO vector_stores ({_STORE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (workspace, id) DO NOTHING"
        )
        args = (
            store.id,
            store.workspace,
            store.namespace,
            store.name,
            store.created_at,
            store.last_active_at,
            json.dumps(store.metadata),
            json.dumps(store.expires_after) if store.expires_after else None,
        )
        return bool(self.database.write(lambda db: db.execute(sql, args).rowcount))

    def get(self, workspace: str, store_id: str) -> VectorStore | None:
        row = self.database.row(
            self._sql(f"SELECT {_STORE_COLUMNS} FROM vector_stores WHERE workspace = ? AND id = ?"),
            (workspace, store_id),
        )
        return _store(row) if row else None

    def _key(self, workspace: str, store_id: str, param: str) -> int:
        row = self.database.row(
            self._sql("SELECT key FROM vector_stores WHERE workspace = ? AND id = ?"), (workspace, store_id)
        )
        if row is None:
            raise NotFound(f"No vector store {store_id!r} to page from; pass an id from a previous page.", param=param)
        return int(row[0])

    def list_stores(
        self, workspace: str, limit: int, after: str | None, before: str | None, order: Order
    ) -> Listing[VectorStore]:
        where: list[str] = ["workspace = ?"]
        args: list[object] = [workspace]
        forward, backward = ("<", ">") if order == "desc" else (">", "<")
        if after is not None:
            where.append(f"key {forward} ?")
            args.append(self._key(workspace, after, "after"))
        reverse = before is not None and after is None
        if before is not None:
            where.append(f"key {backward} ?")
            args.append(self._key(workspace, before, "before"))
        # ``before`` alone: the page just before the cursor, read backwards and then turned round.
        ascending = (order == "asc") != reverse
        rows = self.database.rows(
            self._sql(
                f"SELECT {_STORE_COLUMNS} FROM vector_stores WHERE {' AND '.join(where)} "
                f"ORDER BY key {'ASC' if ascending else 'DESC'} LIMIT ?"
            ),
            (*args, limit + 1),
        )
        items = [_store(r) for r in rows[:limit]]
        if reverse:
            items.reverse()
        return Listing(items, has_more=len(rows) > limit)

    def update(self, store: VectorStore) -> bool:
        sql = self._sql(
            "UPDATE vector_stores SET name = ?, metadata = ?, expires_after = ?, last_active_at = ? "
            "WHERE workspace = ? AND id = ?"
        )
        args = (
            store.name,
            json.dumps(store.metadata),
            json.dumps(store.expires_after) if store.expires_after else None,
            store.last_active_at,
            store.workspace,
            store.id,
        )
        return bool(self.database.write(lambda db: db.execute(sql, args).rowcount))

    def delete(self, workspace: str, store_id: str) -> bool:
        sql = self._sql("DELETE FROM vector_stores WHERE workspace = ? AND id = ?")
        return bool(self.database.write(lambda db: db.execute(sql, (workspace, store_id)).rowcount))

    def usage(self, workspace: str, namespace: str) -> tuple[dict[str, int], int]:
        rows = self.database.rows(
            self._sql(
                "SELECT status, COUNT(*), COALESCE(SUM(bytes), 0) FROM documents "
                "WHERE workspace = ? AND namespace = ? GROUP BY status"
            ),
            (workspace, namespace),
        )
        return {r[0]: int(r[1]) for r in rows}, sum(int(r[2]) for r in rows)

    def link_file(self, link: VectorStoreFile, created_at: int) -> bool:
        sql = self._sql(
            "INSERT INTO vector_store_files (document_key, vector_store_id, file_id, attributes, created_at) "
            "SELECT key, ?, ?, ?, ? FROM documents WHERE workspace = ? AND id = ? "
            "ON CONFLICT (document_key) DO UPDATE SET vector_store_id = excluded.vector_store_id, "
            "file_id = excluded.file_id, attributes = excluded.attributes"
        )
        args = (
            link.vector_store_id,
            link.file_id,
            json.dumps(link.attributes),
            created_at,
            link.workspace,
            link.document_id,
        )
        return bool(self.database.write(lambda db: db.execute(sql, args).rowcount))

    _FILE_SELECT = (
        "SELECT d.workspace, d.namespace, COALESCE(l.file_id, d.file_id), d.id, l.attributes "
        "FROM documents d LEFT JOIN vector_store_files l ON l.document_key = d.key "
    )

    @staticmethod
    def _file(row: Any) -> VectorStoreFile:
        workspace, namespace, file_id, document_id, attributes = row
        return VectorStoreFile(workspace, namespace, file_id, document_id, json.loads(attributes) if attributes else {})

    def files(self, workspace: str, namespace: str) -> list[VectorStoreFile]:
        rows = self.database.rows(
            self._sql(self._FILE_SELECT + "WHERE d.workspace = ? AND d.namespace = ? ORDER BY d.key"),
            (workspace, namespace),
        )
        return [self._file(r) for r in rows]

    def file_links(self, workspace: str, document_ids: Sequence[str]) -> dict[str, VectorStoreFile]:
        found: dict[str, VectorStoreFile] = {}
        ids = list(document_ids)
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            # By id alone (ids are unique), the workspace checked here: with ``d.workspace = ?`` in the
            # WHERE, SQLite's planner walked every document of the workspace on each search (245 ms at
            # 200k passages, docs/benchmarks.md "Hybrid search at 200k passages").
            rows = self.database.rows(self._sql(FILE_LINKS_SQL.format(marks=marks)), tuple(batch))
            found.update((r[3], self._file(r)) for r in rows if r[0] == workspace)
        return found

    def find_file(self, workspace: str, namespace: str, file_id: str) -> VectorStoreFile | None:
        row = self.database.row(
            self._sql(
                self._FILE_SELECT + "WHERE d.workspace = ? AND d.namespace = ? AND COALESCE(l.file_id, d.file_id) = ? "
                "ORDER BY d.key LIMIT 1"
            ),
            (workspace, namespace, file_id),
        )
        return self._file(row) if row else None

    def linked_documents(self, workspace: str, file_id: str) -> list[str]:
        rows = self.database.rows(
            self._sql(
                "SELECT d.id FROM vector_store_files l JOIN documents d ON d.key = l.document_key "
                "WHERE d.workspace = ? AND l.file_id = ? ORDER BY d.key"
            ),
            (workspace, file_id),
        )
        return [r[0] for r in rows]

    def insert_batch(self, batch: FileBatch) -> None:
        sql = self._sql(
            "INSERT INTO vector_store_file_batches (id, workspace, vector_store_id, file_ids, created_at, cancelled) "
            "VALUES (?, ?, ?, ?, ?, ?)"
        )
        args = (
            batch.id,
            batch.workspace,
            batch.vector_store_id,
            json.dumps(batch.file_ids),
            batch.created_at,
            batch.cancelled,
        )
        self.database.write(lambda db: db.execute(sql, args))

    def get_batch(self, workspace: str, vector_store_id: str, batch_id: str) -> FileBatch | None:
        row = self.database.row(
            self._sql(
                "SELECT id, workspace, vector_store_id, file_ids, created_at, cancelled FROM vector_store_file_batches "
                "WHERE workspace = ? AND vector_store_id = ? AND id = ?"
            ),
            (workspace, vector_store_id, batch_id),
        )
        if row is None:
            return None
        return FileBatch(row[0], row[1], row[2], json.loads(row[3]), int(row[4]), bool(row[5]))

    def cancel_batch(self, workspace: str, vector_store_id: str, batch_id: str) -> bool:
        sql = self._sql(
            "UPDATE vector_store_file_batches SET cancelled = ? WHERE workspace = ? AND vector_store_id = ? AND id = ?"
        )
        return bool(
            self.database.write(lambda db: db.execute(sql, (True, workspace, vector_store_id, batch_id)).rowcount)
        )
