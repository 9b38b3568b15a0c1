"""Exact tokens win (issue 42): identifier queries, SciFact and the Alps, before and after the exact-match signal.

Everything goes through ``SearchService.search`` with the default embedding model, three ways:

- keyword only: ``RankingOptions(embedding_weight=0)``;
- hybrid before: plain fusion, the server's weights given explicitly (``text_weight=0.6, embedding_weight=0.4``:
  weights a request gives are used as given, without the exact-match signal);
- hybrid after: the server's defaults (``ranking=None``), with the signal (``retrieval.exact_match``).

Identifier queries: 13 on the IRS manual (400 pages; gold: the pages where the exhibit's title or the code
stands, not the table of contents) and 5 on the Federal Register's two airworthiness directives; printed is the
rank of the first passage whose pages hold a gold page. SciFact: nDCG@10 on qrels/test (and train with
``--train``), one passage per abstract as bench/hybrid_quality.py. Alps: first source holds the gold page.

``--designs`` also compares the fusion designs of ``retrieval/exact_match.py``'s docstring offline, over the
same runs (the keyword run, the vector run and each identifier term's holders, as the service fetches them).

    .venv/bin/python -m bench.exact_tokens [--designs] [--train] [--skip-scifact]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import beir as be
from bench.hybrid_quality import loadavg, open_with_model
from calypso.config import Settings
from calypso.embeddings.calibration import DEFAULT_QUERY_FLOOR as MIN_COSINE  # their model: MiniLM
from calypso.ingest.parsers import detect_and_parse
from calypso.models import RankingOptions
from calypso.retrieval import exact_match
from calypso.retrieval.hybrid import NEIGHBOUR_POOL, NEIGHBOUR_WEIGHT, fuse, smooth_neighbours
from calypso.retrieval.identifiers import identifiers
from calypso.retrieval.query import keyword_query
from calypso.services import Services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from calypso.services.search import HYBRID_DEPTH
from calypso.text.tokenize import DEFAULT_ANALYZER

MODES: dict[str, RankingOptions | None] = {
    "keyword": RankingOptions(embedding_weight=0),
    "before": RankingOptions(text_weight=0.6, embedding_weight=0.4),
    "after": None,
}
IRS = "ingestion-docs/pdf/irs-irm-2.3.59-400p.pdf"
REGISTER = "ingestion-docs/pdf/federal-register-2020-17221.pdf"
# (query, the text whose pages are gold)
IRS_QUERIES = [
    ("Command Code BMFOL BMF Return Form 1041 Display", "Command Code BMFOL BMF Return Form 1041 Display"),
    ("What does CFOL007 mean?", "CFOL007"),
    ("TC902", "TC902"),
    ("CC53 Indicator", "CC53"),
    ("BMFOL Return Form 5500 Display", "Command Code BMFOL Return Form 5500 Display"),
    ("Form 990T Display", "Command Code BMFOL Return Form 990T Display"),
    ("TC767 deferral", "TC767"),
    ("Form 706GS(T) Display", "Command Code BMFOL Return Form 706GS(T) Display"),
    ("Form 8743 Display", "Command Code BMFOL BMF Return Form 8743 Display"),
    ("error CFOL029", "CFOL029-"),
    ("Form 1042 Display", "Command Code BMFOL Return Form 1042 Display"),
    ("BMFOL Return Form 720 Display", "Command Code BMFOL BMF Return Form 720 Display"),
    ("IRC 965 Liability Schedule Screen", "Command Code BMFOL IRC 965 Liability Schedule Screen"),
]
REGISTER_QUERIES = [
    ("§ 39.13", "§ 39.13"),
    ("Docket No. FAA-2020-0746", "FAA–2020–0746"),
    ("Executive Order 12866", "Executive Order 12866"),
    ("Product Identifier 2019-CE-012-AD", "2019–CE–012–AD"),
    ("49 U.S.C. 106(g)", "49 U.S.C. 106(g)"),
]
CONTENTS_LINE = re.compile(r"2\.3\.59-\d+ $")


def gold_pages(pdf: bytes, text: str) -> set[int]:
    """The pages where ``text`` stands, except as a line of the manual's table of contents."""
    parsed, _ = detect_and_parse(pdf, "gold.pdf")
    pages = set()
    for page in parsed.pages:
        content = parsed.text[page.start : page.end]
        for found in re.finditer(re.escape(text), content):
            if not CONTENTS_LINE.search(content[max(0, found.start() - 20) : found.start()]):
                pages.add(page.number)
    return pages


