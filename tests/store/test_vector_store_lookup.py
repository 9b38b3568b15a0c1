"""Finding one file of a vector store costs the same however many files the store holds (issue 26).

A file batch looks each file up three times; a lookup that walked the namespace's documents made the
fifth batch of 2,000 files take 32 s. Work is counted, not timed: SQLite's virtual-machine steps for the
SQL the store sends (the same at 2,000 files as at 20), and PostgreSQL's plan for it on tables not yet
analyzed (no walk over the namespace's or workspace's documents).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from calypso.config import Settings
from calypso.models import Document, VectorStoreFile
from calypso.services import open_storage
from calypso.store.base import Storage
from calypso.store.vector_stores_sql import SQLVectorStoreStore
from testkit.stores import add_document

STORE = "vs_lookup"


class Recording:
    """A store ``Database`` that remembers the reads sent through it."""

    def __init__(self, database: Any) -> None:
        self.database = database
        self.reads: list[tuple[str, tuple[Any, ...]]] = []

    def rows(self, sql: str, params: Any = ()) -> list[Any]:
        self.reads.append((sql, tuple(params)))
        return list(self.database.rows(sql, params))

    def row(self, sql: str, params: Any = ()) -> Any:
        self.reads.append((sql, tuple(params)))
        return self.database.row(sql, params)

    def write(self, work: Any) -> Any:
        return self.database.write(work)


@pytest.fixture
def settings(tmp_path, database_url: str) -> Settings:
    return Settings(home=tmp_path)


@pytest.fixture
def storage(settings: Settings) -> Iterator[Storage]:
    opened = open_storage(settings)
    yield opened
    opened.close()


def _fill(storage: Storage, start: int, stop: int) -> None:
    """Documents ``start``..``stop`` in the store's namespace, every other one linked under a second file id."""
    for n in range(start, stop):
        doc = Document(f"d{n}", f"file-d{n}", "default", STORE, "a.txt", "text/plain", 1, f"sha{n}", n, 0, 0)
        add_document(storage, doc, [], [], b"x")
        if n % 2:
            storage.vector_stores.link_file(VectorStoreFile("default", STORE, f"file-l{n}", f"d{n}", {}), n)


def _lookups(storage: Storage) -> tuple[SQLVectorStoreStore, Recording]:
    found = storage.vector_stores
    assert isinstance(found, SQLVectorStoreStore)
    recording = Recording(found.database)
    return SQLVectorStoreStore(recording, found.mark), recording


def _sqlite_steps(path: Any, reads: list[tuple[str, tuple[Any, ...]]]) -> int:
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    db = sqlite3.connect(path)
    try:
        db.set_progress_handler(count, 1)
        for sql, params in reads:
            db.execute(sql, params).fetchall()
    finally:
        db.close()
    return steps


def _both_kinds(stores: SQLVectorStoreStore, n: int) -> None:
    """A linked file and a document's own (unlinked) file id, found as the contract says."""
    assert stores.find_file("default", STORE, f"file-l{n}") == VectorStoreFile(
        "default", STORE, f"file-l{n}", f"d{n}", {}
    )
    own = stores.find_file("default", STORE, f"file-d{n - 1}")
    assert own == VectorStoreFile("default", STORE, f"file-d{n - 1}", f"d{n - 1}", {})
    assert stores.find_file("default", "vs_other", f"file-l{n}") is None


@pytest.mark.backends("sqlite")
def test_sqlite_lookup_work_does_not_grow_with_the_store(storage: Storage, settings: Settings) -> None:
    stores, recording = _lookups(storage)
    _fill(storage, 0, 20)
    _both_kinds(stores, 11)
    small = _sqlite_steps(settings.database_path, recording.reads)

    _fill(storage, 20, 2000)
    recording.reads.clear()
    _both_kinds(stores, 1011)
    large = _sqlite_steps(settings.database_path, recording.reads)
    # A walk over the namespace costs steps per document: 100 times the files, about 100 times the steps.
    assert large < 2 * small, (small, large)


def _indexes(plan: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(plan, dict):
        if "Index Name" in plan:
            found.add(plan["Index Name"])
        for value in plan.values():
            found |= _indexes(value)
    elif isinstance(plan, list):
        for value in plan:
            found |= _indexes(value)
    return found


@pytest.mark.backends("postgres")
def test_postgres_lookup_plan_does_not_walk_the_namespace(storage: Storage, database_url: str) -> None:
    import psycopg

    stores, recording = _lookups(storage)
    _fill(storage, 0, 2000)  # tables written just now: autovacuum has not analyzed them
    _both_kinds(stores, 1011)
    assert recording.reads
    with psycopg.connect(database_url, autocommit=True) as db:
        for sql, params in recording.reads:
            plan = db.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchone()
            assert plan is not None
            used = _indexes(json.loads(plan[0]) if isinstance(plan[0], str) else plan[0])
            assert not used & {"documents_by_namespace", "documents_by_workspace"}, (sql, used)


def test_a_file_id_in_another_namespace_or_workspace_is_not_found(storage: Storage) -> None:
    stores, _ = _lookups(storage)
    _fill(storage, 0, 4)
    doc = storage.documents.get_document("default", "d1")
    assert doc is not None
    other = replace(doc, id="w2d1", workspace="w2", file_id="file-w2", sha256="w2")
    add_document(storage, other, [], [], b"y")
    storage.vector_stores.link_file(VectorStoreFile("w2", STORE, "file-l1", "w2d1", {"w": 2}), 1)
    assert stores.find_file("w2", STORE, "file-l1") == VectorStoreFile("w2", STORE, "file-l1", "w2d1", {"w": 2})
    assert stores.find_file("default", STORE, "file-l1") == VectorStoreFile("default", STORE, "file-l1", "d1", {})
    assert stores.find_file("w3", STORE, "file-l1") is None
