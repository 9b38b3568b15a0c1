"""Rewrite docs/api.md's table of bad requests from what Calypso answers them (tests/bad_requests.py).

    python -m bench.bad_requests_table

Sends every case to the app in process (auth on, a fresh data directory; PostgreSQL when
CALYPSO_DATABASE_URL is set) and writes the rendered table between the markers;
tests/api/test_bad_requests_table.py fails when the doc and the answers disagree.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from fastapi.testclient import TestClient

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.services import open_services
from testkit.bad_requests import DOC, run_all, table, with_table

ADMIN = "admin-key-of-the-table-run"


def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home) / "home", auth="on", admin_key=ADMIN)
        services = open_services(settings)
        try:
            with TestClient(create_app(settings, services), raise_server_exceptions=False) as app:
                answers = run_all(app, ADMIN)
        finally:
            services.close()
    rendered = table(answers)
    DOC.write_text(with_table(rendered, DOC.read_text()))
    print(rendered.splitlines()[-1])


if __name__ == "__main__":
    main()
