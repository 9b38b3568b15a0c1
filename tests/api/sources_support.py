"""What the sources tests share: the app with background syncs off, folder files, errors and counts."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.services import Services

OLD = time.time() - 3600  # an mtime long settled: the file is not being written
SOURCE_KEYS = {
    "id",
    "object",
    "type",
    "namespace",
    "status",
    "created_at",
    "settings",
    "has_secret",
    "schedule_seconds",
    "next_sync_at",
    "last_sync",
}
COUNTS = ("added", "updated", "removed", "unchanged", "failed")


def write(path: Path, text: str, mtime: float = OLD) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime, mtime))


@pytest.fixture
def sources_api(settings: Settings, services: Services, tmp_path: Path) -> Iterator[httpx.Client]:
    settings.source_roots = str(tmp_path / "shared")
    settings.source_workers = 0
    (tmp_path / "shared").mkdir()
    with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
        yield client


def assert_error(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["param"] == param
    return body["error"]


def sync(api: httpx.Client, source_id: str) -> dict:
    response = api.post(f"/v1/sources/{source_id}/sync", params={"wait": "true"})
    assert response.status_code == 200, response.text
    last = response.json()["last_sync"]
    assert last["finished_at"] >= last["started_at"]
    return last


def counts(last: dict) -> tuple[int, ...]:
    return tuple(last[name] for name in COUNTS)


def hits(api: httpx.Client, query: str, namespace: str) -> list[str]:
    found = api.post("/v1/search", json={"query": query, "namespace": namespace}).json()["data"]
    return [hit["filename"] for hit in found]
