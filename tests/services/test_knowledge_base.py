"""The knowledge base over a real database (SQLite file, PostgreSQL): all-or-nothing ingestion, deletes, filters."""

from __future__ import annotations

import threading

import pytest
from postgres_support import RawDatabase

from calypso.errors import StorageError, UnprocessableDocument
from calypso.services import open_services
from calypso.services.ingestion import Upload
from calypso.text.tokenize import ANALYZER_VERSION

TEXT = "\n\n".join(f"Paragraph {i} explains how the harbour crane number {i} is inspected." for i in range(60))


def test_failure_midway_leaves_no_half_document(kb, searcher, settings, services) -> None:
    kb.ingest(Upload(b"The first document mentions a harbour crane once.", "first.txt"))
    assert len(searcher.search("harbour crane", searcher.scope())) == 1
    # A real database failure on the fourth chunk insert, inside the document's transaction.
    db = RawDatabase.of(settings)
    db.fail_chunk_insert(3)
    with pytest.raises(StorageError):
        kb.ingest(Upload(TEXT.encode(), "second.txt"))
    db.heal()
    assert [d.filename for d in services.documents.list_documents(None, 10, order="asc").items] == ["first.txt"]
    assert db.scalar("SELECT COUNT(*) FROM chunks") == 1
    assert db.scalar("SELECT COUNT(*) FROM pages") == 1
    db.close()
    assert [
        p.document.filename for p in searcher.search("harbour crane inspected", searcher.scope(max_results=50))
    ] == ["first.txt"]
    # And the same bytes can be ingested once the fault is gone.
    assert kb.ingest(Upload(TEXT.encode(), "second.txt")).created


def test_parser_failure_changes_nothing(kb, services) -> None:
    with pytest.raises(UnprocessableDocument):
        kb.ingest(Upload(b"%PDF-1.7\n" + b"\x00garbage" * 100, "broken.pdf"))
    assert services.documents.list_documents(None, 10, order="asc").items == []


def test_index_survives_restart(settings) -> None:
    first = open_services(settings)
    doc = first.ingestion.ingest(Upload(TEXT.encode(), "cranes.txt", "port")).document
    first.close()
    second = open_services(settings)
    hits = second.search.search("crane number 7", second.search.scope("port", max_results=3))
    assert hits[0].document.id == doc.id and "crane number 7 " in hits[0].chunk.text
    second.documents.delete(doc.id)
    assert second.search.search("crane number 7", second.search.scope("port")) == []
    second.close()


def test_namespaces_are_isolated_and_document_filter(kb, searcher) -> None:
    a = kb.ingest(Upload(b"Apples are harvested in autumn.", "a.txt", "fruit")).document
    b = kb.ingest(Upload(b"Apple trees bloom in spring.", "b.txt", "fruit")).document
    kb.ingest(Upload(b"Apples appear in this other namespace too.", "c.txt", "other"))
    assert {p.document.id for p in searcher.search("apples", searcher.scope("fruit"))} == {a.id, b.id}
    assert [p.document.id for p in searcher.search("apples", searcher.scope("fruit", document_ids=[b.id]))] == [b.id]
    assert searcher.search("apples", searcher.scope("fruit", document_ids=[])) == []
    assert searcher.search("apples", searcher.scope("fruit", document_ids=["no-such-id"])) == []


def test_concurrent_ingest_and_search(kb, searcher) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(5):
                kb.ingest(Upload(f"Writer {n} document {i} about lighthouse lamps.".encode(), f"w{n}-{i}.txt"))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(30):
                searcher.search("lighthouse lamps", searcher.scope(max_results=5))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)] + [
        threading.Thread(target=reader) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(searcher.search("lighthouse lamps", searcher.scope(max_results=100))) == 20


def test_index_loads_from_stored_terms_and_tolerates_stale_ones(settings) -> None:
    first = open_services(settings)
    doc = first.ingestion.ingest(Upload(TEXT.encode(), "cranes.txt", "port")).document
    expected = [
        (p.chunk.chunk_index, round(p.score, 6))
        for p in first.search.search("crane number 7", first.search.scope("port"))
    ]
    first.close()
    db = RawDatabase.of(settings)
    stored = db.scalar("SELECT terms FROM chunks LIMIT 1")
    assert stored.startswith(f"{ANALYZER_VERSION} en ") and "crane" in stored.split()
    # A restart builds the index from stored terms and ranks identically.
    second = open_services(settings)
    assert [
        (p.chunk.chunk_index, round(p.score, 6))
        for p in second.search.search("crane number 7", second.search.scope("port"))
    ] == expected
    second.close()
    # Terms from another analyzer version (or none) are re-derived from the text.
    db.execute("UPDATE chunks SET terms = 'old-version crane'")
    db.execute("UPDATE chunks SET terms = NULL WHERE chunk_index = 0")
    db.close()
    third = open_services(settings)
    assert [
        (p.chunk.chunk_index, round(p.score, 6))
        for p in third.search.search("crane number 7", third.search.scope("port"))
    ] == expected
    assert third.search.search("crane", third.search.scope("port"))[0].document.id == doc.id
    third.close()
