"""Retrieval over chunks as ingestion makes them: what the sentence splitter and chunker change.

bench/retrieval_quality.py indexes each SciFact abstract whole; here every document is
cut by ``chunk_document`` (default 1000 characters, 150 overlap) first, as
``KnowledgeBase.ingest`` does:

* SciFact test: nDCG@10 / Recall@100 with a document scored by its best chunk (MaxP);
* Alps (Wikipedia article as PDF and as HTML, 39 SQuAD questions with a gold sentence):
  how many gold sentences lie wholly inside one chunk, and how often a chunk holding
  the gold sentence is ranked in the top 1 / top 5 for the question.

    .venv/bin/python -m bench.chunked_retrieval
"""

from __future__ import annotations

import json
import re
import time

from bench.common import beir as be
from calypso.ingest.chunking import chunk_document
from calypso.ingest.parsers import detect_and_parse
from calypso.models import Page, ParsedDocument
from calypso.retrieval.bm25 import BM25Index

SIZE, OVERLAP = 1000, 150


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def scifact() -> None:
    path = be.scifact_dir()
    corpus, queries, test = be.load_corpus(path), be.load_queries(path), be.load_qrels(path, "test")
    ids = list(corpus)
    idx = BM25Index()
    owner: list[int] = []
    items = []
    for d, doc_id in enumerate(ids):
        text = corpus[doc_id]
        chunks = chunk_document(ParsedDocument(text=text, pages=[Page(1, "1", 0, len(text))]), SIZE, OVERLAP)
        keys = []
        for chunk in chunks:
            keys.append((len(owner), chunk.text))
            owner.append(d)
        items.append((d, keys))
    idx.add_many(items)
    run = {}
    for q in test:
        ranked: list[str] = []
        for key, _ in idx.search(queries[q], k=300):
            doc_id = ids[owner[key]]
            if doc_id not in ranked:
                ranked.append(doc_id)
        run[q] = ranked[:100]
    m = be.per_query(run, test)
    mean = {name: sum(v) / len(v) for name, v in m.items()}
    print(
        f"SciFact test, chunked ({len(owner):,} chunks from {len(ids):,} abstracts), MaxP: "
        f"nDCG@10 {mean['ndcg@10']:.4f}, Recall@100 {mean['recall@100']:.4f}"
    )


def alps() -> None:
    root = be.data_root() / "alps-wiki-qa"
    rows = [json.loads(line) for line in open(root / "alps_ground_truth.jsonl", encoding="utf-8")]
    for name in ("alps_wiki.pdf", "alps_wiki.html"):
        parsed, _ = detect_and_parse((root / name).read_bytes(), name)
        chunks = chunk_document(parsed, SIZE, OVERLAP)
        idx = BM25Index()
        idx.add(0, [(c.chunk_index, c.text) for c in chunks])
        normed = [_norm(c.text) for c in chunks]
        inside = top1 = top5 = 0
        for r in rows:
            fact = _norm(" ".join(r["facts"]))
            holding = {i for i, text in enumerate(normed) if fact in text}
            inside += bool(holding)
            ranked = [key for key, _ in idx.search(r["question"], k=5)]
            top1 += bool(ranked[:1] and ranked[0] in holding)
            top5 += bool(holding.intersection(ranked))
        n = len(rows)
        print(
            f"Alps {name}: {len(chunks)} chunks, mean {sum(len(c.text) for c in chunks) / len(chunks):.0f} chars; "
            f"gold sentence inside one chunk {inside}/{n}; chunk with it ranked first {top1}/{n}, in top 5 {top5}/{n}"
        )


def main() -> None:
    t0 = time.perf_counter()
    scifact()
    alps()
    print(f"({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
