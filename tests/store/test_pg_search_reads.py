"""A search's reads awaited on the server's event loop (``store/postgres/search_reads.py``): the same rows as the
stores' blocking reads, only on the loop the pool was opened on, and a connection the server dropped while it sat
in the pool costs the read nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from calypso.config import Settings
from calypso.errors import StoreUnavailable
from calypso.retrieval.query import keyword_query
from calypso.services import Services, open_services
from calypso.services.ingestion import Upload
from calypso.store.postgres.database import LOOP_POOL_NAME

pytestmark = pytest.mark.backends("postgres")

POLICY = b"Refunds are paid within 30 days. Gift cards are never refundable. Shipping is paid by the customer."


@pytest.fixture
def stocked(settings: Settings) -> Iterator[Services]:
    services = open_services(settings.model_copy(update={"embedding_model": "none"}))
    services.ingestion.ingest(Upload(POLICY, "policy.txt"))
    services.ingestion.ingest(Upload("礼品卡一律不予退款，也不能兑换现金。".encode(), "退款政策.txt"))
    yield services
    services.close()


def _drop_loop_connections(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (LOOP_POOL_NAME,)
        ).fetchall()
    return len(rows)


def test_awaited_reads_give_the_stores_rows_on_their_loop_only(stocked: Services, database_url: str) -> None:
    storage, search = stocked.storage, stocked.search
    reads = storage.search_reads
    assert reads is not None and not reads.ready()  # no pool opened on any loop yet
    namespace = search.scope().namespaces[0]
    index = search.index(namespace)
    keys = [key for key, _ in index.search(keyword_query("refundable 礼品卡 shipping"), k=10)]
    ids = sorted({document.id for _, document in storage.documents.get_passages("default", keys).values()})

    async def on_the_loop() -> tuple:
        await storage.open_on_loop()
        try:
            assert reads.ready()
            return (
                await reads.get_passages("default", keys, namespace),
                await reads.chunk_positions(keys),
                await reads.lone_chunks(keys),
                await reads.document_keys("default", ids),
                await reads.file_links("default", ids),
                await asyncio.to_thread(reads.ready),  # another thread: not its loop
            )
        finally:
            await storage.close_on_loop()

    passages, positions, lone, doc_keys, links, on_a_thread = asyncio.run(on_the_loop())
    documents = storage.documents
    assert keys and passages == documents.get_passages("default", keys, namespace)
    assert positions == documents.chunk_positions(keys) and lone == documents.lone_chunks(keys)
    assert doc_keys == documents.document_keys("default", ids) and len(doc_keys) == len(ids) == 2
    assert links == {}  # no vector store: nothing attached
    assert not on_a_thread and not reads.ready()


def test_a_dropped_pooled_connection_costs_the_search_nothing(stocked: Services, database_url: str) -> None:
    """The server restarts or an idle timeout ends the loop pool's connections: the next search still answers
    (the read goes to a fresh connection); a database that is really gone is a 503."""
    storage, search = stocked.storage, stocked.search

    async def searches() -> tuple:
        await storage.open_on_loop()
        try:
            scope = search.scope()
            first = await search.search_async("gift cards refundable", scope)
            dropped = _drop_loop_connections(database_url)
            await asyncio.sleep(0.1)
            second = await search.search_async("gift cards refundable", scope)
            chinese = await search.search_async("礼品卡", scope)
            return first, dropped, second, chinese
        finally:
            await storage.close_on_loop()

    first, dropped, second, chinese = asyncio.run(searches())
    assert dropped >= 1 and first and second == first
    assert chinese[0].document.filename == "退款政策.txt"


def test_an_unreachable_database_is_store_unavailable_on_the_loop(stocked: Services, database_url: str) -> None:
    storage = stocked.storage
    reads = storage.search_reads
    assert reads is not None

    async def read_after_dropping() -> None:
        await storage.open_on_loop()
        database = storage.database  # type: ignore[attr-defined]
        real_url = database.url
        try:
            await reads.get_passages("default", [1], "default")  # a connection in the pool
            pool = database._loop_pool()
            pool.kwargs["host"] = "/nonexistent"  # new connections cannot be made
            pool.kwargs["connect_timeout"] = 1
            pool.timeout = 1.0
            _drop_loop_connections(real_url)
            await asyncio.sleep(0.1)
            await reads.get_passages("default", [1], "default")
        finally:
            await storage.close_on_loop()

    with pytest.raises(StoreUnavailable):
        asyncio.run(read_after_dropping())


def test_two_loops_keep_their_own_pools(stocked: Services) -> None:
    """Two apps serving over one store (tests do this) each await on their own loop's pool; closing one leaves the
    other's."""
    import threading

    storage, search = stocked.storage, stocked.search
    reads = storage.search_reads
    assert reads is not None
    started, release, results = threading.Event(), threading.Event(), []

    async def other_loop() -> None:
        await storage.open_on_loop()
        started.set()
        await asyncio.to_thread(release.wait, 30)
        results.append(reads.ready())
        results.append(bool(await search.search_async("gift cards refundable", search.scope())))
        await storage.close_on_loop()

    thread = threading.Thread(target=asyncio.run, args=(other_loop(),))
    thread.start()
    assert started.wait(30)

    async def this_loop() -> bool:
        await storage.open_on_loop()
        found = bool(await search.search_async("礼品卡", search.scope()))
        await storage.close_on_loop()
        return found and not reads.ready()

    assert asyncio.run(this_loop())
    release.set()
    thread.join(30)
    assert results == [True, True]
