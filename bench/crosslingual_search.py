"""Search across languages through ``SearchService`` (issue 43): fusion when the query's language is not the passages'.

Each set of ``../shared/data/multilingual/`` (``xquad-xling-en-de``: English questions, German paragraphs;
``xquad-xling-zh-en``: Chinese questions, English paragraphs; monolingual ``cmrc2018-zh`` and ``xquad-de``;
``--scifact`` adds English) is ingested paragraph by paragraph into a fresh knowledge base with the given
embedding model, embedded (``embed_all``), and searched: by keywords only, by vectors only, by the server's
default (its fusion decides by the query's and the passages' languages), and with ``--sweep`` at explicit
text weights 0-0.6 (embedding weight 1 minus it). nDCG@10 and Recall@10 per run; a paragraph split into several
passages counts at its best rank.

    .venv/bin/python -m bench.crosslingual_search [--model multilingual-e5-small-int8] [--sets en-de,zh-en]
        [--sweep] [--limit N] [--scifact]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import beir as be
from calypso.config import Settings
from calypso.models import RankingOptions
from calypso.services import open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from calypso.services.search import SearchService

SETS = {
    "en-de": "multilingual/xquad-xling-en-de",
    "zh-en": "multilingual/xquad-xling-zh-en",
    "zh": "multilingual/cmrc2018-zh",
    "de": "multilingual/xquad-de",
    "en": "beir-scifact",
}
SWEEP = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.6)


def ranked_ids(search: SearchService, query: str, ranking: RankingOptions | None) -> list[str]:
    seen: dict[str, None] = {}
    for passage in search.search(query, search.scope("bench", max_results=50, ranking=ranking)):
        seen.setdefault(passage.document.filename.removesuffix(".txt"), None)
    return list(seen)


def run_set(code: str, path: Path, model: str, limit: int | None, sweep: bool) -> None:
    corpus = be.load_corpus(path)
    queries = be.load_queries(path)
    qrels = be.load_qrels(path, "test")
    if limit:
        qrels = dict(list(qrels.items())[:limit])
    runs: dict[str, RankingOptions | None] = {
        "keyword": RankingOptions(embedding_weight=0),
        "dense": RankingOptions(text_weight=0),
        "default": None,
    }
    if sweep:
        runs |= {f"text {t:.2f}": RankingOptions(text_weight=t, embedding_weight=1 - t) for t in SWEEP if t > 0}
    with tempfile.TemporaryDirectory() as home:
        services = open_services(Settings(home=Path(home), embedding_model=model))
        try:
            started = time.perf_counter()
            for doc_id, text in corpus.items():
                services.ingestion.ingest(Upload(text.encode("utf-8"), f"{doc_id}.txt", "bench"))
            embedded = embed_all(services.vectors)
            built = time.perf_counter() - started
            print(
                f"\n{code}: {len(corpus)} paragraphs, {embedded} passages embedded in {built:.0f} s, {len(qrels)} queries"
            )
            print("| run | nDCG@10 | Recall@10 |\n|---|---|---|")
            for name, ranking in runs.items():
                run = {q: ranked_ids(services.search, queries[q], ranking) for q in qrels}
                ndcg = sum(be.per_query(run, qrels)["ndcg@10"]) / len(qrels)
                recall = sum(be.recall_at_k(run[q], qrels[q], 10) for q in qrels) / len(qrels)
                print(f"| {name} | {ndcg:.4f} | {recall:.4f} |", flush=True)
        finally:
            services.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=Settings().embedding_model, help="CALYPSO_EMBEDDING_MODEL for the run")
    parser.add_argument("--sets", default="en-de,zh-en,zh,de", help=f"comma-separated, of {','.join(SETS)}")
    parser.add_argument("--sweep", action="store_true", help="also explicit text weights " + ", ".join(map(str, SWEEP)))
    parser.add_argument("--limit", type=int, default=None, help="queries per set (default: all)")
    parser.add_argument("--scifact", action="store_true", help="also English (SciFact test)")
    args = parser.parse_args()
    root = be.data_root()
    codes = args.sets.split(",") + (["en"] if args.scifact else [])
    print(f"embedding model {args.model}")
    for code in codes:
        run_set(code, root / SETS[code], args.model, args.limit, args.sweep)


if __name__ == "__main__":
    main()
