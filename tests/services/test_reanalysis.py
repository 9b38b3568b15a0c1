"""Terms an older analyzer stored are re-derived online: search is right before, during and after."""

from __future__ import annotations

from calypso.config import Settings
from calypso.services import open_services
from calypso.services.ingestion import Upload
from calypso.services.reanalysis import TermsReanalysis
from calypso.text.tokenize import DEFAULT_ANALYZER, encode_terms

ZH = "# 退款政策\n\n客户可在购买后30天内申请全额退款。\n\n礼品卡一律不予退款。\n".encode()
NO_VERSION = "no analyzer has this version "  # so stale_terms lists every chunk
EN = b"# Shipping\n\nStandard shipping costs 5 euros and takes three days.\n"


def _age_terms(services) -> None:  # type: ignore[no-untyped-def]
    """Rewrite every stored terms value as the a1 analyzer wrote it: one token per CJK clause."""
    store = services.storage.terms
    stale = store.stale_terms(NO_VERSION, 0, 1000)  # every chunk
    store.write_terms([(key, "a1 " + " ".join(text.lower().split())) for key, text in stale])


def test_stale_terms_are_rewritten_and_search_works_throughout(settings: Settings) -> None:
    services = open_services(settings)
    try:
        services.ingestion.ingest(Upload(ZH, "refunds.md", "general"))
        services.ingestion.ingest(Upload(EN, "shipping.md", "general"))
        _age_terms(services)
    finally:
        services.close()

    services = open_services(settings)  # a restart: the index is built from the text, not the a1 terms
    try:
        store = services.storage.terms
        chunks = len(store.stale_terms(NO_VERSION, 0, 1000))
        assert chunks >= 2 and store.count_stale_terms(TermsReanalysis(store).current) == chunks
        before = services.search.search("礼品卡可以退款吗", services.search.scope("general"))
        assert before and "礼品卡" in before[0].chunk.text

        reanalysis = TermsReanalysis(store, batch=2)
        progress = reanalysis.run()
        assert (progress.done, progress.total, progress.finished) == (chunks, chunks, True)
        assert store.count_stale_terms(reanalysis.current) == 0
        for key, text in store.stale_terms(NO_VERSION, 0, 10):
            stored = next(
                c.terms
                for _, chunks in services.storage.feed.namespace_chunks("default", "general")
                for c in chunks
                if c.key == key
            )
            assert stored == encode_terms(*reversed(DEFAULT_ANALYZER.analyze(text)))
        after = services.search.search("礼品卡可以退款吗", services.search.scope("general"))
        assert [(p.document.id, p.chunk.chunk_index) for p in after] == [
            (p.document.id, p.chunk.chunk_index) for p in before
        ]
    finally:
        services.close()


def test_a_server_starts_the_rewrite_in_the_background(settings: Settings) -> None:
    services = open_services(settings)
    try:
        services.ingestion.ingest(Upload(ZH, "refunds.md", "general"))
        _age_terms(services)
    finally:
        services.close()
    services = open_services(settings, exclusive=True)
    try:
        assert services.reanalysis.wait(30)
        assert services.reanalysis.progress.finished and services.reanalysis.progress.done >= 1
        assert services.storage.terms.count_stale_terms(services.reanalysis.current) == 0
    finally:
        services.close()
