"""A git source: a real repository made by the test, read in place and cloned over (dumb) HTTP on loopback;
files by glob and by blob id, a link to the file at its commit, an oversized blob skipped and reported."""

from __future__ import annotations

import functools
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from sources_support import assert_error, counts, hits, sources_api, sync

from calypso.config import Settings

__all__ = ["sources_api"]


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "T"}
    env |= {"GIT_COMMITTER_EMAIL": "t@example.org", "HOME": str(repo.parent), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "shared" / "docs-repo"
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch=main")
    (path / "guide.md").write_text("# Guide\n\nThe pelican procedure is described here.\n")
    (path / "docs").mkdir()
    (path / "docs" / "setup.rst").write_text("Setup\n=====\n\nThe albatross step comes first.\n")
    (path / "docs" / "old.txt").write_text("The gannet note will be deleted.\n")
    (path / "main.py").write_text("print('not synced: no glob matches it')\n")
    (path / "big.txt").write_text("flamingo " * 1000)
    git(path, "add", "-A")
    git(path, "commit", "--quiet", "-m", "first")
    return path


def test_local_repository_synced_by_blob_id(sources_api: httpx.Client, settings: Settings, repo: Path) -> None:
    settings.max_upload_bytes = 5000  # big.txt (9 KB) is over it: skipped and reported
    body = {"type": "git", "namespace": "repo", "url": str(repo), "branch": "main"}
    body["link_template"] = "https://git.example/docs/src/{commit}/{path}"
    source = sources_api.post("/v1/sources", json=body).json()
    first = sync(sources_api, source["id"])
    assert counts(first) == (3, 0, 0, 0, 1), first
    assert "upload limit" in first["errors"][0]["message"] and first["errors"][0]["item"] == "big.txt"
    commit = git(repo, "rev-parse", "HEAD").strip()
    assert hits(sources_api, "pelican", "repo") == ["guide.md"]
    documents = sources_api.get("/v1/documents", params={"namespace": "repo"}).json()["data"]
    guide = next(d for d in documents if d["filename"] == "guide.md")
    assert guide["source_url"] == f"https://git.example/docs/src/{commit}/guide.md"  # what a citation links to
    assert guide["metadata"]["commit"] == commit and guide["metadata"]["source_id"] == source["id"]

    (repo / "guide.md").write_text("# Guide\n\nThe puffin procedure replaced the old one.\n")
    git(repo, "rm", "--quiet", "docs/old.txt")
    git(repo, "commit", "--quiet", "-am", "second")
    second = sync(sources_api, source["id"])
    assert counts(second) == (0, 1, 1, 1, 1), second
    assert hits(sources_api, "puffin", "repo") and not hits(sources_api, "pelican", "repo")
    assert not hits(sources_api, "gannet", "repo")


@pytest.fixture
def served_repo(repo: Path, tmp_path: Path) -> Iterator[str]:
    bare = tmp_path / "www" / "docs.git"
    bare.parent.mkdir()
    subprocess.run(["git", "clone", "--quiet", "--bare", str(repo), str(bare)], check=True)
    subprocess.run(["git", "update-server-info"], cwd=bare, check=True)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(bare.parent))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/docs.git"
    server.shutdown()
    server.server_close()


def test_repository_cloned_over_http(sources_api: httpx.Client, settings: Settings, served_repo: str) -> None:
    body = {"type": "git", "namespace": "cloned", "url": served_repo, "branch": "main", "include": ["docs/*"]}
    source = sources_api.post("/v1/sources", json=body).json()
    assert counts(sync(sources_api, source["id"])) == (2, 0, 0, 0, 0)
    documents = sources_api.get("/v1/documents", params={"namespace": "cloned"}).json()["data"]
    assert {d["filename"] for d in documents} == {"docs/setup.rst", "docs/old.txt"}
    assert all(d["source_url"].startswith(served_repo.removesuffix(".git") + "/blob/") for d in documents)

    settings.crawl_allow_private = False  # the same loopback address is refused now
    last = sync(sources_api, source["id"])
    assert last["status"] == "failed" and "CALYPSO_CRAWL_ALLOW_PRIVATE" in last["errors"][0]["message"]
    assert last["removed"] == 0  # a listing that failed removes nothing


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"url": "ssh://git@example.org/repo.git"}, "url"),
        ({"url": "/etc"}, "url"),
        ({"url": "https://example.org/r.git", "branch": "--upload-pack=evil"}, "branch"),
        ({"url": "https://example.org/r.git", "link_template": "javascript:alert(1)"}, "link_template"),
    ],
)
def test_bad_git_input(sources_api: httpx.Client, body: dict, param: str) -> None:
    assert_error(sources_api.post("/v1/sources", json={"type": "git", "namespace": "g", **body}), 400, param)
