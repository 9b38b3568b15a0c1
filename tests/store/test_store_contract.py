"""The storage contract (store/base.py), run on every backend: the same tests, the same answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from postgres_support import RawDatabase

from calypso.config import Settings
from calypso.errors import NotFound, StorageError
from calypso.models import (
    ApiKey,
    Chunk,
    Conversation,
    Document,
    DocumentChange,
    FileBatch,
    IndexedChunk,
    Page,
    StoredMessage,
    StoredResponse,
    VectorStore,
    VectorStoreFile,
)
from calypso.services import open_storage
from calypso.store.base import MAX_JOB_ATTEMPTS, DuplicateContent, Storage
from testkit.stores import add_document


def _document(doc_id: str = "d1", namespace: str = "general", sha: str = "abc", workspace: str = "default") -> Document:
    return Document(
        id=doc_id,
        file_id=f"file-{doc_id}",
        workspace=workspace,
        namespace=namespace,
        filename="a.txt",
        media_type="text/plain",
        bytes=5,
        sha256=sha,
        created_at=1,
        page_count=1,
        chunk_count=2,
        metadata={"z": 1, "a": [1, "two"]},
    )


CHUNKS = [Chunk(0, "hello", 0, 5, 1, 1, ("1",)), Chunk(1, "world", 6, 11, 1, 1, ("1",), ("H",))]


@pytest.fixture
def settings(tmp_path, database_url: str) -> Settings:
    return Settings(home=tmp_path)


@pytest.fixture
def storage(settings: Settings) -> Iterator[Storage]:
    opened = open_storage(settings)
    yield opened
    opened.close()


def test_add_read_delete_round_trip(storage: Storage) -> None:
    store = storage.documents
    key, chunk_keys = add_document(
        storage, _document(), [Page(1, "1", 0, 11)], CHUNKS, b"hello\x00world", ["a1 x", None]
    )
    assert len(chunk_keys) == 2
    doc = store.get_document("default", "d1")
    assert doc is not None and doc.filename == "a.txt" and doc.metadata == {"z": 1, "a": [1, "two"]}
    assert list(doc.metadata) == ["z", "a"]  # key order kept, as the client sent it
    assert store.get_document("other-workspace", "d1") is None
    assert store.get_document_by_file_id("default", "file-d1") == doc
    assert store.get_document_by_file_id("other-workspace", "file-d1") is None
    assert store.find_file("file-d1") == doc
    assert store.find_duplicate("default", "general", "abc") == doc
    assert store.find_duplicate("default", "elsewhere", "abc") is None
    assert store.document_key("default", "d1") == key and store.document_key("other-workspace", "d1") is None
    assert store.document_keys("default", ["d1", "nope"]) == {"d1": key}
    assert store.namespaces("default") == ["general"] and store.namespaces("other-workspace") == []
    assert [c.chunk.text for c in store.list_chunks("default", "d1", 10, None).items] == ["hello", "world"]
    assert [c.chunk.text for c in store.list_chunks("default", "d1", 10, 0).items] == ["world"]
    assert store.list_chunks("other-workspace", "d1", 10, None).items == []
    assert store.get_passages("default", chunk_keys)[chunk_keys[1]][0].chunk == CHUNKS[1]
    assert store.get_passages("default", chunk_keys, "general").keys() == set(chunk_keys)
    assert store.get_passages("other-workspace", chunk_keys) == {}  # scoped in the query, whatever keys are asked
    assert store.get_passages("default", []) == {}
    passages = store.get_passages("default", chunk_keys, "general")
    assert {k: (c.chunk, d) for k, (c, d) in passages.items()} == {
        k: (CHUNKS[i], doc) for i, k in enumerate(chunk_keys)
    }
    assert store.get_passages("default", chunk_keys, "elsewhere") == {}
    assert store.get_passages("other-workspace", chunk_keys) == {}
    assert store.chunk_positions(chunk_keys) == {chunk_keys[0]: (key, 0), chunk_keys[1]: (key, 1)}
    assert store.chunk_positions([*chunk_keys, max(chunk_keys) + 1000]).keys() == set(chunk_keys)
    assert store.chunk_positions([]) == {}
    assert store.get_documents_by_id("default", ["d1"]) == {"d1": doc}
    assert store.get_documents_by_id("other-workspace", ["d1"]) == {}
    assert store.get_pages("default", "d1") == [Page(1, "1", 0, 11)] and store.get_pages("other-workspace", "d1") == []
    assert store.read_content("default", "d1") == b"hello\x00world"
    with pytest.raises(NotFound):
        store.read_content("other-workspace", "d1")
    # The text only where no terms are stored (an index needs one or the other); document_chunks has both.
    assert list(storage.feed.namespace_chunks("default", "general")) == [
        (key, [IndexedChunk(chunk_keys[0], "", "a1 x"), IndexedChunk(chunk_keys[1], "world", None)])
    ]
    assert storage.feed.document_chunks(key) == [
        IndexedChunk(chunk_keys[0], "hello", "a1 x"),
        IndexedChunk(chunk_keys[1], "world", None),
    ]
    assert list(storage.feed.namespace_chunks("other-workspace", "general")) == []
    assert store.delete_document("other-workspace", "d1") is None
    deleted = store.delete_document("default", "d1")
    assert deleted is not None and deleted.id == "d1"
    assert store.delete_document("default", "d1") is None
    assert store.get_document("default", "d1") is None
    assert store.get_passages("default", chunk_keys) == {}
    assert list(storage.feed.namespace_chunks("default", "general")) == []


def test_lookups_by_ids_holding_nul_find_nothing(storage: Storage) -> None:
    # A client can send "\x00" in any id (a model name, a path); PostgreSQL text cannot hold NUL, so the
    # lookup must come back empty, not fail as a server error.
    store = storage.documents
    add_document(storage, _document(), [Page(1, "1", 0, 11)], CHUNKS, b"x")
    assert store.get_document("default", "d1\x00") is None
    assert store.get_document_by_file_id("default\x00", "file-d1") is None
    assert store.document_keys("default", ["d1\x00", "d1"]).keys() == {"d1"}
    assert storage.bots.get("default", "calypso\x00bot") is None
    assert storage.conversations.get("default", "conv_\x00") is None
    assert storage.responses.get("default", "resp_\x00") is None


def test_duplicate_bytes_are_refused_naming_the_existing_document(storage: Storage) -> None:
    store = storage.documents
    add_document(storage, _document(), [Page(1, "1", 0, 11)], CHUNKS, b"x")
    with pytest.raises(DuplicateContent) as refused:
        add_document(storage, _document("d2"), [Page(1, "1", 0, 11)], CHUNKS, b"x")
    assert refused.value.existing.id == "d1"
    assert store.get_document("default", "d2") is None
    # The same bytes in another namespace or workspace are another document.
    add_document(storage, _document("d3", namespace="other"), [], CHUNKS, b"x")
    add_document(storage, _document("d4", workspace="w2"), [], CHUNKS, b"x")


def test_concurrent_identical_adds_store_one_document(storage: Storage) -> None:
    # Straight at the store (no service lock in between): the database itself must decide.
    barrier, outcomes = threading.Barrier(6), []

    def add(n: int) -> None:
        barrier.wait()
        try:
            add_document(storage, _document(f"race{n}", sha="same"), [Page(1, "1", 0, 11)], CHUNKS, b"x")
            outcomes.append(f"race{n}")
        except DuplicateContent as duplicate:
            outcomes.append(f"duplicate of {duplicate.existing.id}")

    threads = [threading.Thread(target=add, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if not o.startswith("duplicate")]
    assert len(winners) == 1 and outcomes.count(f"duplicate of {winners[0]}") == 5
    assert [d.id for d in storage.documents.list_documents("default", None, 10, None, "asc").items] == winners


def test_failed_insert_leaves_nothing_behind(storage: Storage, raw: RawDatabase) -> None:
    store = storage.documents
    add_document(storage, _document(), [Page(1, "1", 0, 11)], CHUNKS, b"x")
    # Two chunks with the same index violate UNIQUE midway through: nothing of the second attempt may remain.
    duplicate_chunks = [Chunk(0, "a", 0, 1, 1, 1, ("1",)), Chunk(0, "b", 0, 1, 1, 1, ("1",))]
    with pytest.raises(StorageError):
        add_document(storage, _document("d2", sha="zzz"), [Page(1, "1", 0, 1)], duplicate_chunks, b"y")
    assert store.get_document("default", "d2") is None
    assert raw.scalar("SELECT COUNT(*) FROM chunks") == 2
    assert raw.scalar("SELECT COUNT(*) FROM documents") == 1
    assert raw.scalar("SELECT COUNT(*) FROM pages") == 1


def test_change_feed_records_adds_and_deletes_in_commit_order(storage: Storage) -> None:
    store = storage.documents
    start = storage.feed.change_position()
    key1, chunk_keys = add_document(storage, _document("d1"), [Page(1, "1", 0, 11)], CHUNKS, b"1", ["a1 x", None])
    key2, _ = add_document(storage, _document("d2", namespace="other", sha="2", workspace="w2"), [], CHUNKS, b"2")
    with pytest.raises(DuplicateContent):  # a refused write leaves no trace in the feed
        add_document(storage, _document("d3"), [], CHUNKS, b"1")
    store.delete_document("default", "d1")
    assert store.delete_document("default", "d1") is None  # nothing deleted, nothing recorded
    changes = storage.feed.changes_since(start)
    assert [(c.workspace, c.namespace, c.document_key, c.kind) for c in changes] == [
        ("default", "general", key1, "added"),
        ("w2", "other", key2, "added"),
        ("default", "general", key1, "deleted"),
    ]
    assert [c.seq for c in changes] == sorted(c.seq for c in changes) and changes[0].seq > start
    assert storage.feed.change_position() == changes[-1].seq
    assert storage.feed.changes_since(changes[0].seq, limit=1) == [changes[1]]
    assert storage.feed.changes_since(changes[-1].seq) == []
    assert isinstance(changes[0], DocumentChange)
    assert storage.feed.document_chunks(key2) == [
        IndexedChunk(k, c.text, None)
        for k, c in zip([c.key for c in store.list_chunks("w2", "d2", 10, None).items], CHUNKS, strict=True)
    ]
    assert storage.feed.document_chunks(key1) == []  # deleted: gone
    del chunk_keys


def test_concurrent_writers_never_let_a_reader_skip_a_change(storage: Storage) -> None:
    # Writers race; a reader follows the feed the whole time. Whatever it saw last, it must later see
    # every other change: seq order is commit order, so no change commits behind a position already read.
    stop, seen = threading.Event(), []
    start = storage.feed.change_position()

    def follow() -> None:
        position = start
        while not stop.is_set():
            for change in storage.feed.changes_since(position):
                seen.append(change.seq)
                position = change.seq

    def write(n: int) -> None:
        for i in range(8):
            add_document(storage, _document(f"w{n}-{i}", sha=f"{n}-{i}"), [], CHUNKS, b"x")

    reader = threading.Thread(target=follow)
    reader.start()
    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    reader.join()
    everything = [c.seq for c in storage.feed.changes_since(start)]
    assert len(everything) == 32
    final = [c.seq for c in storage.feed.changes_since(seen[-1] if seen else start)]
    assert seen + final == everything


def test_migrations_run_once_in_order(settings: Settings, raw: RawDatabase) -> None:
    open_storage(settings).close()
    open_storage(settings).close()
    if raw.postgres:
        from calypso.store.postgres.migrations import MIGRATIONS
    else:
        from calypso.store.sqlite.migrations import MIGRATIONS  # type: ignore[assignment]
    names = [row[0] for row in raw.execute("SELECT name FROM migrations ORDER BY applied_at, name")]
    assert names == [name for name, _ in MIGRATIONS]  # each applied once, in order
    assert len(names) == len(set(names)) >= 5


# -- ingestion jobs (JobStore) ---------------------------------------------------------------------

PAGES = [Page(1, "1", 0, 11)]
TERMS: list[str | None] = ["a1 x", None]


def _submit(storage: Storage, doc_id: str = "j1", sha: str = "jobsha") -> int:
    storage.jobs.submit(_document(doc_id, sha=sha), b"raw bytes")
    key = storage.documents.document_key("default", doc_id)
    assert key is not None
    return key


def test_submit_stores_an_in_progress_document_with_its_bytes_and_a_queued_job(storage: Storage) -> None:
    start = storage.feed.change_position()
    stored = storage.jobs.submit(_document("j1", sha="s"), b"raw bytes")
    assert (stored.status, stored.page_count, stored.chunk_count, stored.last_error) == ("in_progress", 0, 0, None)
    doc = storage.documents.get_document("default", "j1")
    assert doc == stored
    assert [d.id for d in storage.documents.list_documents("default", None, 10, None, "asc").items] == ["j1"]
    assert storage.documents.read_content("default", "j1") == b"raw bytes"
    job = storage.jobs.jobs("default", ["j1", "nope"])["j1"]
    assert (job.attempts, job.lease_owner, job.pages_parsed, job.passages_written) == (0, None, 0, 0)
    assert storage.jobs.jobs("other-workspace", ["j1"]) == {}
    with pytest.raises(DuplicateContent) as refused:  # in progress counts as present
        storage.jobs.submit(_document("j2", sha="s"), b"raw bytes")
    assert refused.value.existing.id == "j1"
    assert storage.feed.changes_since(start) == []  # not searchable yet


def test_claim_progress_and_complete(storage: Storage) -> None:
    key = _submit(storage)
    start = storage.feed.change_position()
    job = storage.jobs.claim("w1", 30)
    assert job is not None and job.document_key == key and job.document.id == "j1"
    assert (job.attempts, job.lease_owner) == (1, "w1")
    assert storage.jobs.claim("w2", 30) is None  # leased: nobody else gets it
    assert storage.jobs.claim_document(key, "w2", 30) is None
    assert storage.jobs.renew(key, "w1", 30) and not storage.jobs.renew(key, "w2", 30)
    assert storage.jobs.report_progress(key, "w1", 1, 2) and not storage.jobs.report_progress(key, "w2", 9, 9)
    seen = storage.jobs.jobs("default", ["j1"])["j1"]
    assert (seen.pages_parsed, seen.passages_written, seen.lease_owner) == (1, 2, "w1")

    assert storage.jobs.complete(key, "w2", replace(job.document, title="T"), PAGES, CHUNKS, TERMS) is None
    chunk_keys = storage.jobs.complete(
        key, "w1", replace(job.document, title="T", media_type="text/x"), PAGES, CHUNKS, TERMS
    )
    assert chunk_keys is not None and len(chunk_keys) == 2
    doc = storage.documents.get_document("default", "j1")
    assert doc is not None
    assert (doc.status, doc.page_count, doc.chunk_count, doc.title, doc.media_type) == (
        "completed",
        1,
        2,
        "T",
        "text/x",
    )
    assert [c.chunk.text for c in storage.documents.list_chunks("default", "j1", 10, None).items] == ["hello", "world"]
    assert storage.jobs.jobs("default", ["j1"]) == {}
    assert [(c.document_key, c.kind) for c in storage.feed.changes_since(start)] == [(key, "added")]
    assert storage.jobs.claim("w1", 30) is None
    assert storage.jobs.complete(key, "w1", job.document, PAGES, CHUNKS, TERMS) is None  # ended: nothing twice


def _race_worker_against_removal(storage: Storage, round_: int, chunks: list[Chunk]) -> tuple[int, list[Exception]]:
    """A worker completes (or fails) a job at the same instant as the document is deleted (or cancelled)."""
    doc_id = f"race{round_}"
    key = _submit(storage, doc_id, sha=doc_id)
    job = storage.jobs.claim_document(key, "w1", 30)
    assert job is not None
    barrier, errors = threading.Barrier(2), []

    def finish() -> None:
        barrier.wait()
        try:
            if round_ % 3 == 2:
                storage.jobs.fail(key, "w1", {"code": "invalid_file", "message": "bad"})
            else:
                storage.jobs.complete(key, "w1", job.document, PAGES, chunks, [None] * len(chunks))
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    def remove() -> None:
        barrier.wait()
        try:
            if round_ % 2:
                storage.jobs.cancel("default", doc_id)
            else:
                storage.documents.delete_document("default", doc_id)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=finish), threading.Thread(target=remove)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return key, errors


def test_deletes_and_cancels_racing_workers_never_deadlock(storage: Storage) -> None:
    # A delete locks the document, then its job (cascade); complete, fail and cancel must take the same
    # order, or PostgreSQL kills one of the two as a deadlock (a 503 to the client that deleted).
    many = [Chunk(i, f"passage {i}", 0, 1, 1, 1, ("1",)) for i in range(400)]
    for round_ in range(12):
        key, errors = _race_worker_against_removal(storage, round_, many)
        assert errors == []
        doc = storage.documents.get_document("default", f"race{round_}")
        # Whoever went first, the outcome is whole: gone, or ended with all its passages or none.
        if doc is not None and doc.status == "completed":
            assert len(storage.feed.document_chunks(key)) == len(many)
        elif doc is not None:
            assert doc.status in ("cancelled", "failed") and storage.feed.document_chunks(key) == []


def test_two_claimers_racing_for_one_job_exactly_one_wins(storage: Storage) -> None:
    key = _submit(storage)
    barrier, won = threading.Barrier(4), []

    def claim(n: int) -> None:
        barrier.wait()
        job = storage.jobs.claim(f"w{n}", 30)
        if job is not None:
            won.append(job.lease_owner)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert storage.jobs.jobs("default", ["j1"])["j1"].lease_owner == won[0]
    assert storage.jobs.claim_document(key, "late", 30) is None


def test_an_expired_lease_is_claimed_again_and_the_old_worker_writes_nothing(
    storage: Storage, raw: RawDatabase
) -> None:
    key = _submit(storage)
    first = storage.jobs.claim("dead", 0.2)
    assert first is not None
    time.sleep(0.4)
    second = storage.jobs.claim("alive", 30)
    assert second is not None and second.document_key == key and second.attempts == 2
    assert not storage.jobs.renew(key, "dead", 30)
    assert not storage.jobs.report_progress(key, "dead", 5, 5)
    assert storage.jobs.complete(key, "dead", first.document, PAGES, CHUNKS, TERMS) is None
    assert not storage.jobs.fail(key, "dead", {"code": "server_error", "message": "x"})
    assert raw.scalar("SELECT COUNT(*) FROM chunks") == 0 and raw.scalar("SELECT COUNT(*) FROM pages") == 0
    assert storage.jobs.complete(key, "alive", second.document, PAGES, CHUNKS, TERMS) is not None
    assert raw.scalar("SELECT COUNT(*) FROM chunks") == 2


def test_submit_claimed_stores_the_job_leased_to_its_submitter(storage: Storage, raw: RawDatabase) -> None:
    job = storage.jobs.submit_claimed(_document("j1", sha="s"), b"raw bytes", "inline", 0.2)
    key = storage.documents.document_key("default", "j1")
    assert (job.document_key, job.attempts, job.lease_owner, job.document.status) == (key, 1, "inline", "in_progress")
    assert storage.documents.read_content("default", "j1") == b"raw bytes"
    seen = storage.jobs.jobs("default", ["j1"])["j1"]
    assert (seen.attempts, seen.lease_owner, seen.pages_parsed, seen.passages_written) == (1, "inline", 0, 0)
    assert storage.jobs.claim("w2", 30) is None  # leased from the start: no worker takes it
    with pytest.raises(DuplicateContent) as refused:
        storage.jobs.submit_claimed(_document("j2", sha="s"), b"raw bytes", "other", 30)
    assert refused.value.existing.id == "j1"
    time.sleep(0.4)  # the submitter died: its lease runs out and a worker takes the job, a second attempt
    again = storage.jobs.claim("w2", 30)
    assert again is not None and again.document_key == key and again.attempts == 2
    assert storage.jobs.complete(key, "inline", job.document, PAGES, CHUNKS, TERMS) is None
    assert raw.scalar("SELECT COUNT(*) FROM chunks") == 0


def test_release_gives_the_job_back_without_counting_the_attempt(storage: Storage) -> None:
    key = _submit(storage)
    assert storage.jobs.claim("w1", 30) is not None
    storage.jobs.release(key, "w1")
    again = storage.jobs.claim_document(key, "w2", 30)
    assert again is not None and again.attempts == 1 and again.lease_owner == "w2"


def test_a_job_that_keeps_killing_workers_fails_with_server_error(storage: Storage) -> None:
    _submit(storage)
    for attempt in range(1, MAX_JOB_ATTEMPTS + 1):
        job = storage.jobs.claim(f"w{attempt}", 0.05)
        assert job is not None and job.attempts == attempt
        time.sleep(0.15)
    assert storage.jobs.claim("last", 30) is None
    doc = storage.documents.get_document("default", "j1")
    assert doc is not None and doc.status == "failed"
    assert doc.last_error is not None and doc.last_error["code"] == "server_error"
    assert storage.jobs.jobs("default", ["j1"]) == {}


def test_fail_keeps_the_document_failed_and_a_new_upload_replaces_it(storage: Storage) -> None:
    key = _submit(storage)
    assert storage.jobs.claim("w1", 30) is not None
    error = {"code": "invalid_file", "message": "corrupt", "error_code": "unprocessable_document"}
    assert storage.jobs.fail(key, "w1", error)
    doc = storage.documents.get_document("default", "j1")
    assert doc is not None and doc.status == "failed" and doc.last_error == error
    assert storage.jobs.jobs("default", ["j1"]) == {} and storage.jobs.claim("w1", 30) is None
    storage.jobs.submit(_document("j2", sha="jobsha"), b"raw bytes")  # same bytes: the failed copy goes
    assert storage.documents.get_document("default", "j1") is None
    replaced = storage.documents.get_document("default", "j2")
    assert replaced is not None and replaced.status == "in_progress"


def test_cancel_ends_the_job_and_a_later_complete_writes_nothing(storage: Storage, raw: RawDatabase) -> None:
    key = _submit(storage)
    job = storage.jobs.claim("w1", 30)
    assert job is not None
    assert storage.jobs.cancel("other-workspace", "j1") is None
    cancelled = storage.jobs.cancel("default", "j1")
    assert cancelled is not None and cancelled.status == "cancelled"
    assert storage.jobs.complete(key, "w1", job.document, PAGES, CHUNKS, TERMS) is None
    assert raw.scalar("SELECT COUNT(*) FROM chunks") == 0
    assert storage.jobs.cancel("default", "j1") is None  # ended already
    doc = storage.documents.get_document("default", "j1")
    assert doc is not None and doc.status == "cancelled"
    add_document(storage, _document("done", sha="other"), PAGES, CHUNKS, b"z")
    assert storage.jobs.cancel("default", "done") is None  # a completed document has nothing to cancel


def test_deleting_an_in_progress_document_drops_its_job(storage: Storage, raw: RawDatabase) -> None:
    key = _submit(storage)
    job = storage.jobs.claim("w1", 30)
    assert job is not None
    assert storage.documents.delete_document("default", "j1") is not None
    assert raw.scalar("SELECT COUNT(*) FROM ingest_jobs") == 0
    assert storage.jobs.complete(key, "w1", job.document, PAGES, CHUNKS, TERMS) is None
    assert raw.scalar("SELECT COUNT(*) FROM chunks") == 0 and raw.scalar("SELECT COUNT(*) FROM documents") == 0


def test_listing_pages_by_cursor(storage: Storage) -> None:
    store = storage.documents
    for i in range(5):
        add_document(storage, _document(f"d{i}", sha=f"s{i}"), [Page(1, "1", 0, 5)], CHUNKS[:1], b"x")
    first = store.list_documents("default", "general", 2, None, "asc")
    assert [d.id for d in first.items] == ["d0", "d1"] and first.has_more
    rest = store.list_documents("default", "general", 10, "d1", "asc")
    assert [d.id for d in rest.items] == ["d2", "d3", "d4"] and not rest.has_more
    assert [d.id for d in store.list_documents("default", None, 2, None, "desc").items] == ["d4", "d3"]
    assert store.list_documents("other-workspace", None, 10, None, "asc").items == []
    with pytest.raises(NotFound):
        store.list_documents("other-workspace", None, 10, "d1", "asc")


def test_bots(storage: Storage) -> None:
    bots = storage.bots
    created = bots.insert("w1", "helper", {"id": "helper", "namespace": "a"})
    assert created is not None and created.config == {"id": "helper", "namespace": "a"}
    assert bots.insert("w1", "helper", {"id": "helper"}) is None  # taken
    assert bots.insert("w2", "helper", {"id": "helper", "namespace": "b"}) is not None
    assert bots.get("w1", "helper").config["namespace"] == "a"  # type: ignore[union-attr]
    assert bots.get("w3", "helper") is None
    assert [b.id for b in bots.list_bots("w1")] == ["helper"] and bots.list_bots("w3") == []
    assert sorted(bots.keys()) == [("w1", "helper"), ("w2", "helper")]
    updated = bots.update("w1", "helper", lambda config: {**(config or {}), "namespace": "c"})
    assert updated.config == {"id": "helper", "namespace": "c"} and updated.created_at == created.created_at
    made = bots.update("w1", "new", lambda config: {"id": "new", "was": config})
    assert made.config == {"id": "new", "was": None}

    def refuse(config: object) -> dict:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        bots.update("w1", "helper", refuse)
    assert bots.get("w1", "helper").config["namespace"] == "c"  # type: ignore[union-attr]
    assert bots.delete("w1", "helper") and not bots.delete("w1", "helper")
    assert bots.get("w2", "helper") is not None


def test_concurrent_bot_updates_lose_none(storage: Storage) -> None:
    storage.bots.insert("w", "counter", {"n": 0})
    barrier = threading.Barrier(4)

    def bump() -> None:
        barrier.wait()
        for _ in range(10):
            storage.bots.update("w", "counter", lambda config: {"n": (config or {"n": 0})["n"] + 1})

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert storage.bots.get("w", "counter").config == {"n": 40}  # type: ignore[union-attr]


def test_conversations(storage: Storage) -> None:
    conversations = storage.conversations
    for i in range(3):
        conversations.create(Conversation(f"c{i}", "w1", "bot", 10 + i, {"i": i}))
    assert conversations.get("w1", "c1") == Conversation("c1", "w1", "bot", 11, {"i": 1})
    assert conversations.get("w2", "c1") is None
    page = conversations.list_conversations("w1", 2, None, "desc")
    assert [c.id for c in page.items] == ["c2", "c1"] and page.has_more
    assert [c.id for c in conversations.list_conversations("w1", 5, "c1", "desc").items] == ["c0"]
    assert conversations.list_conversations("w2", 5, None, "asc").items == []
    with pytest.raises(NotFound):
        conversations.list_conversations("w2", 5, "c1", "asc")
    user = StoredMessage("m1", "user", "Where?\x00", None, 20)
    answer = StoredMessage("m2", "assistant", "There [1].", [{"source_index": 1}], 21, {"finish_reason": "stop"})
    assert conversations.add_turn("w1", "c0", [user, answer])
    assert not conversations.add_turn("w2", "c0", [replace(user, id="m3")])  # another workspace's: gone
    stored = conversations.messages("w1", "c0")
    assert [m.id for m in stored] == ["m1", "m2"] and stored[1] == answer
    assert stored[0].content in ("Where?\x00", "Where?\ufffd")  # PostgreSQL text holds no NUL
    assert conversations.messages("w2", "c0") == []
    # OpenAI's Conversations API: metadata replaced, one item (message) deleted; never another workspace's.
    assert not conversations.update_metadata("w2", "c0", {"x": "y"})
    assert conversations.update_metadata("w1", "c0", {"topic": "refunds"})
    assert conversations.get("w1", "c0").metadata == {"topic": "refunds"}  # type: ignore[union-attr]
    assert not conversations.delete_message("w2", "c0", "m1") and not conversations.delete_message("w1", "c1", "m1")
    assert conversations.delete_message("w1", "c0", "m1") and not conversations.delete_message("w1", "c0", "m1")
    assert [m.id for m in conversations.messages("w1", "c0")] == ["m2"]
    assert not conversations.delete("w2", "c0")
    assert conversations.delete("w1", "c0") and conversations.get("w1", "c0") is None
    assert conversations.messages("w1", "c0") == []
    assert not conversations.add_turn("w1", "c0", [replace(user, id="m4")])


def test_responses_keys_and_policies(storage: Storage) -> None:
    responses = storage.responses
    items = [{"type": "message", "id": "msg_1", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    first = StoredResponse("resp_1", "bot", {"id": "resp_1", "created_at": 5, "output": []}, [{"role": "user"}], items)
    responses.save("w1", first, None)
    assert responses.get("w1", "resp_1") == first and responses.get("w2", "resp_1") is None
    second = replace(first, body={"id": "resp_1", "created_at": 6})
    responses.save("w1", second, "resp_0")  # insert or replace by id
    assert responses.get("w1", "resp_1") == second
    assert not responses.delete("w2", "resp_1") and responses.delete("w1", "resp_1")
    assert responses.get("w1", "resp_1") is None

    keys = storage.keys
    keys.insert(ApiKey("key_a", "w1", "laptop", "cal-abc", 1, None), "hash-a")
    keys.insert(ApiKey("key_b", "w2", "", "cal-def", 2, None), "hash-b")
    assert [k.id for k in keys.list_keys(None)] == ["key_a", "key_b"]
    assert [k.id for k in keys.list_keys("w2")] == ["key_b"]
    assert keys.workspace_for_hash("hash-a") == "w1" and keys.workspace_for_hash("nope") is None
    keys.revoke("key_a", 100)
    keys.revoke("key_a", 200)
    assert keys.get("key_a").revoked_at == 100  # type: ignore[union-attr]
    assert keys.workspace_for_hash("hash-a") is None and keys.get("key_zz") is None

    policies = storage.policies
    assert policies.sources_policy("w1") is None
    policies.set_sources_policy("w1", "hidden")
    policies.set_sources_policy("w1", "visible")
    policies.set_sources_policy("w2", "hidden")
    assert policies.sources_policy("w1") == "visible" and policies.sources_policy("w2") == "hidden"


# -- vector stores -------------------------------------------------------------------------------


def _vector_store(store_id: str, workspace: str = "default", created_at: int = 1) -> VectorStore:
    return VectorStore(store_id, workspace, store_id, f"name {store_id}", created_at, created_at, {"k": "v"})


def test_vector_stores_round_trip_and_page_in_both_directions(storage: Storage) -> None:
    stores = storage.vector_stores
    for n in range(5):
        assert stores.insert(_vector_store(f"vs_{n}", created_at=n))
    assert not stores.insert(_vector_store("vs_0"))  # the id is taken
    assert stores.insert(_vector_store("vs_0", workspace="w2"))  # in its own workspace
    assert stores.get("default", "vs_3") == _vector_store("vs_3", created_at=3)
    assert stores.get("w2", "vs_3") is None

    page = stores.list_stores("default", 2, None, None, "desc")
    assert [s.id for s in page.items] == ["vs_4", "vs_3"] and page.has_more
    page = stores.list_stores("default", 2, "vs_3", None, "desc")
    assert [s.id for s in page.items] == ["vs_2", "vs_1"] and page.has_more
    page = stores.list_stores("default", 2, None, "vs_1", "desc")
    assert [s.id for s in page.items] == ["vs_3", "vs_2"] and page.has_more
    page = stores.list_stores("default", 10, None, None, "asc")
    assert [s.id for s in page.items] == [f"vs_{n}" for n in range(5)] and not page.has_more
    with pytest.raises(NotFound):
        stores.list_stores("w2", 2, "vs_3", None, "desc")

    changed = replace(
        _vector_store("vs_1"), name=None, metadata={}, expires_after={"anchor": "last_active_at", "days": 3}
    )
    assert stores.update(changed) and stores.get("default", "vs_1") == changed
    assert not stores.update(replace(changed, workspace="w3"))
    assert stores.delete("default", "vs_1") and not stores.delete("default", "vs_1")
    assert stores.get("default", "vs_1") is None and stores.get("w2", "vs_0") is not None


def test_file_links_carry_attributes_and_go_with_their_document(storage: Storage) -> None:
    documents, stores = storage.documents, storage.vector_stores
    add_document(storage, _document("d1", namespace="vs_a"), [], CHUNKS, b"1")
    add_document(storage, _document("d2", namespace="vs_a", sha="2"), [], CHUNKS, b"22")
    add_document(storage, _document("d3", namespace="vs_a", sha="3", workspace="w2"), [], CHUNKS, b"3")
    link = VectorStoreFile("default", "vs_a", "file-orig", "d1", {"year": 2024, "draft": False, "tag": "x"})
    assert stores.link_file(link, 10)
    assert not stores.link_file(replace(link, workspace="w2"), 10)  # d1 is not w2's

    assert stores.files("default", "vs_a") == [link, VectorStoreFile("default", "vs_a", "file-d2", "d2", {})]
    assert stores.file_links("default", ["d1", "d2", "d3"]) == {"d1": link}
    assert stores.find_file("default", "vs_a", "file-orig") == link
    assert stores.find_file("default", "vs_a", "file-d2") is not None
    assert stores.find_file("default", "vs_a", "file-d3") is None  # another workspace's
    assert stores.find_file("default", "vs_b", "file-orig") is None
    assert stores.usage("default", "vs_a") == ({"completed": 2}, 10)  # bytes as the documents say

    other = VectorStoreFile("w2", "vs_a", "file-w2", "d3", {})
    assert stores.link_file(other, 10)
    assert stores.file_links("default", ["d1", "d3"]) == {"d1": link}  # d3's link is w2's
    assert stores.file_links("w2", ["d1", "d3"]) == {"d3": other}

    updated = replace(link, attributes={"year": 2025})
    assert stores.link_file(updated, 11) and stores.find_file("default", "vs_a", "file-orig") == updated
    documents.delete_document("default", "d1")
    assert stores.file_links("default", ["d1"]) == {} and stores.find_file("default", "vs_a", "file-orig") is None


def test_one_document_is_several_files_of_its_store(storage: Storage) -> None:
    # Two files with identical bytes attached to one store share the namespace's one document.
    stores = storage.vector_stores
    add_document(storage, _document("d1", namespace="vs_a"), [], CHUNKS, b"1")
    first = VectorStoreFile("default", "vs_a", "file-a", "d1", {"n": 1})
    second = VectorStoreFile("default", "vs_a", "file-b", "d1", {"n": 2})
    assert stores.link_file(first, 10) and stores.link_file(second, 11)
    assert stores.files("default", "vs_a") == [first, second]
    assert stores.links_of("default", "d1") == [first, second]
    assert stores.find_file("default", "vs_a", "file-b") == second
    assert stores.find_file("default", "vs_a", "file-d1") is None  # its own id: hidden once it is linked
    assert stores.file_links("default", ["d1"]) == {"d1": first}  # shown as the first attached
    assert stores.usage("default", "vs_a") == ({"completed": 2}, 10)  # two files
    assert stores.unlink_file("default", "d1", "file-a") == 1
    assert stores.unlink_file("w2", "d1", "file-b") == 0  # another workspace's: nothing removed, none of its own
    assert stores.files("default", "vs_a") == [second]
    assert stores.unlink_file("default", "d1", "file-b") == 0
    assert stores.files("default", "vs_a") == [VectorStoreFile("default", "vs_a", "file-d1", "d1", {})]


def test_store_files_page_in_the_database_both_ways_and_by_status(storage: Storage) -> None:
    stores = storage.vector_stores
    for n in range(7):
        doc = replace(_document(f"d{n}", namespace="vs_p", sha=f"s{n}"), status="failed" if n % 3 == 0 else "completed")
        add_document(storage, doc, [], CHUNKS, b"x")
    stores.link_file(VectorStoreFile("default", "vs_p", "file-x2", "d2", {}), 5)  # d2 is two files
    stores.link_file(VectorStoreFile("default", "vs_p", "file-y2", "d2", {}), 6)
    add_document(storage, _document("other", namespace="vs_q", sha="o"), [], CHUNKS, b"o")
    every = ["file-d0", "file-d1", "file-x2", "file-y2", "file-d3", "file-d4", "file-d5", "file-d6"]

    def ids(limit: int, after: str | None, before: str | None, order: str, status: str | None = None) -> list[str]:
        page = stores.list_files("default", "vs_p", limit, after, before, order, status)  # type: ignore[arg-type]
        return [f.file_id for f in page.items] + (["+"] if page.has_more else [])

    assert ids(100, None, None, "asc") == every
    assert ids(3, None, None, "asc") == [*every[:3], "+"]
    assert ids(3, "file-x2", None, "asc") == [*every[3:6], "+"]
    assert ids(3, "file-x2", None, "desc") == ["file-d1", "file-d0"]
    assert ids(2, None, "file-d4", "asc") == ["file-y2", "file-d3", "+"]
    assert ids(2, None, "file-y2", "desc") == ["file-d4", "file-d3", "+"]
    assert ids(100, None, None, "desc") == every[::-1]
    assert ids(100, "file-d1", "file-d4", "asc") == ["file-x2", "file-y2", "file-d3"]
    assert ids(2, None, None, "asc", "failed") == ["file-d0", "file-d3", "+"]
    assert ids(2, "file-d3", None, "asc", "failed") == ["file-d6"]
    with pytest.raises(NotFound) as info:
        stores.list_files("default", "vs_p", 2, "file-other", None, "asc")  # another store's file
    assert info.value.param == "after"
    assert stores.list_files("w2", "vs_p", 10, None, None, "asc").items == []


def test_file_batches_keep_their_file_ids_and_can_be_cancelled(storage: Storage) -> None:
    stores = storage.vector_stores
    batch = FileBatch("vsfb_1", "default", "vs_a", ["file-2", "file-1"], 5)
    stores.insert_batch(batch)
    assert stores.get_batch("default", "vs_a", "vsfb_1") == batch
    assert stores.get_batch("w2", "vs_a", "vsfb_1") is None and stores.get_batch("default", "vs_b", "vsfb_1") is None
    assert stores.cancel_batch("default", "vs_a", "vsfb_1") and not stores.cancel_batch("w2", "vs_a", "vsfb_1")
    assert stores.get_batch("default", "vs_a", "vsfb_1") == replace(batch, cancelled=True)


def test_file_links_look_documents_up_by_id_on_sqlite(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Every search calls file_links: driven from the workspace index it walked every document (245 ms at 200k).
    import sqlite3

    from calypso.store.vector_stores_sql import FILE_LINKS_SQL

    settings = Settings(home=tmp_path, database_url="")  # the embedded backend, whatever CALYPSO_DATABASE_URL says
    open_storage(settings).close()  # migrated
    with sqlite3.connect(settings.database_path) as conn:
        plan = " ".join(
            str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + FILE_LINKS_SQL.format(marks="?,?"), ("a", "b"))
        )
    assert "(id=?)" in plan and "workspace" not in plan, plan


def test_stale_terms_are_found_in_key_order_and_rewritten(storage: Storage) -> None:
    chunks = [Chunk(i, f"passage {i}", i * 10, i * 10 + 9, 1, 1, ("1",)) for i in range(5)]
    doc_key, keys = add_document(
        storage, _document(), [Page(1, "1", 0, 50)], chunks, b"x", ["a1 old", None, "a2 new", "a1 old", "a22 other"]
    )
    terms = storage.terms
    assert terms.count_stale_terms("a2 ") == 4  # older versions, none stored, and a version that only shares "a2"
    first = terms.stale_terms("a2 ", 0, 2)
    assert first == [(keys[0], "passage 0"), (keys[1], "passage 1")]
    rest = terms.stale_terms("a2 ", first[-1][0], 10)
    assert rest == [(keys[3], "passage 3"), (keys[4], "passage 4")]
    terms.write_terms([(key, f"a2 t{key}") for key, _ in first + rest] + [(10**9, "a2 gone")])
    assert terms.count_stale_terms("a2 ") == 0
    stored = {c.key: c.terms for c in storage.feed.document_chunks(doc_key)}
    assert stored[keys[0]] == f"a2 t{keys[0]}" and stored[keys[2]] == "a2 new"
