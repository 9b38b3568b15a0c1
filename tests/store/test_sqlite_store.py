from __future__ import annotations

import sqlite3

import pytest

from calypso.errors import StorageError
from calypso.models import Chunk, Document, IndexedChunk, Page
from calypso.store.sqlite import SQLiteStorage
from calypso.store.sqlite.migrations import MIGRATIONS


def _document(doc_id: str = "d1", namespace: str = "general", sha: str = "abc") -> Document:
    return Document(
        id=doc_id,
        file_id=f"file-{doc_id}",
        workspace="default",
        namespace=namespace,
        filename="a.txt",
        media_type="text/plain",
        bytes=5,
        sha256=sha,
        created_at=1,
        page_count=1,
        chunk_count=2,
    )


CHUNKS = [Chunk(0, "hello", 0, 5, 1, 1, ("1",)), Chunk(1, "world", 6, 11, 1, 1, ("1",), ("H",))]


def test_add_read_delete_round_trip(tmp_path) -> None:
    storage = SQLiteStorage(tmp_path / "db.sqlite3")
    store = storage.documents
    key, chunk_keys = store.add_document(_document(), [Page(1, "1", 0, 11)], CHUNKS, b"hello world")
    assert len(chunk_keys) == 2
    assert store.get_document("default", "d1").filename == "a.txt"
    assert store.get_document("other-workspace", "d1") is None
    assert [c.chunk.text for c in store.list_chunks("default", "d1", 10, None).items] == ["hello", "world"]
    assert store.get_chunks("default", chunk_keys)[chunk_keys[1]].chunk.heading_path == ("H",)
    assert store.get_chunks("other-workspace", chunk_keys) == {}  # scoped in the query, whatever keys are asked
    assert store.get_documents_by_id("other-workspace", ["d1"]) == {}
    assert store.read_content("default", "d1") == b"hello world"
    assert list(store.namespace_chunks("default", "general")) == [
        (key, [IndexedChunk(chunk_keys[0], "hello", None), IndexedChunk(chunk_keys[1], "world", None)])
    ]
    assert store.delete_document("default", "d1").id == "d1"
    assert store.get_document("default", "d1") is None
    assert store.get_chunks("default", chunk_keys) == {}
    storage.close()


def test_failed_insert_leaves_nothing_behind(tmp_path) -> None:
    storage = SQLiteStorage(tmp_path / "db.sqlite3")
    store = storage.documents
    store.add_document(_document(), [Page(1, "1", 0, 11)], CHUNKS, b"x")
    # Same document id again violates UNIQUE midway through: nothing of the second attempt may remain.
    duplicate_chunks = [Chunk(0, "a", 0, 1, 1, 1, ("1",)), Chunk(0, "b", 0, 1, 1, 1, ("1",))]
    with pytest.raises(StorageError):
        store.add_document(_document("d2", sha="zzz"), [Page(1, "1", 0, 1)], duplicate_chunks, b"y")
    assert store.get_document("default", "d2") is None
    db = sqlite3.connect(tmp_path / "db.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 2
    assert db.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 1
    storage.close()


def test_migrations_run_once(tmp_path) -> None:
    SQLiteStorage(tmp_path / "db.sqlite3").close()
    SQLiteStorage(tmp_path / "db.sqlite3").close()
    db = sqlite3.connect(tmp_path / "db.sqlite3")
    names = [r[0] for r in db.execute("SELECT name FROM migrations ORDER BY rowid")]
    assert names == [name for name, _ in MIGRATIONS]  # each applied once, in order
    assert len(names) == len(set(names)) >= 6
    db.close()


def test_listing_pages_by_cursor(tmp_path) -> None:
    storage = SQLiteStorage(tmp_path / "db.sqlite3")
    store = storage.documents
    for i in range(5):
        store.add_document(_document(f"d{i}", sha=f"s{i}"), [Page(1, "1", 0, 5)], CHUNKS[:1], b"x")
    first = store.list_documents("default", "general", 2, None, "asc")
    assert [d.id for d in first.items] == ["d0", "d1"] and first.has_more
    rest = store.list_documents("default", "general", 10, "d1", "asc")
    assert [d.id for d in rest.items] == ["d2", "d3", "d4"] and not rest.has_more
    assert [d.id for d in store.list_documents("default", None, 2, None, "desc").items] == ["d4", "d3"]
    storage.close()
