"""Alps: does the first source of a search land on the gold PDF page? (issue 12)

Ingests ``alps_wiki.pdf`` through ``DocumentService`` with the default settings (chunking, analyzer,
BM25 parameters, embedding model), embeds its passages (``embed_all``, as the background worker would),
asks the 39 SQuAD questions with ``DocumentService.search`` and counts how often the first passage's page
range holds the question's gold page (``gold_pdf_pages``; also: its first page is the gold page), and how
often one of the top five does. ``--raw`` searches the questions as written (no query analysis), for
comparison; ``--keyword-only`` searches without the vectors (``embedding_weight=0``).

``--explain`` prints, for each question the first source misses, where the gold page's passages rank in
the keyword, dense and hybrid runs (with their raw BM25 and cosine) and what ranks above them.

    .venv/bin/python -m bench.alps_pages [--raw] [--keyword-only] [--show] [--explain]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from unittest import mock

from bench.common import beir as be
from calypso.config import Settings
from calypso.models import Passage, RankingOptions
from calypso.services import open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from calypso.services.search import SearchService

RUNS = {
    "keyword": RankingOptions(embedding_weight=0),
    "dense": RankingOptions(text_weight=0),
    "hybrid": None,
}


def on_gold(passage: Passage, gold: set[int]) -> bool:
    return bool(gold & set(range(passage.chunk.page_start, passage.chunk.page_end + 1)))


def explain(docs: SearchService, question: str, gold: set[int]) -> None:
    """The gold page's passages in each run: rank, scores, and the passages above the best of them."""
    for name, ranking in RUNS.items():
        passages = docs.search(question, docs.scope(max_results=100, ranking=ranking))
        ranks = [i for i, p in enumerate(passages) if on_gold(p, gold)]
        where = ", ".join(
            f"#{i + 1} (chunk {passages[i].chunk.chunk_index}, score {passages[i].score:.3f})" for i in ranks[:3]
        )
        print(f"    {name}: gold page's passages at {where or 'none in the top 100'}")
        for p in passages[: ranks[0] if ranks else 3]:
            raw = f"bm25 {p.keyword_score or 0:.2f}, cosine {p.vector_score or 0:.2f}"
            text = " ".join(p.chunk.text.split())[:90]
            print(f"      above: chunk {p.chunk.chunk_index} p{p.chunk.page_start} {p.score:.3f} ({raw}) {text!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw", action="store_true", help="search the questions as written (no query analysis)")
    parser.add_argument("--keyword-only", action="store_true", help="search without the vectors")
    parser.add_argument("--show", action="store_true", help="print each question's outcome")
    parser.add_argument("--explain", action="store_true", help="for each miss, where the gold page ranks and why")
    args = parser.parse_args()
    root = be.data_root() / "alps-wiki-qa"
    rows = [json.loads(line) for line in open(root / "alps_qa_with_pdf_pages.jsonl", encoding="utf-8")]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as home:
        services = open_services(Settings(home=Path(home)))
        try:
            searcher = services.search
            services.ingestion.ingest(Upload((root / "alps_wiki.pdf").read_bytes(), "alps_wiki.pdf"))
            embedded = embed_all(services.vectors)
            model = services.vectors.model or "none"
            ranking = RUNS["keyword"] if args.keyword_only else None
            patch = mock.patch("calypso.services.search.keyword_query", lambda q, *a: q) if args.raw else None
            if patch:
                patch.start()
            first = first_start = top5 = 0
            for r in rows:
                gold = set(r["gold_pdf_pages"])
                passages = searcher.search(r["question"], searcher.scope(max_results=5, ranking=ranking))
                hits = [on_gold(p, gold) for p in passages]
                first += bool(hits[:1] and hits[0])
                first_start += bool(passages and passages[0].chunk.page_start in gold)
                top5 += any(hits)
                if args.show or (args.explain and not (hits[:1] and hits[0])):
                    page = f"{passages[0].chunk.page_start}" if passages else "-"
                    print(
                        f"{'+' if hits[:1] and hits[0] else '-'} {r['qid']} gold {sorted(gold)} got {page}: {r['question']}"
                    )
                if args.explain and not (hits[:1] and hits[0]):
                    explain(searcher, r["question"], gold)
            if patch:
                patch.stop()
        finally:
            services.close()
    n = len(rows)
    mode = "questions as written" if args.raw else "query analysis"
    search = "keyword only" if args.keyword_only or model == "none" else f"hybrid ({model}, {embedded} passages)"
    print(
        f"Alps PDF, {mode}, {search}: first source on the gold page {first}/{n} (its first page the gold page "
        f"{first_start}/{n}), gold page in the top 5 {top5}/{n}"
    )
    print(f"({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