class Runs:
    """One query's runs as the service fetches them, for the offline design comparison."""

    def __init__(self, services: Services, namespace: str, query: str) -> None:
        search = services.search
        index, vectors = search.index(namespace), search.vectors(namespace)
        assert vectors is not None
        keywords = keyword_query(query)
        self.text = index.search(keywords, k=HYBRID_DEPTH)
        dense = vectors.search(search.query_vector(query), k=HYBRID_DEPTH)
        self.dense = [(key, cosine) for key, cosine in dense if cosine >= MIN_COSINE]
        self.passages, self.query_idf = len(index), index.max_score(keywords)
        self.holders: dict[str, tuple[float, list[int]]] = {}
        self.term_runs: dict[str, list[tuple[int, float]]] = {}
        for identifier in identifiers(query):
            for term in DEFAULT_ANALYZER.tokenize(identifier, index.query_language()):
                if term not in self.holders:
                    self.term_runs[term] = index.search(term, k=HYBRID_DEPTH)
                    self.holders[term] = (index.max_score(term), [key for key, _ in self.term_runs[term]])
        self.keys = {key for run in (self.text, self.dense) for key, _ in run}
        self.keys |= {key for _, hits in self.holders.values() for key in hits}


def design_table() -> dict[str, Callable[[Runs, dict[int, tuple[int, int]]], list[tuple[int, float]]]]:
    """Each design: a query's runs and chunk positions -> the ranking (fused, then smoothed as shipped)."""

    def ranked(runs: Runs, positions: dict[int, tuple[int, int]], text_w: float, signal: dict[int, float], w: float):  # type: ignore[no-untyped-def]
        pool = fuse(
            runs.text, runs.dense, text_weight=text_w, embedding_weight=1 - text_w, exact=signal, exact_weight=w
        )
        pool = pool[:NEIGHBOUR_POOL]
        return smooth_neighbours(pool, {k: positions[k] for k, _ in pool if k in positions}, NEIGHBOUR_WEIGHT)

    def rare(runs: Runs) -> dict[str, float]:
        return exact_match.rare_terms({t: idf for t, (idf, _) in runs.holders.items()}, runs.passages)

    def weights(text_w: float):  # type: ignore[no-untyped-def]
        return lambda runs, pos: ranked(runs, pos, text_w if rare(runs) else 0.6, {}, 0.0)

    def presence(scale: float, by_share: bool):  # type: ignore[no-untyped-def]
        def run(runs: Runs, pos: dict[int, tuple[int, int]]) -> list[tuple[int, float]]:
            terms = rare(runs)
            signal = exact_match.exact_matches({t: runs.holders[t] for t in terms})
            share = min(1.0, sum(terms.values()) / runs.query_idf) if runs.query_idf > 0 else 0.0
            return ranked(runs, pos, 0.6, signal, scale * share if by_share else scale if terms else 0.0)

        return run

    def identifier_bm25(scale: float):  # type: ignore[no-untyped-def]
        def run(runs: Runs, pos: dict[int, tuple[int, int]]) -> list[tuple[int, float]]:
            terms = rare(runs)
            if not terms:
                return ranked(runs, pos, 0.6, {}, 0.0)
            # BM25 of the rare identifier terms alone, min-max normalised like the other runs.
            scores: dict[int, float] = {}
            for term in terms:
                for key, score in runs.term_runs[term]:
                    scores[key] = scores.get(key, 0.0) + score
            low, high = min(scores.values()), max(scores.values())
            span = high - low or 1.0
            return ranked(runs, pos, 0.6, {key: (s - low) / span for key, s in scores.items()}, scale)

        return run

    return {
        "plain fusion 0.6 / 0.4 (before)": lambda runs, pos: ranked(runs, pos, 0.6, {}, 0.0),
        "text run alone (weight 1), smoothed": lambda runs, pos: ranked(runs, pos, 1.0, {}, 0.0),
        "weights: text 0.75 with a rare identifier": weights(0.75),
        "weights: text 0.9 with a rare identifier": weights(0.9),
        "third run: BM25 of the rare identifier terms, weight 2": identifier_bm25(2.0),
        "presence signal, fixed weight 1": presence(1.0, False),
        "presence signal, 1.0 x idf share": presence(1.0, True),
        "presence signal, 1.5 x idf share (shipped)": presence(exact_match.EXACT_WEIGHT, True),
        "presence signal, 2.0 x idf share": presence(2.0, True),
    }


