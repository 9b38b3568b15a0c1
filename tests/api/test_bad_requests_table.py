"""docs/api.md's table of bad requests, checked: every case is sent to a real app (auth on, over httpx),
its status, type, code and param must be the ones the case list says, and the table in the doc must be
the one rendered from these answers (``python bench/bad_requests_table.py`` rewrites it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.services import open_services
from testkit.bad_requests import CASES, Answer, documented_table, run_all, table

ADMIN = "admin-secret-for-bad-requests"


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Answer]]:
    """Every case's answer, from one app (the cases change nothing the others read)."""
    settings = Settings(home=Path(tmp_path_factory.mktemp("bad-requests")) / "home", auth="on", admin_key=ADMIN)
    services = open_services(settings)
    try:
        with TestClient(create_app(settings, services), raise_server_exceptions=False) as app:
            yield run_all(app, ADMIN)
    finally:
        services.close()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_each_bad_request_answers_as_the_table_says(case, answers) -> None:
    assert answers[case.id] == case.expected


def test_the_doc_table_is_the_one_these_answers_render(answers) -> None:
    assert documented_table() == table(answers), "run: python bench/bad_requests_table.py"


def test_the_table_has_thirty_rows_or_more_and_differences_are_explained() -> None:
    assert len(CASES) >= 30
    assert len({case.id for case in CASES}) == len(CASES)
    for case in CASES:
        assert case.source in ("recorded", "pattern", "reference", "unconfirmed"), case.id
        assert (case.calypso is None) or case.note, f"{case.id}: a difference needs its note"
