"""/v1/sources over the app: the source's lifecycle, a folder kept in sync, bad input and hostile folders.

Runs on SQLite here and on PostgreSQL in the PG lane (CALYPSO_TEST_BACKEND=postgres). Background sync workers
are off, so each sync's counts are those of the sync the test asked for.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from sources_support import OLD, SOURCE_KEYS, assert_error, counts, hits, sources_api, sync, write

from calypso.config import Settings
from calypso.services import Services

__all__ = ["sources_api"]


def test_folder_source_lifecycle_and_resync(sources_api: httpx.Client, tmp_path: Path) -> None:
    api, folder = sources_api, tmp_path / "shared" / "handbook"
    for n in range(6):
        write(folder / f"chapter{n}.md", f"# Chapter {n}\n\nThe walrus{n} policy says chapter {n} applies.\n")
    write(folder / "sub" / "deep.md", "# Deep\n\nThe narwhal clause lives in a subfolder.\n")
    write(folder / "notes.bin", "skipped by the include glob")

    created = sources_api.post(
        "/v1/sources",
        json={"type": "folder", "namespace": "handbook", "path": str(folder), "include": ["*.md"], "schedule": "1h"},
    )
    assert created.status_code == 201, created.text
    source = created.json()
    assert set(source) == SOURCE_KEYS
    assert source["object"] == "source" and source["type"] == "folder" and source["namespace"] == "handbook"
    assert source["status"] == "queued" and source["last_sync"] is None and source["schedule_seconds"] == 3600

    first = sync(api, source["id"])
    assert counts(first) == (7, 0, 0, 0, 0) and first["status"] == "completed"
    assert hits(api, "narwhal clause", "handbook")
    assert api.get(f"/v1/sources/{source['id']}").json()["next_sync_at"] >= time.time() + 3500

    assert counts(sync(api, source["id"])) == (0, 0, 0, 7, 0)  # nothing changed: nothing read
    full = api.post(f"/v1/sources/{source['id']}/sync", params={"wait": "true"}, json={"full": True})
    assert counts(full.json()["last_sync"]) == (0, 0, 0, 7, 0)  # every file read: the same bytes
    assert_error(api.post(f"/v1/sources/{source['id']}/sync", json={"full": True}), 400, "full")
    assert_error(api.post(f"/v1/sources/{source['id']}/sync", json={"fast": True}), 400, "fast")

    write(folder / "chapter1.md", "# Chapter 1\n\nThe dugong rule replaced the old one.\n", OLD + 5)
    (folder / "chapter2.md").unlink()
    (folder / "chapter3.md").rename(folder / "renamed3.md")  # same bytes under a new name: the document stays
    write(folder / "chapter4.md", (folder / "chapter4.md").read_text(), OLD + 9)  # touched, not changed
    kept = {d["filename"]: d["id"] for d in api.get("/v1/documents", params={"namespace": "handbook"}).json()["data"]}

    second = sync(api, source["id"])
    assert counts(second) == (1, 1, 2, 4, 0), second
    assert hits(api, "dugong", "handbook") == ["chapter1.md"]  # the new passages entered, the old ones left
    assert hits(api, "walrus1", "handbook") == [] and hits(api, "walrus2", "handbook") == []
    assert hits(api, "walrus3", "handbook") == ["chapter3.md"]
    after = {d["filename"]: d["id"] for d in api.get("/v1/documents", params={"namespace": "handbook"}).json()["data"]}
    assert after["chapter3.md"] == kept["chapter3.md"] and after["chapter4.md"] == kept["chapter4.md"]
    assert len(after) == 6

    listed = api.get("/v1/sources").json()
    assert listed["object"] == "list" and [s["id"] for s in listed["data"]] == [source["id"]]
    assert listed["data"][0]["last_sync"]["removed"] == 2

    deleted = api.delete(f"/v1/sources/{source['id']}")
    assert deleted.json() == {"id": source["id"], "object": "source.deleted", "deleted": True}
    assert api.get("/v1/documents", params={"namespace": "handbook"}).json()["data"] == []
    assert_error(api.get(f"/v1/sources/{source['id']}"), 404, "source_id")
    assert_error(api.post(f"/v1/sources/{source['id']}/sync"), 404, "source_id")


def test_a_sync_without_wait_is_queued_for_a_worker(sources_api: httpx.Client, tmp_path: Path) -> None:
    folder = tmp_path / "shared" / "queued"
    write(folder / "a.txt", "The okapi note.")
    source = sources_api.post("/v1/sources", json={"type": "folder", "namespace": "q", "path": str(folder)}).json()
    response = sources_api.post(f"/v1/sources/{source['id']}/sync")
    assert response.status_code == 202 and response.json()["status"] == "queued"
    assert sources_api.app.state.services.sources.run_one("test-worker") is not None  # what a worker does
    done = sources_api.get(f"/v1/sources/{source['id']}").json()
    assert done["status"] == "idle" and done["last_sync"]["added"] == 1


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"type": "dropbox", "namespace": "x"}, "type"),
        ({"namespace": "x", "path": "/tmp"}, "type"),
        ({"type": "folder", "namespace": "x"}, "path"),
        ({"type": "folder", "namespace": "x", "path": "relative/dir"}, "path"),
        ({"type": "folder", "namespace": "x", "path": "/etc"}, "path"),
        ({"type": "folder", "namespace": "x", "path": "{shared}/missing"}, "path"),
        ({"type": "folder", "namespace": "x", "path": "{shared}", "include": "*.md"}, "include"),
        ({"type": "folder", "namespace": "x", "path": "{shared}", "schedule": "5s"}, "schedule"),
        ({"type": "folder", "namespace": "x", "path": "{shared}", "colour": "red"}, "colour"),
        ({"type": "folder", "namespace": "bad name!", "path": "{shared}"}, "namespace"),
    ],
)
def test_bad_input_is_refused_naming_the_field(
    sources_api: httpx.Client, tmp_path: Path, body: dict, param: str
) -> None:
    body = {k: v.replace("{shared}", str(tmp_path / "shared")) if isinstance(v, str) else v for k, v in body.items()}
    assert_error(sources_api.post("/v1/sources", json=body), 400, param)
    assert sources_api.get("/v1/sources").json()["data"] == []


def test_hostile_folders_are_bounded_and_reported(
    sources_api: httpx.Client, settings: Settings, tmp_path: Path
) -> None:
    folder = tmp_path / "shared" / "hostile"
    write(folder / "ok.md", "The quokka paragraph.")
    (folder / "loop").mkdir()
    (folder / "loop" / "again").symlink_to(folder, target_is_directory=True)  # a symlink loop
    write(folder / "huge.txt", "x" * 5000)
    write(folder / "writing.txt", "half a file", time.time())  # modified just now: still being written
    settings.max_upload_bytes = 4000
    source = sources_api.post("/v1/sources", json={"type": "folder", "namespace": "h", "path": str(folder)}).json()
    last = sync(sources_api, source["id"])
    assert (last["added"], last["failed"], last["pending"]) == (1, 1, 1), last
    messages = " ".join(e["message"] for e in last["errors"])
    assert "symbolic link loop" in messages and "upload limit" in messages
    assert sources_api.get("/healthz").status_code == 200


def test_one_sync_per_source_and_a_dead_workers_sync_is_taken_over(
    sources_api: httpx.Client, services: Services, tmp_path: Path
) -> None:
    folder = tmp_path / "shared" / "leased"
    write(folder / "a.txt", "The kinkajou note.")
    source = sources_api.post("/v1/sources", json={"type": "folder", "namespace": "l", "path": str(folder)}).json()
    store = services.storage.sources
    assert store.claim("worker-a", 30, source["id"]) is not None
    assert store.claim("worker-b", 30, source["id"]) is None  # held: one sync per source at a time
    assert services.sources.run_one("worker-b") is None
    assert sources_api.get(f"/v1/sources/{source['id']}").json()["status"] == "syncing"

    assert store.claim("worker-dead", 0.05, source["id"]) is None  # still worker-a's
    assert store.renew(source["id"], "worker-a", 0.05)  # worker-a dies now: its lease runs out
    time.sleep(0.1)
    last = sync(sources_api, source["id"])  # taken over once the lease expired
    assert last["added"] == 1 and not store.renew(source["id"], "worker-a", 30)