def first_gold_rank(
    ranked: Sequence[tuple[int, float]], pages: dict[int, tuple[int, int]], gold: set[int]
) -> int | None:
    for rank, (key, _) in enumerate(ranked, 1):
        first, last = pages[key]
        if gold & set(range(first, last + 1)):
            return rank
    return None


def page_ranges(services: Services, keys: Sequence[int], namespace: str) -> dict[int, tuple[int, int]]:
    stored = services.search.store.get_passages("default", list(keys), namespace)
    return {key: (chunk.chunk.page_start, chunk.chunk.page_end) for key, (chunk, _) in stored.items()}


def identifier_queries(work: Path, designs: bool) -> dict[str, Any]:
    data = be.data_root()
    services = open_with_model(Settings(home=work / "identifiers"))
    out: dict[str, Any] = {}
    try:
        for path, name in ((IRS, "irs"), (REGISTER, "register")):
            services.ingestion.ingest(Upload((data / path).read_bytes(), Path(path).name, name))
        passages = embed_all(services.vectors)
        print(f"identifier queries: IRS manual and Federal Register, {passages} passages embedded", flush=True)
        print("\n| document | query | gold pages | keyword | hybrid before | hybrid after |\n|---|---|---|---|---|---|")
        table = design_table() if designs else {}
        design_firsts: dict[str, dict[str, int]] = {name: {} for name in table}
        for path, namespace, queries in ((IRS, "irs", IRS_QUERIES), (REGISTER, "register", REGISTER_QUERIES)):
            pdf = (data / path).read_bytes()
            for query, gold_text in queries:
                gold = gold_pages(pdf, gold_text)
                ranks = {}
                for mode, ranking in MODES.items():
                    hits = services.search.search(
                        query, services.search.scope(namespace, max_results=10, ranking=ranking)
                    )
                    ranks[mode] = next(
                        (
                            i
                            for i, p in enumerate(hits, 1)
                            if gold & set(range(p.chunk.page_start, p.chunk.page_end + 1))
                        ),
                        None,
                    )
                out[query] = ranks
                shown = " | ".join(str(ranks[m] or ">10") for m in MODES)
                print(f"| {namespace} | {query} | {min(gold)}-{max(gold)} | {shown} |", flush=True)
                if table:
                    runs = Runs(services, namespace, query)
                    positions = services.search.store.chunk_positions(sorted(runs.keys))
                    pages = page_ranges(services, sorted(runs.keys), namespace)
                    for name, design in table.items():
                        rank = first_gold_rank(design(runs, positions), pages, gold)
                        design_firsts[name][namespace] = design_firsts[name].get(namespace, 0) + (rank == 1)
        for mode in MODES:
            firsts = sum(1 for ranks in out.values() if ranks[mode] == 1)
            print(f"  gold page first, {mode}: {firsts}/{len(out)}")
        if table:
            out["designs"] = design_firsts
            print("\n| design | IRS first (of 13) | Federal Register first (of 5) |\n|---|---|---|")
            for name, firsts in design_firsts.items():
                print(f"| {name} | {firsts.get('irs', 0)} | {firsts.get('register', 0)} |")
    finally:
        services.close()
    return out


