"""A search's reads awaited on the server's event loop: the same statements as the stores' own methods
(``postgres/documents.py``'s queries, ``SQLVectorStoreStore.file_links_queries``), run through the database's
asynchronous pool (``Database.open_on_loop``) instead of a pooled connection on a worker thread.

``SearchService`` awaits them when ``ready()``: the pool was opened on the loop it runs on (the server's, at
start). Elsewhere (a thread, the CLI, a test's own loop) it reads through the stores as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from calypso.models import Document, StoredChunk, VectorStoreFile
from calypso.store.documents_sql import passages_from_rows
from calypso.store.postgres.database import Database
from calypso.store.postgres.documents import (
    as_is,
    chunk_positions_query,
    document_keys_from,
    document_keys_query,
    lone_chunks_query,
    passages_query,
    positions_from,
)
from calypso.store.vector_stores_sql import SQLVectorStoreStore


class PostgresSearchReads:
    """``store.base.SearchReads`` on PostgreSQL."""

    def __init__(self, database: Database, files: SQLVectorStoreStore) -> None:
        self.database = database
        self.files = files

    def ready(self) -> bool:
        return self.database.on_this_loop()

    async def document_keys(self, workspace: str, document_ids: Sequence[str]) -> dict[str, int]:
        return document_keys_from(await self.database.rows_async(*document_keys_query(workspace, document_ids)))

    async def get_passages(
        self, workspace: str, keys: Sequence[int], namespace: str | None = None
    ) -> dict[int, tuple[StoredChunk, Document]]:
        return passages_from_rows(await self.database.rows_async(*passages_query(workspace, keys, namespace)), as_is)

    async def chunk_positions(self, keys: Sequence[int]) -> dict[int, tuple[int, int]]:
        return positions_from(await self.database.rows_async(*chunk_positions_query(keys)))

    async def lone_chunks(self, keys: Sequence[int]) -> set[int]:
        return {row[0] for row in await self.database.rows_async(*lone_chunks_query(keys))}

    async def file_links(self, workspace: str, document_ids: Sequence[str]) -> dict[str, VectorStoreFile]:
        rows = []
        for sql, params in self.files.file_links_queries(document_ids):
            rows += await self.database.rows_async(sql, params)
        return self.files.file_links_from(workspace, rows)
