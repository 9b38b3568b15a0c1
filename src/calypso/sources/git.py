"""A git repository: the files of one branch matching the globs, versioned by blob id, through the ``git`` binary.

A local repository (under ``CALYPSO_SOURCE_ROOTS``) is read in place; an http(s) one is cloned bare into
the source's own directory and fetched at each sync, its host checked by the crawl's SSRF rule first,
with only the http(s) transports allowed and redirects off. A blob larger than the upload limit is
skipped and reported (its size is in the tree: it is never read). A citation links to the file at its
commit: ``link_template`` (``{commit}``, ``{path}``), or the forge's own blob URL for GitHub, GitLab,
Codeberg and Gitea-like hosts.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from calypso.errors import UpstreamError
from calypso.sources.folder import matches
from calypso.sources.hosts import check_host
from calypso.sources.model import ConnectorOptions, Fetched, Found, ItemFailed, Known, NotModified, Scan

CLONE_SECONDS = 600.0
READ_SECONDS = 60.0
_ENV = {
    "GIT_ALLOW_PROTOCOL": "http:https",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ASKPASS": "true",
}


def _git(args: list[str], cwd: Path | None = None, timeout: float = READ_SECONDS) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-c", "http.followRedirects=false", "-c", "core.quotePath=false", *args],
            cwd=cwd,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, **_ENV},
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise UpstreamError(f"git {args[0]} took longer than {timeout:g} s.") from exc
    except FileNotFoundError as exc:
        raise UpstreamError("The git binary is not installed on this server (install git).") from exc
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UpstreamError(f"git {args[0]} failed: {detail[-1] if detail else done.returncode}.")
    return done.stdout


def web_link(url: str, template: str | None, commit: str, path: str) -> str | None:
    """The file at its commit on the forge, or None when there is no web view to link to."""
    quoted = quote(path)
    if template:
        return template.replace("{commit}", commit).replace("{path}", quoted)
    if not url.startswith(("http://", "https://")):
        return None
    base = url.removesuffix("/").removesuffix(".git")
    if urlsplit(base).netloc.lower().endswith("gitlab.com"):
        return f"{base}/-/blob/{commit}/{quoted}"
    return f"{base}/blob/{commit}/{quoted}"  # GitHub, Codeberg, Gitea, Forgejo


class GitConnector:
    def __init__(self, settings: dict[str, Any], options: ConnectorOptions) -> None:
        self.url: str = settings["url"]
        self.branch: str = settings["branch"]
        self.include: list[str] = settings["include"]
        self.exclude: list[str] = settings["exclude"]
        self.template: str | None = settings.get("link_template")
        self.options = options

    def _check_host(self) -> None:
        host = urlsplit(self.url).hostname or ""
        check_host(host, None, allow_private=self.options.allow_private, param="url", action="clone from")

    def _repository(self) -> Path:
        """The repository to read: the local one, or this source's bare clone brought up to date."""
        if self.url.startswith("/"):
            return Path(self.url)
        self._check_host()
        clone = self.options.cache_dir / "repository.git"
        ref = f"+refs/heads/{self.branch}:refs/heads/{self.branch}"
        if not (clone / "HEAD").exists():
            clone.parent.mkdir(parents=True, exist_ok=True)
            _git(["init", "--bare", "--quiet", str(clone)])
        try:  # the branch's last commit only: the history is not what is synced
            _git(["fetch", "--quiet", "--depth=1", "--no-tags", self.url, ref], cwd=clone, timeout=CLONE_SECONDS)
        except UpstreamError as exc:
            if "shallow" not in exc.message:
                raise
            # A "dumb" http server (static files) cannot serve a shallow fetch: the whole branch then.
            _git(["fetch", "--quiet", "--no-tags", self.url, ref], cwd=clone, timeout=CLONE_SECONDS)
        return clone

    def scan(self, known: dict[str, Known], scan: Scan) -> Iterator[Found]:
        repository = self._repository()
        commit = (
            _git(["rev-parse", "--verify", f"refs/heads/{self.branch}^{{commit}}"], cwd=repository).decode().strip()
        )
        listing = _git(["ls-tree", "-r", "-l", "-z", commit], cwd=repository)
        for entry in listing.split(b"\0"):
            if not entry:
                continue
            meta, _, raw_path = entry.partition(b"\t")
            mode, kind, blob, size = meta.split()
            path = raw_path.decode("utf-8", "replace")
            if kind != b"blob" or mode == b"120000":  # a submodule or a symbolic link: not a file here
                continue
            if not matches(path, self.include) or matches(path, self.exclude):
                continue
            yield Found(path, blob.decode(), self._loader(repository, commit, blob.decode(), path, int(size)))

    def _loader(self, repository: Path, commit: str, blob: str, path: str, size: int) -> Any:
        def load(known: Known | None) -> Fetched | NotModified:
            if size > self.options.max_bytes:
                raise ItemFailed(f"{size:,} bytes, over the upload limit of {self.options.max_bytes:,}: skipped.")
            data = _git(["cat-file", "blob", blob], cwd=repository)
            link = web_link(self.url, self.template, commit, path)
            metadata = {"path": path[:512], "commit": commit}
            return Fetched(data, path, blob, source_url=link, metadata=metadata)

        return load