def alps(work: Path) -> dict[str, int]:
    root = be.data_root() / "alps-wiki-qa"
    rows = [json.loads(line) for line in open(root / "alps_qa_with_pdf_pages.jsonl", encoding="utf-8")]
    services = open_with_model(Settings(home=work / "alps"))
    out: dict[str, int] = {}
    try:
        services.ingestion.ingest(Upload((root / "alps_wiki.pdf").read_bytes(), "alps_wiki.pdf"))
        embed_all(services.vectors)
        search = services.search
        for mode, ranking in MODES.items():
            first = 0
            for row in rows:
                hits = search.search(row["question"], search.scope(max_results=5, ranking=ranking))
                first += bool(hits) and bool(
                    set(row["gold_pdf_pages"]) & set(range(hits[0].chunk.page_start, hits[0].chunk.page_end + 1))
                )
            out[mode] = first
        print(
            f"\nAlps, first source holds the gold page (of {len(rows)}): "
            + ", ".join(f"{m} {n}" for m, n in out.items())
        )
    finally:
        services.close()
    return out


def scifact(work: Path, train: bool, designs: bool) -> dict[str, dict[str, float]]:
    path = be.scifact_dir()
    corpus, queries = be.load_corpus(path), be.load_queries(path)
    splits = {"test": be.load_qrels(path, "test")} | ({"train": be.load_qrels(path, "train")} if train else {})
    services = open_with_model(Settings(home=work / "scifact", chunk_size=100_000, chunk_overlap=0))
    out: dict[str, dict[str, float]] = {}
    try:
        for doc_id, text in corpus.items():
            services.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", "scifact"))
        embed_all(services.vectors)
        search = services.search
        table = design_table() if designs else {}
        for split, qrels in splits.items():
            if table:
                docs: dict[int, str] = {}
                design_runs: dict[str, dict[str, list[str]]] = {name: {} for name in table}
                for qid in qrels:
                    runs = Runs(services, "scifact", queries[qid])
                    positions = search.store.chunk_positions(sorted(runs.keys))
                    missing = [key for key in runs.keys if key not in docs]
                    for key, (_, document) in search.store.get_passages("default", missing, "scifact").items():
                        docs[key] = document.filename.removesuffix(".txt")
                    for name, design in table.items():
                        design_runs[name][qid] = list(dict.fromkeys(docs[key] for key, _ in design(runs, positions)))
                for name, run in design_runs.items():
                    out.setdefault(f"{split}, designs", {})[name] = be.evaluate(run, qrels)["ndcg@10"]
                    print(f"  SciFact {split} nDCG@10, {name}: {out[f'{split}, designs'][name]:.4f}", flush=True)
            for mode, ranking in MODES.items():
                run: dict[str, list[str]] = {}
                for qid in qrels:
                    ids: list[str] = []
                    for p in search.search(queries[qid], search.scope("scifact", max_results=100, ranking=ranking)):
                        doc = p.document.filename.removesuffix(".txt")
                        if doc not in ids:
                            ids.append(doc)
                    run[qid] = ids
                out.setdefault(split, {})[mode] = be.evaluate(run, qrels)["ndcg@10"]
            print(f"SciFact {split} nDCG@10: " + ", ".join(f"{m} {v:.4f}" for m, v in out[split].items()), flush=True)
    finally:
        services.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--designs", action="store_true", help="also compare the fusion designs offline")
    parser.add_argument("--train", action="store_true", help="SciFact train too (809 claims)")
    parser.add_argument("--skip-scifact", action="store_true")
    args = parser.parse_args()
    print(f"load average {loadavg()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="calypso-exact-"))
    started = time.perf_counter()
    try:
        identifier_queries(work, args.designs)
        alps(work)
        if not args.skip_scifact:
            scifact(work, args.train, args.designs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n({time.perf_counter() - started:.0f} s; load average {loadavg()})")


if __name__ == "__main__":
    main()
