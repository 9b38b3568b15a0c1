"""Retrieval per language through ``DocumentService.search`` on the README's defaults (issue 22).

For each set in ``../shared/data/multilingual/`` (Chinese CMRC 2018, German XQuAD; ``--scifact`` adds
English), every paragraph is ingested as its own document (title and text, as BEIR indexes them) into a
fresh knowledge base with the default settings and the bundled embedding model, its passages embedded
(``embed_all``), and each query searched by keywords only and by the default search (hybrid, or keywords
alone where the model does not cover the language). A second pass declares the model multilingual
(``CALYPSO_EMBEDDING_LANGUAGES=*``), so vectors are used whatever the language: vectors only, and hybrid. It prints
nDCG@10 and Recall@10 per run, then the keyword analyzer's throughput on each corpus beside the a1
English-only analyzer (``\\w+``, Lucene stop words, Snowball English) in the same process.

    .venv/bin/python -m bench.multilingual [--scifact] [--limit N] [--no-dense]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import Stemmer

from bench.common import beir as be
from calypso.config import Settings
from calypso.models import RankingOptions
from calypso.services import open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from calypso.services.search import SearchService
from calypso.text.tokenize import DEFAULT_ANALYZER, STOPWORDS_EN

SETS = {"zh": "multilingual/cmrc2018-zh", "de": "multilingual/xquad-de"}
RUNS = {"keyword": RankingOptions(embedding_weight=0), "dense": RankingOptions(text_weight=0), "default": None}


def corpus_rows(path: Path) -> list[tuple[str, str]]:
    with open(path / "corpus.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [(r["_id"], (r.get("title", "") + " " + r.get("text", "")).strip()) for r in rows]


def ranked_ids(docs: SearchService, query: str, ranking: RankingOptions | None) -> list[str]:
    """Corpus ids in rank order (a paragraph split into several passages counts at its best)."""
    seen: dict[str, None] = {}
    for passage in docs.search(query, docs.scope("bench", max_results=50, ranking=ranking)):
        seen.setdefault(passage.document.filename.removesuffix(".txt"), None)
    return list(seen)


def evaluate(docs: SearchService, queries: dict[str, str], qrels: dict, runs: dict) -> dict[str, dict[str, float]]:
    out = {}
    for name, ranking in runs.items():
        run = {q: ranked_ids(docs, queries[q], ranking) for q in qrels}
        per = be.per_query(run, qrels)
        recall10 = [be.recall_at_k(run[q], qrels[q], 10) for q in qrels]
        out[name] = {"ndcg@10": sum(per["ndcg@10"]) / len(qrels), "recall@10": sum(recall10) / len(qrels)}
    return out


def retrieval(code: str, path: Path, limit: int | None, dense: bool) -> None:
    rows = corpus_rows(path)
    queries = be.load_queries(path)
    qrels = be.load_qrels(path, "test")
    if limit:
        qrels = dict(list(qrels.items())[:limit])
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home), embedding_model=Settings().embedding_model if dense else "none")
        services = open_services(settings)
        try:
            t0 = time.perf_counter()
            for doc_id, text in rows:
                services.ingestion.ingest(Upload(text.encode("utf-8"), f"{doc_id}.txt", "bench"))
            ingest_s = time.perf_counter() - t0
            embedded = embed_all(services.vectors)
            index = services.search.index("bench")
            runs = {"keyword": RUNS["keyword"], "default": None} if dense else {"keyword": RUNS["keyword"]}
            figures = evaluate(services.search, queries, qrels, runs)
        finally:
            services.close()
        if dense:  # the same knowledge base, its model declared multilingual: vectors used whatever the language
            services = open_services(Settings(home=Path(home), embedding_languages="*"))
            try:
                unguarded = evaluate(services.search, queries, qrels, {"dense": RUNS["dense"], "hybrid": None})
                figures["dense (model declared multilingual)"] = unguarded["dense"]
                figures["hybrid (model declared multilingual)"] = unguarded["hybrid"]
            finally:
                services.close()
    print(
        f"\n{code}: {len(rows)} paragraphs ({ingest_s:.0f} s to ingest, {embedded} passages embedded), "
        f"{len(qrels)} queries; knowledge base language {index.query_language()!r}"
    )
    print("| run | nDCG@10 | Recall@10 |\n|---|---|---|")
    for name, m in figures.items():
        print(f"| {name} | {m['ndcg@10']:.4f} | {m['recall@10']:.4f} |")


def english_a1() -> object:
    """The analyzer before issue 22 (a1), for the throughput reference."""
    stems: dict[str, str] = {}
    stemmer = Stemmer.Stemmer("english")
    words = re.compile(r"\w+").findall

    def stem(token: str) -> str:
        found = stems.get(token)
        if found is None:
            found = stems[token] = "" if token in STOPWORDS_EN or len(token) < 2 else stemmer.stemWord(token)
        return found

    return lambda text: [s for s in map(stem, words(text.lower())) if s]


def throughput(corpora: dict[str, list[str]], rounds: int = 5) -> None:
    """Passages/s and characters/s of each analyzer on each corpus, interleaved rounds, best of each."""
    analyzers = {"a1 (English only)": english_a1(), "a2 (per language)": DEFAULT_ANALYZER.tokenize}
    best: dict[tuple[str, str], float] = {}
    for _ in range(rounds):
        for corpus, texts in corpora.items():
            for name, analyze in analyzers.items():
                t0 = time.perf_counter()
                for text in texts:
                    analyze(text)  # type: ignore[operator]
                elapsed = time.perf_counter() - t0
                best[corpus, name] = min(best.get((corpus, name), elapsed), elapsed)
    english = best["en", "a1 (English only)"] / sum(map(len, corpora["en"]))  # seconds per character
    print("\n| corpus | analyzer | passages/s | MB/s | time per character vs a1 on English |\n|---|---|---|---|---|")
    for (corpus, name), elapsed in best.items():
        chars = sum(map(len, corpora[corpus]))
        print(
            f"| {corpus} | {name} | {len(corpora[corpus]) / elapsed:,.0f} | {chars / elapsed / 1e6:.1f} | "
            f"{elapsed / chars / english:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scifact", action="store_true", help="also English (BEIR SciFact test queries)")
    parser.add_argument("--limit", type=int, default=None, help="queries per set (default: all)")
    parser.add_argument("--no-dense", action="store_true", help="keyword runs only (no embedding model)")
    args = parser.parse_args()
    root = be.data_root()
    sets = dict(SETS, en="beir-scifact") if args.scifact else dict(SETS)
    for code, rel in sets.items():
        retrieval(code, root / rel, args.limit, not args.no_dense)
    corpora = {
        code: [text for _, text in corpus_rows(root / rel)] for code, rel in dict(SETS, en="beir-scifact").items()
    }
    throughput(corpora)


if __name__ == "__main__":
    main()
