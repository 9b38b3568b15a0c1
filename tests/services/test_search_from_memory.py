"""Which searches the HTTP route may run on its event loop: those that read only memory and the SQLite file.

``SearchService.runs_from_memory`` must say no whenever the search could wait: the namespace's index not
loaded yet (a build), the model to run on the query, PostgreSQL's round trips. A wrong yes would stall every
other request of the process; a wrong no only costs the thread hop.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from calypso.config import Settings
from calypso.errors import InvalidNamespace
from calypso.models import RankingOptions
from calypso.services import Services, open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

ENGLISH = [
    "Customers may return unworn shoes within thirty days of delivery for a full refund.",
    "Gift cards cannot be refunded or exchanged for cash.",
]
KEYWORDS_ONLY = RankingOptions(embedding_weight=0)


def embedded_policies(settings: Settings, model: str) -> Services:
    """Services on ``model`` with ENGLISH uploaded and embedded, the namespace's index loaded with its vectors."""
    services = open_services(settings.model_copy(update={"embedding_model": model}))
    for n, text in enumerate(ENGLISH):
        services.ingestion.ingest(Upload(text.encode(), f"policy{n}.txt", "general"))
    embed_all(services.vectors)
    search = services.search
    search.search("warm up", search.scope("general", ranking=KEYWORDS_ONLY))  # loads the index without embedding
    search.catch_up()  # the vectors stored by embed_all reach the index through the feed
    return services


def test_keyword_searches_of_a_loaded_namespace_run_from_memory(settings: Settings) -> None:
    services = open_services(settings.model_copy(update={"embedding_model": "none"}))
    try:
        search = services.search
        services.ingestion.ingest(Upload(ENGLISH[0].encode(), "returns.txt", "general"))
        assert not search.runs_from_memory("refund", search.scope("general"))  # first query: the index builds
        assert search.search("refund", search.scope("general"))
        assert search.runs_from_memory("refund", search.scope("general"))
        assert not search.runs_from_memory("refund", search.scope("elsewhere"))  # another namespace, not loaded
        with pytest.raises(InvalidNamespace):  # refused before anything runs
            search.scope("Not a namespace!")
        assert asyncio.run(search.search_async("refund", search.scope("general"))) == search.search(
            "refund", search.scope("general")
        )
        assert (
            asyncio.run(search.search_async("refund", search.scope("elsewhere"))) == []
        )  # on a thread: the index builds
    finally:
        services.close()


def test_a_query_the_model_must_embed_goes_to_a_thread(settings: Settings) -> None:
    services = embedded_policies(settings, "minilm-l6-v2-int8")
    try:
        search = services.search
        question = "Can I get my money back for a gift card?"
        assert not search.runs_from_memory(question, search.scope("general"))  # hybrid: the model runs on the question
        assert search.runs_from_memory(question, search.scope("general", ranking=KEYWORDS_ONLY))
        hybrid = search.search(question, search.scope("general"))
        assert any(p.vector_score is not None for p in hybrid)
        assert search.runs_from_memory(question, search.scope("general"))  # its vector is memoised now
        assert search.search(question, search.scope("general")) == hybrid
        german = "Kann ich eine Geschenkkarte gegen Bargeld zurückgeben?"
        assert search.runs_from_memory(
            german, search.scope("general")
        )  # the English model does not cover it: keywords only
        assert all(p.vector_score is None for p in search.search(german, search.scope("general")))
    finally:
        services.close()


def test_postgresql_searches_always_go_to_a_thread(settings: Settings) -> None:
    services = open_services(settings.model_copy(update={"embedding_model": "none"}))
    try:
        services.ingestion.ingest(Upload(ENGLISH[0].encode(), "returns.txt", "general"))
        services.search.search("refund", services.search.scope("general"))
        services.search.settings = settings.model_copy(update={"database_url": "postgresql://elsewhere/db"})
        assert not services.search.runs_from_memory("refund", services.search.scope("general"))
    finally:
        services.close()


def test_a_model_that_leaves_a_core_runs_beside_the_keyword_run(settings: Settings) -> None:
    """multilingual-e5 embeds a query on one thread: the search runs its keyword run meanwhile. On a thread, the
    model runs there and the keyword run beside it (no handover on the model's path); on the event loop (the HTTP
    route) the loop runs the keyword search while the model runs on a thread. Either way the passages are the
    same as when the model runs first."""
    services = embedded_policies(settings, "multilingual-e5-small-int8")
    try:
        search = services.search
        index = search.index("general")
        threads: list[tuple[str, str]] = []
        # The model's run (``finish``: the session; its tokenizing half runs before the keyword run starts).
        keyword_search, run = index.search, search._query_embedder.finish  # type: ignore[union-attr]

        def recorded(what: str, run: Any) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                threads.append((what, threading.current_thread().name))
                return run(*args, **kwargs)

            return call

        def ran_where(run: Any) -> tuple[dict[str, str], Any]:
            threads.clear()
            search._query_vectors.clear()
            found = run()
            assert len(threads) == 2, threads  # the two start at once: in either order
            return dict(threads), found

        index.search = recorded("keywords", keyword_search)  # type: ignore[method-assign]
        search._query_embedder.finish = recorded("model", run)  # type: ignore[union-attr,method-assign]
        question = "Can I get my money back for a gift card?"
        assert search._runs_on_loop(search.scope("general"), "default")
        ran, on_loop = ran_where(lambda: asyncio.run(search.search_async(question, search.scope("general"))))
        assert ran["keywords"] == "MainThread" and ran["model"].startswith("calypso-beside")
        ran, beside = ran_where(lambda: search.search(question, search.scope("general")))  # on a thread: the same
        assert ran["model"] == "MainThread" and ran["keywords"].startswith("calypso-beside")
        threads.clear()
        search._query_vectors.clear()
        search._embeds_beside = False  # MiniLM's way: the model first, on the searching thread
        first = search.search(question, search.scope("general"))
        assert threads == [("model", "MainThread"), ("keywords", "MainThread")]
        assert on_loop == beside == first and any(p.vector_score is not None for p in first)
    finally:
        services.close()


def test_a_model_that_fails_beside_the_keyword_run_fails_the_search_and_nothing_else(settings: Settings) -> None:
    """The model's error reaches the caller once the keyword run beside it has ended; the next search runs."""
    services = embedded_policies(settings, "multilingual-e5-small-int8")
    try:
        search = services.search
        run = search._query_embedder.finish  # type: ignore[union-attr]

        def down(prepared: Any) -> Any:
            raise RuntimeError("the model is down")

        search._query_embedder.finish = down  # type: ignore[union-attr,method-assign]
        with pytest.raises(RuntimeError, match="the model is down"):
            asyncio.run(search.search_async("gift card refund", search.scope("general")))
        with pytest.raises(RuntimeError, match="the model is down"):
            search.search("gift card refund", search.scope("general"))
        search._query_embedder.finish = run  # type: ignore[union-attr,method-assign]
        assert asyncio.run(search.search_async("gift card refund", search.scope("general")))
    finally:
        services.close()
