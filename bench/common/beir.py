"""BEIR-format loading and metrics shared by the retrieval benchmarks and tests.

Metrics follow pytrec_eval / BEIR: nDCG@k with graded gains ``rel`` (linear, as trec_eval's
``ndcg_cut``) and log2 discounts, ideal DCG over all judged-relevant docs; Recall@k is the
fraction of relevant docs found in the top k.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from bench.common.paths import REPO


def data_root() -> Path:
    """CALYPSO_EVAL_DATA, defaulting to <repo>/../shared/data."""
    return Path(os.environ.get("CALYPSO_EVAL_DATA", REPO.parent / "shared" / "data"))


def scifact_dir() -> Path:
    return data_root() / "beir-scifact"


def load_corpus(path: Path) -> dict[str, str]:
    """doc id -> "title text" (BEIR indexes title and text as one passage)."""
    out: dict[str, str] = {}
    with open(path / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out[d["_id"]] = (d.get("title", "") + " " + d.get("text", "")).strip()
    return out


def load_queries(path: Path) -> dict[str, str]:
    with open(path / "queries.jsonl", encoding="utf-8") as f:
        return {d["_id"]: d["text"] for d in map(json.loads, f)}


def load_qrels(path: Path, split: str) -> dict[str, dict[str, int]]:
    """query id -> {doc id: relevance} for qrels/<split>.tsv (header line skipped)."""
    qrels: dict[str, dict[str, int]] = {}
    with open(path / "qrels" / f"{split}.tsv", encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        next(rows)
        for row in rows:
            if len(row) >= 3:
                qrels.setdefault(row[0].strip(), {})[row[1].strip()] = int(row[2])
    return qrels


def iter_sentences(path: Path) -> Iterator[tuple[str, str, list[str]]]:
    """(doc id, title, sentences) from corpus_sentences.jsonl.gz."""
    with gzip.open(path / "corpus_sentences.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            yield d["_id"], d.get("title", ""), d["sentences"]


def ndcg_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], rels: Mapping[str, int], k: int = 100) -> float:
    relevant = {d for d, r in rels.items() if r > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def per_query(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, list[float]]:
    """nDCG@10 and Recall@100 of each judged query, in qrels order (missing runs are 0)."""
    return {
        "ndcg@10": [ndcg_at_k(run.get(q, []), rels, 10) for q, rels in qrels.items()],
        "recall@100": [recall_at_k(run.get(q, []), rels, 100) for q, rels in qrels.items()],
    }


def evaluate(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean nDCG@10 and Recall@100 over the judged queries (missing runs count as 0)."""
    return {m: sum(v) / len(v) for m, v in per_query(run, qrels).items()}
