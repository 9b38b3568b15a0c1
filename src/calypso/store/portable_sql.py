"""``PortableStore`` in SQL both backends speak: a knowledge base's rows out of a snapshot, in through one write.

What differs between SQLite and PostgreSQL is passed in as a ``PortableDialect``: how a JSON column and a
list of text are stored (JSON text in SQLite; json/jsonb and text[] in PostgreSQL), where a document's bytes
live (its own column, or ``document_contents``), how a vector is written and read, how a key comes back
from an insert, how a large read streams, and how a change is recorded on the feed.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from calypso.errors import Conflict
from calypso.store.embeddings_sql import Dialect
from calypso.store.portable import TABLE, TABLES, LoadCounts, Scope, Table

BATCH = 1000  # rows per executemany
DOCUMENT_BATCH = 16  # documents a PostgreSQL cursor fetches at once: each row carries its bytes


@dataclass(frozen=True)
class PortableDialect:
    mark: str
    json_in: Callable[[Any], Any]  # a JSON value as the column takes it
    json_out: Callable[[Any], Any]  # the column's value as a JSON value
    list_in: Callable[[list[str]], Any]
    list_out: Callable[[Any], list[str]]
    flag_in: Callable[[bool], Any]
    content_select: str  # the document's bytes, selected beside its row ``t``
    content_table: bool  # bytes in ``document_contents`` (PostgreSQL) rather than ``documents.content``
    vector_select: str
    vector_param: str
    vector_in: Callable[[np.ndarray], Any]
    vector_out: Callable[[Any], np.ndarray]
    insert_key: Callable[[Any, str, tuple[Any, ...]], int]  # run an INSERT, return the new row's key
    executemany: Callable[[Any, str, list[tuple[Any, ...]]], int]  # rows written
    stream: Callable[[Any, str, tuple[Any, ...], int], Iterator[Any]]
    schema: Callable[[Any], dict[str, set[str]]]
    json_types: Callable[[Any], dict[tuple[str, str], str]]  # (table, column) -> json or jsonb, to cast text to
    record_change: Callable[[Any, str, str, int, str], None]


def _sqlite_schema(db: Any) -> dict[str, set[str]]:
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        name: {r[1] for r in db.execute(f'PRAGMA table_info("{name}")')}
        for name in names
        if not name.startswith("sqlite_")
    }


def _sqlite_many(db: Any, sql: str, rows: list[tuple[Any, ...]]) -> int:
    return int(db.executemany(sql, rows).rowcount)


def sqlite_portable(vectors: Dialect) -> PortableDialect:
    """SQLite's dialect; ``vectors``: how its passage vectors are written and read, and its changes recorded."""
    return PortableDialect(
        mark="?",
        json_in=lambda v: None if v is None else json.dumps(v),
        json_out=lambda v: None if v is None else json.loads(v),
        list_in=json.dumps,
        list_out=lambda v: list(json.loads(v)),
        flag_in=int,
        content_select="t.content",
        content_table=False,
        vector_select="t.vector",
        vector_param="?",
        vector_in=vectors.encode,
        vector_out=vectors.decode,
        insert_key=lambda db, sql, args: int(db.execute(sql, args).lastrowid),
        executemany=_sqlite_many,
        stream=lambda db, sql, args, _batch: iter(db.execute(sql, args)),
        schema=_sqlite_schema,
        json_types=lambda _db: {},
        record_change=vectors.record_change,
    )


_cursors = itertools.count()


def _pg_stream(db: Any, sql: str, args: tuple[Any, ...], batch: int) -> Iterator[Any]:
    with db.cursor(name=f"calypso_portable_{next(_cursors)}") as cursor:
        cursor.itersize = batch
        cursor.execute(sql, args)
        yield from cursor


def _pg_many(db: Any, sql: str, rows: list[tuple[Any, ...]]) -> int:
    cursor = db.cursor()
    cursor.executemany(sql, rows)
    return int(cursor.rowcount)


def _pg_schema(db: Any) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for table, column in db.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
    ):
        found.setdefault(table, set()).add(column)
    return found


def _pg_json_types(db: Any) -> dict[tuple[str, str], str]:
    rows = db.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND data_type IN ('json', 'jsonb')"
    )
    return {(table, column): kind for table, column, kind in rows}


