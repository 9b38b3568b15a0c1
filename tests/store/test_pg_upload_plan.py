"""A new upload on PostgreSQL reads no other document of its namespace (issue 45, goal 3).

A DELETE by (workspace, namespace, sha256) before every insert was planned on the namespace's index while the
table's statistics lagged the writes, so each upload walked the namespace: a vector store's 2,000-file batch grew
from 3.3 to 7.4 s up to 10,000 files. Work is checked, not time: the plan of every statement the upload sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from calypso.config import Settings
from calypso.models import Document
from calypso.services import open_storage
from calypso.store.base import Storage

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # PostgreSQL's planner only


@pytest.fixture
def storage(tmp_path: Any, database_url: str) -> Iterator[Storage]:
    opened = open_storage(Settings(home=tmp_path))
    yield opened
    opened.close()


def _document(n: int) -> Document:
    return Document(f"d{n}", f"file-d{n}", "default", "general", "a.txt", "text/plain", 1, f"sha{n}", n, 0, 0)


def _indexes(plan: Any) -> set[str]:
    if isinstance(plan, dict):
        return ({plan["Index Name"]} if "Index Name" in plan else set()).union(*map(_indexes, plan.values()))
    if isinstance(plan, list):
        return set().union(*map(_indexes, plan))
    return set()


def test_an_upload_never_plans_a_walk_over_its_namespace(
    storage: Storage, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(300):  # written just now: autovacuum has not analyzed the table
        storage.jobs.submit(_document(n), b"x")
    sent: list[tuple[str, Any]] = []
    execute = psycopg.Connection.execute

    def recording(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append((str(query), params))
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", recording)
    storage.jobs.submit(_document(300), b"x")
    monkeypatch.undo()
    reads = [(q, p) for q, p in sent if "documents" in q and q.lstrip().upper().startswith(("SELECT", "DELETE"))]
    with psycopg.connect(database_url, autocommit=True) as db:
        for query, params in reads:
            row = db.execute(f"EXPLAIN (FORMAT JSON) {query}", params).fetchone()
            assert row is not None
            used = _indexes(json.loads(row[0]) if isinstance(row[0], str) else row[0])
            assert not used & {"documents_by_namespace", "documents_by_workspace"}, (query, used)
