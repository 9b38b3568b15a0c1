"""``VectorStoreStore`` in SQL both backends speak; each backend names its placeholder.

Attributes and metadata are JSON text in both, so the queries stay the same; only the tables'
DDL differs (``sqlite/migrations.py`` 010 and 012, ``postgres/migrations.py`` 008 and 010).

A store's files are its namespace's documents joined with their link rows: a document with link rows is
one file per link (the file ids clients attached), a document without is one file under its own file id.
Listing pages over (document key, file id) in SQL, so a store with many files reads one page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from calypso.errors import NotFound
from calypso.models import FileBatch, Listing, Order, VectorStore, VectorStoreFile

_STORE_COLUMNS = "id, workspace, namespace, name, created_at, last_active_at, metadata, expires_after, description"
FILE_LINKS_SQL = (
    "SELECT d.workspace, d.namespace, l.file_id, d.id, l.attributes FROM vector_store_files l "
    "JOIN documents d ON d.key = l.document_key WHERE d.id IN ({marks}) ORDER BY l.created_at, l.file_id"
)


class _Database(Protocol):
    def rows(self, sql: str, params: Any = ()) -> list[Any]: ...

    def row(self, sql: str, params: Any = ()) -> Any: ...

    def write(self, work: Any) -> Any: ...


def _store(row: Any) -> VectorStore:
    store_id, workspace, namespace, name, created_at, last_active_at, metadata, expires_after, description = row
    return VectorStore(
        id=store_id,
        workspace=workspace,
        namespace=namespace,
        name=name,
        created_at=int(created_at),
        last_active_at=int(last_active_at),
        metadata=json.loads(metadata),
        expires_after=json.loads(expires_after) if expires_after else None,
        description=description,
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
            f"INSERT INTO vector_stores ({_STORE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
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
            store.description,
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
                "SELECT d.status, COUNT(*), COALESCE(SUM(d.bytes), 0) FROM documents d "
                "LEFT JOIN vector_store_files l ON l.document_key = d.key "
                "WHERE d.workspace = ? AND d.namespace = ? GROUP BY d.status"
            ),
            (workspace, namespace),
        )
        return {r[0]: int(r[1]) for r in rows}, sum(int(r[2]) for r in rows)

    def link_file(self, link: VectorStoreFile, created_at: int) -> bool:
        sql = self._sql(
            "INSERT INTO vector_store_files (document_key, vector_store_id, file_id, attributes, created_at) "
            "SELECT key, ?, ?, ?, ? FROM documents WHERE workspace = ? AND id = ? "
            "ON CONFLICT (document_key, file_id) DO UPDATE SET vector_store_id = excluded.vector_store_id, "
            "attributes = excluded.attributes"
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

    def unlink_file(self, workspace: str, document_id: str, file_id: str) -> int:
        delete = self._sql(
            "DELETE FROM vector_store_files WHERE file_id = ? AND document_key = "
            "(SELECT key FROM documents WHERE workspace = ? AND id = ?)"
        )
        count = self._sql(
            "SELECT COUNT(*) FROM vector_store_files l JOIN documents d ON d.key = l.document_key "
            "WHERE d.workspace = ? AND d.id = ?"
        )

        def work(db: Any) -> int:
            db.execute(delete, (file_id, workspace, document_id))
            return int(db.execute(count, (workspace, document_id)).fetchone()[0])

        return int(self.database.write(work))

    def links_of(self, workspace: str, document_id: str) -> list[VectorStoreFile]:
        rows = self.database.rows(
            self._sql(
                "SELECT d.workspace, d.namespace, l.file_id, d.id, l.attributes FROM vector_store_files l "
                "JOIN documents d ON d.key = l.document_key WHERE d.workspace = ? AND d.id = ? "
                "ORDER BY l.created_at, l.file_id"
            ),
            (workspace, document_id),
        )
        return [self._file(r) for r in rows]

    _FILE_ID = "COALESCE(l.file_id, d.file_id)"
    _FILE_SELECT = (
        f"SELECT d.workspace, d.namespace, {_FILE_ID}, d.id, l.attributes, d.key "
        "FROM documents d LEFT JOIN vector_store_files l ON l.document_key = d.key "
    )

    @staticmethod
    def _file(row: Any) -> VectorStoreFile:
        workspace, namespace, file_id, document_id, attributes = tuple(row)[:5]
        return VectorStoreFile(workspace, namespace, file_id, document_id, json.loads(attributes) if attributes else {})

    def files(self, workspace: str, namespace: str) -> list[VectorStoreFile]:
        rows = self.database.rows(
            self._sql(self._FILE_SELECT + f"WHERE d.workspace = ? AND d.namespace = ? ORDER BY d.key, {self._FILE_ID}"),
            (workspace, namespace),
        )
        return [self._file(r) for r in rows]

    def file_links(self, workspace: str, document_ids: Sequence[str]) -> dict[str, VectorStoreFile]:
        rows = [row for sql, params in self.file_links_queries(document_ids) for row in self.database.rows(sql, params)]
        return self.file_links_from(workspace, rows)

    def file_links_queries(self, document_ids: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
        """The statements ``file_links`` runs, 500 ids each (also awaited by ``postgres/search_reads``)."""
        ids = list(document_ids)
        batches = [ids[start : start + 500] for start in range(0, len(ids), 500)]
        # By id alone (ids are unique), the workspace checked here: with ``d.workspace = ?`` in the
        # WHERE, SQLite's planner walked every document of the workspace on each search (245 ms at
        # 200k passages, docs/benchmarks/hybrid.md "Hybrid search at 200k passages").
        return [(self._sql(FILE_LINKS_SQL.format(marks=",".join("?" * len(batch)))), tuple(batch)) for batch in batches]

    def file_links_from(self, workspace: str, rows: Sequence[Any]) -> dict[str, VectorStoreFile]:
        found: dict[str, VectorStoreFile] = {}
        for r in rows:  # a document attached as several files shows as the first attached
            if r[0] == workspace:
                found.setdefault(r[3], self._file(r))
        return found

    # A link with this file id, else a document with no links under its own file id. Each branch has one
    # indexed condition (``vector_store_files_by_file``, the unique ``documents.file_id``) and the workspace
    # and namespace are checked here, not in SQL: given ``d.namespace = ?`` both planners could walk the
    # namespace's documents and probe each one's links instead. SQLite always did (2.3 ms per lookup at
    # 10,000 files, three lookups per file of a batch: 32 s for the fifth batch of 2,000); PostgreSQL did
    # until autovacuum analyzed the growing tables (issue 26). A file id has a link per store it is in,
    # so the rows read are few whatever the store holds.
    _FIND_SQL = (
        "SELECT d.workspace, d.namespace, l.file_id, d.id, l.attributes, d.key FROM vector_store_files l "
        "JOIN documents d ON d.key = l.document_key WHERE l.file_id = ? "
        "UNION ALL "
        "SELECT d.workspace, d.namespace, d.file_id, d.id, NULL, d.key FROM documents d WHERE d.file_id = ? "
        "AND NOT EXISTS (SELECT 1 FROM vector_store_files l WHERE l.document_key = d.key)"
    )

    def _find(self, workspace: str, namespace: str, file_id: str) -> Any:
        rows = self.database.rows(self._sql(self._FIND_SQL), (file_id, file_id))
        mine = [r for r in rows if r[0] == workspace and r[1] == namespace]
        return min(mine, key=lambda r: int(r[5])) if mine else None

    def find_file(self, workspace: str, namespace: str, file_id: str) -> VectorStoreFile | None:
        row = self._find(workspace, namespace, file_id)
        return self._file(row) if row else None

    def list_files(
        self,
        workspace: str,
        namespace: str,
        limit: int,
        after: str | None,
        before: str | None,
        order: Order,
        status: str | None = None,
    ) -> Listing[VectorStoreFile]:
        where = ["d.workspace = ?", "d.namespace = ?"]
        args: list[object] = [workspace, namespace]
        if status is not None:
            where.append("d.status = ?")
            args.append(status)
        forward, backward = ("<", ">") if order == "desc" else (">", "<")
        for cursor, param, sign in ((after, "after", forward), (before, "before", backward)):
            if cursor is None:
                continue
            row = self._find(workspace, namespace, cursor)
            if row is None:
                raise NotFound(f"No file {cursor!r} in this vector store to page from.", param=param)
            where.append(f"(d.key {sign} ? OR (d.key = ? AND {self._FILE_ID} {sign} ?))")
            args.extend((int(row[5]), int(row[5]), row[2]))
        # ``before`` alone: the page just before the cursor, read backwards and then turned round.
        reverse = before is not None and after is None
        direction = "ASC" if (order == "asc") != reverse else "DESC"
        rows = self.database.rows(
            self._sql(
                self._FILE_SELECT + f"WHERE {' AND '.join(where)} "
                f"ORDER BY d.key {direction}, {self._FILE_ID} {direction} LIMIT ?"
            ),
            (*args, limit + 1),
        )
        items = [self._file(r) for r in rows[:limit]]
        if reverse:
            items.reverse()
        return Listing(items, has_more=len(rows) > limit)

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