def postgres_portable(vectors: Dialect) -> PortableDialect:
    """PostgreSQL's dialect; ``vectors``: how its passage vectors are written and read, and its changes recorded."""
    return PortableDialect(
        mark="%s",
        json_in=lambda v: None if v is None else json.dumps(v),  # sent untyped: the column's type reads it
        json_out=lambda v: v,  # psycopg returns json as Python values already
        list_in=list,
        list_out=list,
        flag_in=bool,
        content_select="(SELECT c.content FROM document_contents c WHERE c.document_key = t.key)",
        content_table=True,
        vector_select="vector_send(t.vector)",
        vector_param="%s::vector",
        vector_in=vectors.encode,
        vector_out=vectors.decode,
        insert_key=lambda db, sql, args: int(db.execute(sql + " RETURNING key", args).fetchone()[0]),
        executemany=_pg_many,
        stream=_pg_stream,
        schema=_pg_schema,
        json_types=_pg_json_types,
        record_change=vectors.record_change,
    )


def _quoted(column: str) -> str:
    return f'"{column}"' if column == "end" else column


def _select(table: Table, scope: Scope, d: PortableDialect) -> tuple[str, tuple[Any, ...]]:
    """The SELECT of a table's archived columns in the scope, in key order."""
    exprs = []
    for column in table.columns:
        if column == "document":
            exprs.append("d.id")
        elif column == "conversation":
            exprs.append("c.id")
        elif table.name == "chunk_embeddings" and column == "chunk_index":
            exprs.append("k.chunk_index")
        elif column == "vector":
            exprs.append(d.vector_select)
        else:
            exprs.append("t." + _quoted(column))
    if table.name == "documents":
        exprs.append(d.content_select)
    joins, order = "", "t.key"
    where: list[str] = []
    args: list[Any] = []
    owner = "t"
    if table.parent == "document":
        joins, owner = " JOIN documents d ON d.key = t.document_key", "d"
        if table.name == "chunk_embeddings":
            joins += " JOIN chunks k ON k.key = t.chunk_key"
        order = {
            "pages": "d.key, t.number",
            "chunks": "d.key, t.chunk_index",
            "chunk_embeddings": "d.key, k.chunk_index",
            "vector_store_files": "d.key, t.file_id",
        }.get(table.name, "d.key")
    elif table.parent == "conversation":
        joins, owner, order = " JOIN conversations c ON c.key = t.conversation_key", "c", "c.key, t.key"
    elif table.name in ("api_keys", "responses", "vector_store_file_batches"):
        order = "t.created_at, t.id"
    elif table.name in ("bots", "workspace_policies"):
        order = "t.workspace" + (", t.id" if table.name == "bots" else "")
    if scope.workspace is not None:
        where.append(f"{owner}.workspace = ?")
        args.append(scope.workspace)
    if scope.namespace is not None:
        if table.name == "vector_store_file_batches":
            where.append("t.vector_store_id IN (SELECT id FROM vector_stores WHERE workspace = ? AND namespace = ?)")
            args += [scope.workspace, scope.namespace]
        else:
            where.append(f"{owner}.namespace = ?")
            args.append(scope.namespace)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    sql = f"SELECT {', '.join(exprs)} FROM {table.name} t{joins}{clause} ORDER BY {order}"
    return sql.replace("?", d.mark), tuple(args)


class _Reader:
    """``ExportReader`` over one snapshot connection."""

    def __init__(self, db: Any, d: PortableDialect, scope: Scope) -> None:
        self.db, self.d, self.scope = db, d, scope

    def schema(self) -> dict[str, set[str]]:
        return self.d.schema(self.db)

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        spec = TABLE[table]
        if not self.scope.carries(spec):
            return
        sql, args = _select(spec, self.scope, self.d)
        batch = DOCUMENT_BATCH if table == "documents" else 2000
        for raw in self.d.stream(self.db, sql, args, batch):
            values = tuple(raw)
            row = dict(zip(spec.columns, values, strict=False))
            for column in spec.json:
                row[column] = self.d.json_out(row[column])
            for column in spec.lists:
                row[column] = self.d.list_out(row[column])
            for column in spec.flags:
                row[column] = bool(row[column])
            if "vector" in row:
                row["vector"] = self.d.vector_out(row["vector"])
            if table == "documents":
                row["content"] = bytes(values[-1])
            yield row


class PortableSQL:
    """``calypso.store.portable.PortableStore`` over a backend's ``Database``.

    ``snapshot()``: a connection in a read-only transaction (one state of the database); ``write(work,
    needs)``: run ``work(connection)`` in one transaction (``needs``: bytes it may add, where the backend checks).
    """

    def __init__(
        self,
        snapshot: Callable[[], AbstractContextManager[Any]],
        write: Callable[[Callable[[Any], Any], int], Any],
        dialect: PortableDialect,
    ) -> None:
        self._snapshot, self._write, self.d = snapshot, write, dialect

    @contextmanager
    def reading(self, scope: Scope) -> Iterator[_Reader]:
        with self._snapshot() as db:
            yield _Reader(db, self.d, scope)

    def load(
        self, tables: Iterable[tuple[str, Iterable[dict[str, Any]]]], model: tuple[str, int] | None, needs: int = 0
    ) -> LoadCounts:
        def work(db: Any) -> LoadCounts:
            loader = _Loader(db, self.d, model)
            for name, rows in tables:
                loader.table(TABLE[name], rows)
            loader.finish()
            return loader.counts

        result: LoadCounts = self._write(work, needs)
        return result


