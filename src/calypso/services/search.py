"""The search service: keyword and vector runs over a namespace, fused, smoothed, scoped and filtered.

It owns this process's in-memory indexes (``services/index_sync.py``: one BM25 index per (workspace,
namespace), loaded or built on first use and following the store's change feed, with the passage vectors
beside it when an embedding model is set). A search is hybrid when the namespace has vectors and the model
covers its languages: the keyword run and the vector run (100 deep each) are fused by
``retrieval.hybrid.fuse`` with the request's weights (at the server's defaults, with the exact-match signal
of the query's rare identifiers beside them: ``retrieval.exact_match``), and the top fused passages' scores
mixed with their neighbours' (``smooth_neighbours``). Passages not embedded yet are still found by their keywords.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from calypso.config import Settings
from calypso.embeddings import calibration
from calypso.embeddings.base import Embedder, covers, query_embedder
from calypso.errors import InvalidRequest
from calypso.models import Passage, RankingOptions
from calypso.retrieval.bm25 import BM25Index
from calypso.retrieval.exact_match import exact_signal
from calypso.retrieval.hybrid import (
    CROSS_LINGUAL_EMBEDDING_WEIGHT,
    CROSS_LINGUAL_TEXT_WEIGHT,
    NEIGHBOUR_POOL,
    NEIGHBOUR_WEIGHT,
    default_weights,
    fuse,
    fusion_weights,
    smooth_neighbours,
)
from calypso.retrieval.query import keyword_query
from calypso.retrieval.scoring import keyword_score
from calypso.scope import DEFAULT_WORKSPACE, RetrievalScope, check_namespace
from calypso.services.index_sync import NamespaceIndexes
from calypso.store.base import DocumentStore, SearchReads, VectorStoreStore
from calypso.store.vectors import VectorSearch
from calypso.text.languages import detect

HYBRID_DEPTH = 100  # each run's depth before fusion: fuse's 0 is the 100th (as tuned on SciFact)
QUERY_VECTORS_CACHED = 512  # recent queries' vectors kept, so a repeated question embeds nothing
BESIDE_THREADS = 8  # threads a search hands work to beside its own: models, keyword runs, database vector searches
EMBED, VECTOR = "embed", "vector"  # what a search's steps ask their driver (``SearchService._steps``), or a Read


@dataclass(frozen=True)
class Read:
    """A store read a search's steps wait on: ``blocking`` where they run on a thread (and SQLite's on the event
    loop too: a file read); ``awaited`` on the event loop when the store offers it there (PostgreSQL's
    ``SearchReads``), None when it does not."""

    blocking: Callable[[], Any]
    awaited: Callable[[], Awaitable[Any]] | None


@dataclass(frozen=True)
class Alongside:
    """A read the database answers while ``work`` runs (the keyword run beside PostgreSQL's vector search):
    the steps get ``(work's result, the read's)``."""

    read: Read
    work: Callable[[], Any]


Ask = str | Read | Alongside  # what steps yield: EMBED, VECTOR (on its own: the vector now), a read
Steps = Generator[Ask, Any, list[Passage]]


class SearchService:
    def __init__(
        self,
        settings: Settings,
        store: DocumentStore,
        indexes: NamespaceIndexes,
        *,
        embedder: Embedder | None = None,
        file_links: VectorStoreStore | None = None,
        reads: SearchReads | None = None,
    ) -> None:
        """``file_links``: a document attached to a vector store is shown under the file id attached; ``reads``:
        the store's reads awaited on the server's event loop (PostgreSQL's), None: on a thread."""
        self.settings = settings
        self.store = store
        self._reads = reads
        self.embedder = embedder
        self._query_embedder = query_embedder(embedder) if embedder is not None else None  # recent ones cached below
        self._cosine_floor = calibration.query_floor(embedder.name) if embedder is not None else 0.0
        self.file_links = file_links
        self._indexes = indexes
        self._query_vectors: OrderedDict[str, Any] = OrderedDict()
        self._query_lock = threading.Lock()
        self._beside: ThreadPoolExecutor | None = None  # keyword runs beside a model, PostgreSQL's vector searches
        # A query's model run leaves a core to the keyword run when it uses fewer threads than there are cores
        # (a remote model uses none here).
        model_threads = getattr(self._query_embedder, "threads", 0) if self._query_embedder is not None else 0
        self._embeds_beside = model_threads < (os.cpu_count() or 1)

    def index(self, namespace: str, workspace: str = DEFAULT_WORKSPACE) -> BM25Index:
        """The namespace's index: loaded from its snapshot or built from the store on first use, then following the feed."""
        return self._indexes.get(workspace, namespace)

    @property
    def indexes(self) -> NamespaceIndexes:
        """This process's namespace indexes (keyword and vector), shared with the documents service."""
        return self._indexes

    def vectors(self, namespace: str, workspace: str = DEFAULT_WORKSPACE) -> VectorSearch | None:
        """The namespace's vector search (the database's or the in-memory index); None without an embedding model."""
        return self._indexes.vectors(workspace, namespace)

    def warm_up(self, workspace: str = DEFAULT_WORKSPACE) -> int:
        """Load every namespace's index now (at start-up) instead of on its first query; returns passages indexed."""
        return sum(len(self.index(namespace, workspace)) for namespace in self.store.namespaces(workspace))

    def index_sizes(self) -> dict[tuple[str, str], tuple[int, int]]:
        """Passages in this process's loaded indexes, (keyword, vector) by (workspace, namespace) (metrics)."""
        return self._indexes.sizes()

    @property
    def following(self) -> bool:
        """Whether the loaded indexes follow the change feed now (readiness)."""
        return self._indexes.following

    def catch_up(self) -> int:
        """Apply the store's change feed to the loaded indexes now (the follower thread does so on its own)."""
        return self._indexes.catch_up()

    def close(self) -> None:
        """Stop following the feed and save the changed indexes' snapshots (embedded backend)."""
        if self._beside is not None:
            self._beside.shutdown(wait=False)
        self._indexes.close()

    def scope(
        self,
        namespace: str | None = None,
        *,
        document_ids: Sequence[str] | None = None,
        max_results: int | None = None,
        ranking: RankingOptions | None = None,
    ) -> RetrievalScope:
        """What a search request names, checked: one namespace (the default one when None), optionally only some
        of its documents, at most ``max_results`` passages (None: CALYPSO_SEARCH_MAX_RESULTS), ranked as asked."""
        name = check_namespace(self.settings.namespace_or_default(namespace))
        ids = tuple(document_ids) if document_ids is not None else None
        return RetrievalScope((name,), ids, max_results, ranking)

    def search(self, query: str, scope: RetrievalScope, workspace: str = DEFAULT_WORKSPACE) -> list[Passage]:
        """The top ``scope.passage_count`` passages (None: CALYPSO_SEARCH_MAX_RESULTS) for ``query`` in the scope's
        namespaces, merged by score (scores are in [0, 1] and mean the share of the query matched), optionally only
        from the scope's documents.

        Keyword matching uses the query's content words (``keyword_query``). Each passage's ``score`` is in
        [0, 1] (``retrieval.scoring``), its raw BM25 in ``keyword_score``; ``ranking.score_threshold`` drops
        passages scoring below it. With vectors in the namespace the search is hybrid: ``ranking``'s
        ``text_weight``/``embedding_weight`` weigh the two runs (``embedding_weight`` 0: keyword only); the
        fused score, mixed with the best neighbouring passage's (``smooth_neighbours``), is in [0, 1] and the
        raw cosine is in ``vector_score``.
        """
        return self._drive(self._steps(query, scope, workspace), query)

    def _steps(self, query: str, scope: RetrievalScope, workspace: str) -> Steps:
        """``search`` as steps: it yields ``EMBED`` when the query's vector will be wanted (its driver starts the
        model) and ``VECTOR`` when it wants it (its driver sends it), so that the keyword run goes on while the model
        runs, driven on a thread (``_drive``) or on the event loop (``_drive_on_loop``)."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest("The query is empty; send the question or keywords to search for.", param="query")
        try:
            weights = fusion_weights(scope.ranking)
        except ValueError as exc:
            raise InvalidRequest(str(exc), param="ranking_options.hybrid_search") from exc
        k = scope.passage_count or self.settings.search_max_results
        threshold = scope.ranking.score_threshold if scope.ranking is not None else 0.0
        doc_keys = None  # the scope's documents, looked up once for every namespace
        if scope.document_ids is not None:
            doc_keys = set((yield self._read("document_keys", workspace, list(scope.document_ids))).values())
        found: list[Passage] = []
        for namespace in scope.namespaces:
            found += yield from self._search_namespace(
                query, namespace, k, weights, threshold, doc_keys, workspace, default_weights(scope.ranking)
            )
        return sorted(found, key=lambda p: -p.score)[:k]

    def _drive(self, steps: Steps, query: str) -> list[Passage]:
        """A search's steps on this thread, reading the stores as it goes. When they ask for the query's vector
        early, a model that leaves a core free runs here and their keyword run beside it (``_embed_here``); one
        that takes both cores (MiniLM) runs first (``_embed_first``)."""
        try:
            ask = next(steps)
            while True:
                if isinstance(ask, Read):
                    ask = steps.send(ask.blocking())
                elif isinstance(ask, Alongside):
                    pending = self._beside_pool().submit(ask.read.blocking)
                    done = ask.work()
                    ask = steps.send((done, pending.result()))
                elif ask == VECTOR:  # wanted now
                    ask = steps.send(self.query_vector(query))
                else:
                    assert ask == EMBED
                    ask = self._embed_here(steps, query) if self._embeds_beside else self._embed_first(steps, query)
        except StopIteration as done:
            result: list[Passage] = done.value
            return result

    def _embed_first(self, steps: Steps, query: str) -> Ask:
        """The query's model, then the steps' keyword run, on this thread."""
        vector = self._vector_call(query)()
        asked = steps.send(None)
        assert asked == VECTOR
        return steps.send(vector)

    def _embed_here(self, steps: Steps, query: str) -> Ask:
        """The query's model on this thread while a beside thread takes the steps on to their ``VECTOR`` (the keyword
        run); then the steps get the vector. The model's path has no handover: the shorter keyword run (1 ms against
        the model's 5 ms at 200k) ends first, and its thread waking up (0.2 ms) happens beside the model. Model on
        the beside thread instead, the search waited for that thread to wake and then for this one: 0.4 ms over
        HTTP at 200k passages (docs/benchmarks/search-speed.md)."""
        vector_of = self._vector_call(query)
        keyword_run = self._beside_pool().submit(steps.send, None)
        try:
            vector = vector_of()
        finally:
            wait([keyword_run])  # the steps are never left running on the other thread
        asked = keyword_run.result()
        assert asked == VECTOR
        return steps.send(vector)

    async def _drive_on_loop(self, steps: Steps, query: str) -> list[Passage]:
        """``_drive`` on an event loop: memory and SQLite's file are read right here, PostgreSQL's reads awaited
        (``SearchReads``), the query's model on a thread while the loop runs the keyword search and its other
        requests. The request never waits for a thread to take it up.

        The model on the loop's own thread while it had no other search under way saved 0.2 ms, but a loop busy
        with one request had not yet taken up the next ones: each saw itself alone, and under 8 clients the
        model's runs queued on the loop (e5 at 200k passages: 99-112 against 154-161 requests/s)."""
        pending: asyncio.Future[Any] | None = None
        try:
            ask = next(steps)
            while True:
                if isinstance(ask, Read):
                    ask = steps.send(await ask.awaited() if ask.awaited is not None else ask.blocking())
                elif isinstance(ask, Alongside):
                    # The work on a thread, so that the loop sees the database's answer; it is the shorter.
                    work = asyncio.wrap_future(self._beside_pool().submit(ask.work))
                    awaited = ask.read.awaited
                    read = await (awaited() if awaited is not None else asyncio.to_thread(ask.read.blocking))
                    ask = steps.send((await work, read))
                elif ask == EMBED:
                    pending = self._model_beside(query)
                    ask = steps.send(None)
                else:  # VECTOR: the model started at EMBED, or (on its own) the vector wanted now
                    vector = await (pending if pending is not None else self._model_beside(query))
                    pending = None
                    ask = steps.send(vector)
        except StopIteration as done:
            result: list[Passage] = done.value
            return result

    def _model_beside(self, query: str) -> asyncio.Future[Any]:
        return asyncio.wrap_future(self._beside_pool().submit(self._vector_call(query)))

    def _vector_call(self, query: str) -> Callable[[], Any]:
        """The query's vector as a call to make, on this thread or another. A local model's half that holds the GIL
        (tokenizing: ``prepare``) runs here and now, before this thread goes on to the keyword run: run beside
        the model instead, the two took turns at the GIL while the model should have been running."""
        prepare = getattr(self._query_embedder, "prepare", None)
        if prepare is None or self._vector_cached(query):
            return partial(self.query_vector, query)
        finish = self._query_embedder.finish  # type: ignore[union-attr]
        prepared = prepare(query)
        return lambda: self._remember(query, finish(prepared))

    def _search_namespace(
        self,
        query: str,
        namespace: str,
        k: int,
        weights: tuple[float, float],
        threshold: float,
        doc_keys: set[int] | None,
        workspace: str,
        exact: bool = False,
    ) -> Steps:
        """One namespace's top ``k`` passages, best first, fused with ``(text, embedding)`` weights, and with
        the query's rare identifiers' exact-match signal when ``exact`` (the server's default weights)."""
        text_weight, embedding_weight = weights
        index = self.index(namespace, workspace)
        if embedding_weight > 0 and not self._vectors_apply(query, index):
            embedding_weight = 0.0
        elif exact and embedding_weight > 0 and self._crosses_languages(query, index):
            text_weight, embedding_weight = CROSS_LINGUAL_TEXT_WEIGHT, CROSS_LINGUAL_EMBEDDING_WEIGHT
        vectors = self._indexes.vectors(workspace, namespace) if embedding_weight > 0 else None
        keywords = keyword_query(query)
        raw_keyword: dict[int, float] = {}
        raw_cosine: dict[int, float] = {}
        if vectors is None or not len(vectors):  # keyword-only: no model, nothing embedded, or weight 0
            found = index.search(keywords, k=k, doc_keys=doc_keys)
            ceiling = index.max_score(keywords) if found else 0.0
            raw_keyword = dict(found)
            ranked = [(key, keyword_score(raw, ceiling)) for key, raw in found]
        else:
            depth = max(k, HYBRID_DEPTH)
            # What needs no vector (the keyword run, the exact-match signal: 0.3 ms at 200k) runs while the model or
            # the database works on the vector run.
            keyword_side = partial(self._keyword_side, index, query, keywords, depth, doc_keys, text_weight, exact)
            if self._indexes.vectors_in_database:
                # PostgreSQL walks its HNSW graph (a top 100 in 7-12 ms at 1M) while the keyword run goes on (4-6 ms
                # at 1M), instead of one after the other. The query is embedded first: the longer run waits for it.
                vector = yield VECTOR
                search = partial(vectors.search, vector, depth, doc_keys)
                awaited = getattr(vectors, "search_async", None)
                read = Read(search, partial(awaited, vector, depth, doc_keys) if awaited is not None else None)
                (text_run, matches, exact_weight), dense_run = yield Alongside(read, keyword_side)
            else:
                if not self._vector_cached(query):
                    yield EMBED  # the driver runs the model and the keyword side: at once, or the model first
                    text_run, matches, exact_weight = keyword_side()
                    vector = yield VECTOR
                else:
                    vector, (text_run, matches, exact_weight) = self.query_vector(query), keyword_side()
                dense_run = vectors.search(vector, k=depth, doc_keys=doc_keys)
            # The vector run always returns its nearest; below the model's floor they are noise fusion would rank.
            floor = self._cosine_floor
            dense_run = [(key, cosine) for key, cosine in dense_run if cosine >= floor]
            raw_keyword, raw_cosine = dict(text_run), dict(dense_run)
            pool = fuse(
                text_run,
                dense_run,
                text_weight=text_weight,
                embedding_weight=embedding_weight,
                exact=matches,
                exact_weight=exact_weight,
            )
            pool = pool[: max(k, NEIGHBOUR_POOL)]
            # Where the pool's passages sit (no text: 50 passages fetched whole cost 0.8 ms), for the smoothing.
            pooled = [key for key, _ in pool]
            positions = yield self._read("chunk_positions", pooled)
            lone = yield self._read("lone_chunks", pooled)
            ranked = smooth_neighbours(pool, positions, NEIGHBOUR_WEIGHT, lone)[:k]
        hits = [(key, score) for key, score in ranked if score >= threshold]
        stored = yield self._read("get_passages", workspace, [key for key, _ in hits], namespace)
        documents = {document.id: document for _, document in stored.values()}
        if self.file_links is not None and documents:
            links = yield self._read("file_links", workspace, list(documents))
            for doc_id, link in links.items():
                documents[doc_id] = replace(documents[doc_id], file_id=link.file_id)
        passages = []
        for key, score in hits:
            fetched = stored.get(key)
            # A chunk deleted between index lookup and fetch is simply gone.
            if fetched is not None:
                chunk = fetched[0]
                passages.append(
                    Passage(
                        documents[chunk.document_id],
                        chunk.chunk,
                        score,
                        keyword_score=raw_keyword.get(key),
                        vector_score=raw_cosine.get(key),
                    )
                )
        return passages

    @staticmethod
    def _keyword_side(
        index: BM25Index,
        query: str,
        keywords: str,
        depth: int,
        doc_keys: set[int] | None,
        text_weight: float,
        exact: bool,
    ) -> tuple[list[tuple[int, float]], dict[int, float], float]:
        """A hybrid search's keyword run (none at text weight 0) and the query's exact-match signal (when ``exact``)."""
        text_run = index.search(keywords, k=depth, doc_keys=doc_keys) if text_weight > 0 else []
        matches, exact_weight = exact_signal(index, query, keywords, depth, doc_keys) if exact else ({}, 0.0)
        return text_run, matches, exact_weight

    def _read(self, name: str, *args: Any) -> Read:
        """The store's read ``name`` on ``args`` (``file_links``: the vector stores'; the rest the documents'), and
        its awaited twin when the store has one (``SearchReads``)."""
        store = self.file_links if name == "file_links" else self.store
        awaited = partial(getattr(self._reads, name), *args) if self._reads is not None else None
        return Read(partial(getattr(store, name), *args), awaited)

    def _beside_pool(self) -> ThreadPoolExecutor:
        """The threads a search hands work to beside its own: the keyword side beside a model on a thread
        (``_embed_here``) or beside the database's vector scan on the loop (``Alongside``), the query's model on the
        loop, the database's vector scan on a thread."""
        with self._query_lock:
            if self._beside is None:
                self._beside = ThreadPoolExecutor(BESIDE_THREADS, thread_name_prefix="calypso-beside")
            return self._beside

    def _vector_cached(self, query: str) -> bool:
        with self._query_lock:
            return query in self._query_vectors

    async def search_async(
        self, query: str, scope: RetrievalScope, workspace: str = DEFAULT_WORKSPACE
    ) -> list[Passage]:
        """``search`` for a caller on an event loop: run right there when it reads only memory
        (``runs_from_memory``: the worker-thread hop cost 0.5 ms of a 3.8 ms keyword search over HTTP at 200k
        passages, docs/benchmarks/hybrid.md, issue 30); driven on the loop too when all else it waits for is the
        query's model or reads the loop can await (``_runs_on_loop``); else on a thread, where an index build or a
        blocking read does not hold up the loop's other requests."""
        run = partial(self.search, query, scope, workspace)
        if self.runs_from_memory(query, scope, workspace):
            return run()
        if self._runs_on_loop(scope, workspace):
            return await self._drive_on_loop(self._steps(query, scope, workspace), query)
        return await asyncio.to_thread(run)

    def _runs_on_loop(self, scope: RetrievalScope, workspace: str) -> bool:
        """Whether ``search`` may be driven on the event loop (``_drive_on_loop``): its indexes are loaded (no
        build), its store's reads are the SQLite file's or awaitable on this loop (PostgreSQL's, ``SearchReads``:
        the hop to a thread cost 0.3 ms of a keyword search over HTTP at 200k passages), and its vectors are
        searched in memory or awaited in the database (whose plan counts the namespace's vectors every 10 s by a
        blocking read: that search takes a thread)."""
        if self.settings.database_url and (self._reads is None or not self._reads.ready()):
            return False
        try:
            embedding_weight = fusion_weights(scope.ranking)[1]
        except ValueError:
            return True  # ``search`` refuses it at once
        for namespace in scope.namespaces:
            if self._indexes.loaded(workspace, namespace) is None:
                return False
            vectors = self._indexes.vectors(workspace, namespace) if embedding_weight > 0 else None
            if vectors is not None and not getattr(vectors, "counted", lambda: True)():
                return False  # the database's vector search must count the namespace first (a blocking read)
        return True

    def runs_from_memory(self, query: str, scope: RetrievalScope, workspace: str = DEFAULT_WORKSPACE) -> bool:
        """Whether ``search`` would read only this process's memory and its SQLite file, a millisecond or two
        at 200k passages: the namespace's index is loaded already, the store is the embedded one, and no model
        runs (keyword-only, or the query's vector is memoised). The HTTP route runs such a search on its event
        loop (``search_async``); anything that may wait (a build, the model, PostgreSQL over the network) goes to
        a thread."""
        if self.settings.database_url:
            return False
        try:
            embedding_weight = fusion_weights(scope.ranking)[1]
        except ValueError:
            return True  # ``search`` refuses it at once
        return all(self._reads_memory(query, namespace, embedding_weight, workspace) for namespace in scope.namespaces)

    def _reads_memory(self, query: str, namespace: str, embedding_weight: float, workspace: str) -> bool:
        index = self._indexes.loaded(workspace, namespace)
        if index is None:
            return False
        if self._query_embedder is None or embedding_weight == 0:
            return True
        with self._query_lock:
            if query in self._query_vectors:
                return True
        vectors = self._indexes.vectors(workspace, namespace)
        return vectors is None or not len(vectors) or not self._vectors_apply(query, index)

    def _vectors_apply(self, query: str, index: BM25Index) -> bool:
        """Whether the model covers both the query's language and the knowledge base's (its passages' most
        common). Elsewhere its cosines are noise: fused with keywords they ranked Chinese and German below
        keywords alone (docs/languages.md), so such a search is by keywords only."""
        if self.embedder is None:
            return False
        passages = index.query_language()
        return covers(self.embedder, passages) and covers(self.embedder, detect(query, fallback=passages))

    @staticmethod
    def _crosses_languages(query: str, index: BM25Index) -> bool:
        """Whether the query is in another language than the knowledge base's passages (their most common)."""
        passages = index.query_language()
        return detect(query, fallback=passages) != passages

    def query_vector(self, query: str) -> Any:
        """The query's embedding, from a small cache of recent queries (a hybrid search embeds each once)."""
        with self._query_lock:
            found = self._query_vectors.get(query)
            if found is not None:
                self._query_vectors.move_to_end(query)
                return found
        assert self._query_embedder is not None
        return self._remember(query, self._query_embedder.embed([query])[0])

    def _remember(self, query: str, vector: Any) -> Any:
        with self._query_lock:
            self._query_vectors[query] = vector
            while len(self._query_vectors) > QUERY_VECTORS_CACHED:
                self._query_vectors.popitem(last=False)
        return vector