class _Loader:
    """One import, inside the caller's transaction."""

    def __init__(self, db: Any, d: PortableDialect, model: tuple[str, int] | None) -> None:
        self.db, self.d, self.model = db, d, model
        self.counts = LoadCounts()
        self.documents: dict[str, int] = {}  # id -> key, of the documents this import added
        self.placed: dict[int, tuple[str, str, str]] = {}  # key -> (workspace, namespace, status)
        self.conversations: dict[str, int] = {}
        self.embedded: set[int] = set()
        self._chunk_keys: tuple[int, dict[int, int]] = (-1, {})
        self._json_types = d.json_types(db)

    def _marks(self, table: str, columns: list[str]) -> str:
        """The placeholders of an INSERT's columns: JSON text cast to the column's type where it has one."""
        marks = []
        for column in columns:
            kind = self._json_types.get((table, column))
            if column == "vector":
                marks.append(self.d.vector_param)
            elif kind is not None:
                marks.append(f"CAST({self.d.mark} AS {kind})")
            else:
                marks.append(self.d.mark)
        return ", ".join(marks)

    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.d.mark)

    def _one(self, sql: str, args: tuple[Any, ...]) -> Any:
        return self.db.execute(self._sql(sql), args).fetchone()

    def _count(self, table: str, added: int, present: int) -> None:
        self.counts.added[table] = self.counts.added.get(table, 0) + added
        self.counts.present[table] = self.counts.present.get(table, 0) + present

    def _values(self, table: Table, row: dict[str, Any], skip: tuple[str, ...] = ()) -> tuple[Any, ...]:
        out = []
        for column in table.columns:
            if column in skip:
                continue
            value: Any = row.get(column)
            if column in table.json:
                value = self.d.json_in(value)
            elif column in table.lists:
                value = self.d.list_in(value)
            elif column in table.flags:
                value = self.d.flag_in(bool(value))
            elif column == "vector":
                value = self.d.vector_in(value)
            out.append(value)
        return tuple(out)

    def table(self, table: Table, rows: Iterable[dict[str, Any]]) -> None:
        self._count(table.name, 0, 0)
        if table.name == "documents":
            for row in rows:
                self._document(table, row)
        elif table.name == "conversations":
            for row in rows:
                self._conversation(table, row)
        else:
            self._rows(table, rows)

    def _document(self, table: Table, row: dict[str, Any]) -> None:
        doc_id, workspace = row["id"], row["workspace"]
        existing = self._one("SELECT workspace, sha256 FROM documents WHERE id = ?", (doc_id,))
        if existing is not None:
            if tuple(existing) != (workspace, row["sha256"]):
                raise Conflict(
                    f"The target holds another document under the id {doc_id!r}; nothing was imported. "
                    "Import into an empty knowledge base, or delete that document first."
                )
            self._count("documents", 0, 1)
            return
        other = self._one(
            "SELECT id FROM documents WHERE file_id = ? OR (workspace = ? AND namespace = ? AND sha256 = ?)",
            (row["file_id"], workspace, row["namespace"], row["sha256"]),
        )
        if other is not None:
            raise Conflict(
                f"The target's document {other[0]!r} holds the file id or the bytes of the archive's document "
                f"{doc_id!r}; nothing was imported. Delete it from the target first, or import into an empty one."
            )
        columns = list(table.columns)
        values = self._values(table, row)
        if not self.d.content_table:
            columns.append("content")
            values = (*values, row["content"])
        marks = self._marks("documents", columns)
        key = self.d.insert_key(self.db, f"INSERT INTO documents ({', '.join(columns)}) VALUES ({marks})", values)
        if self.d.content_table:
            self.db.execute(
                self._sql("INSERT INTO document_contents (document_key, content) VALUES (?, ?)"), (key, row["content"])
            )
        self.documents[doc_id] = key
        self.placed[key] = (workspace, row["namespace"], row["status"])
        self._count("documents", 1, 0)

    def _conversation(self, table: Table, row: dict[str, Any]) -> None:
        existing = self._one("SELECT workspace FROM conversations WHERE id = ?", (row["id"],))
        if existing is not None:
            if existing[0] != row["workspace"]:
                raise Conflict(
                    f"Another workspace of the target holds a conversation {row['id']!r}; nothing was imported."
                )
            self._count("conversations", 0, 1)
            return
        marks = self._marks("conversations", list(table.columns))
        sql = f"INSERT INTO conversations ({', '.join(table.columns)}) VALUES ({marks})"
        self.conversations[row["id"]] = self.d.insert_key(self.db, sql, self._values(table, row))
        self._count("conversations", 1, 0)

    def _chunk_key(self, document_key: int, chunk_index: int) -> int | None:
        if self._chunk_keys[0] != document_key:
            found = self.db.execute(
                self._sql("SELECT chunk_index, key FROM chunks WHERE document_key = ?"), (document_key,)
            )
            self._chunk_keys = (document_key, {int(i): int(k) for i, k in found})
        return self._chunk_keys[1].get(chunk_index)

    def _rows(self, table: Table, rows: Iterable[dict[str, Any]]) -> None:
        columns = [c for c in table.columns if c not in ("document", "conversation")]
        if table.name == "chunk_embeddings":
            columns = ["chunk_key", "model", "dimension", "vector"]
        if table.parent == "document":
            columns.insert(0, "document_key")
        elif table.parent == "conversation":
            columns.insert(0, "conversation_key")
        insert = (
            f"INSERT INTO {table.name} ({', '.join(_quoted(c) for c in columns)}) "
            f"VALUES ({self._marks(table.name, columns)}) ON CONFLICT DO NOTHING"
        )
        batch: list[tuple[Any, ...]] = []
        seen, dropped = 0, self.counts.vectors_dropped
        for row in rows:
            seen += 1
            values = self._row(table, row)
            if values is not None:
                batch.append(values)
            if len(batch) >= BATCH:
                self._flush(table, insert, batch)
                batch = []
        self._flush(table, insert, batch)
        dropped = self.counts.vectors_dropped - dropped
        self.counts.present[table.name] = seen - self.counts.added.get(table.name, 0) - dropped

    def _row(self, table: Table, row: dict[str, Any]) -> tuple[Any, ...] | None:
        """The values to insert, or None when the row stays out (its owner was in the target already)."""
        if table.parent == "conversation":
            key = self.conversations.get(row["conversation"])
            return None if key is None else (key, *self._values(table, row, ("conversation",)))
        if table.parent != "document":
            return self._values(table, row)
        key = self.documents.get(row["document"])
        if key is None:
            return None
        if table.name == "embedding_jobs" and self.model is not None and row["model"] != self.model[0]:
            return None  # queued for the target's model in ``finish``
        if table.name == "chunk_embeddings":
            if self.model is not None and (row["model"], int(row["dimension"])) != self.model:
                self.counts.vectors_dropped += 1
                return None
            chunk_key = self._chunk_key(key, int(row["chunk_index"]))
            if chunk_key is None:
                raise Conflict(f"The archive has a vector for a passage its document {row['document']!r} lacks.")
            self.embedded.add(key)
            return (key, chunk_key, row["model"], int(row["dimension"]), self.d.vector_in(row["vector"]))
        return (key, *self._values(table, row, ("document",)))

    def _flush(self, table: Table, insert: str, batch: list[tuple[Any, ...]]) -> None:
        if batch:
            self._count(table.name, self.d.executemany(self.db, insert, batch), 0)

    def finish(self) -> None:
        """Queue what lacks the target model's vectors, then tell every process's indexes what arrived."""
        now = int(time.time())
        for key, (workspace, namespace, status) in self.placed.items():
            if status != "completed":
                continue  # the target's ingestion workers finish it, and record it then
            if self.model is not None and self._lacks_vectors(key, self.model[0]):
                queued = self.db.execute(
                    self._sql(
                        "INSERT INTO embedding_jobs (document_key, model, created_at) VALUES (?, ?, ?) "
                        "ON CONFLICT DO NOTHING"
                    ),
                    (key, self.model[0], now),
                )
                self.counts.queued += int(queued.rowcount == 1)
            self.d.record_change(self.db, workspace, namespace, key, "added")
            if key in self.embedded:
                self.d.record_change(self.db, workspace, namespace, key, "embedded")

    def _lacks_vectors(self, document_key: int, model: str) -> bool:
        return (
            self._one(
                "SELECT 1 FROM chunks c LEFT JOIN chunk_embeddings e ON e.chunk_key = c.key AND e.model = ? "
                "WHERE c.document_key = ? AND e.chunk_key IS NULL LIMIT 1",
                (model, document_key),
            )
            is not None
        )


__all__ = ["TABLES", "PortableDialect", "PortableSQL", "postgres_portable", "sqlite_portable"]
