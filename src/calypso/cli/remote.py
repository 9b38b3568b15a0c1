"""One knowledge base whichever door is used: the CLI finds the data directory a server uses, and talks to it.

``calypso serve`` holds its data directory (``store/sqlite/lock.py``) and leaves ``server.json`` beside it:
the URL it listens on and its PID. A CLI command that finds the directory held by that server sends its
work to the server's API instead of refusing (``calypso ingest``) or building indexes of its own
(``calypso search``), with the API key from ``CALYPSO_API_KEY`` when the server requires keys.

Without ``--home`` or ``CALYPSO_HOME``, a command run in a folder holding ``.calypso/`` (what ``make
serve`` uses) takes it; elsewhere the user's data directory. Each command says which it used.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from calypso.bots import DEFAULT_BOT_ID
from calypso.config import DATABASE_FILE, Settings
from calypso.errors import CalypsoError, InvalidRequest

RECORD = "server.json"
LOCAL_HOME = Path(".calypso")  # `make serve`'s data directory, beside the checkout
INGEST_POLL_SECONDS = 0.5
TIMEOUT_SECONDS = 600.0  # an upload waits for its ingestion: a large PDF takes a while


def discovered_home() -> tuple[Path, str] | None:
    """``./.calypso`` when this folder has one with a knowledge base in it: (path, why)."""
    if (LOCAL_HOME / DATABASE_FILE).exists():
        return LOCAL_HOME, "found ./.calypso in this folder"
    return None


@dataclass(frozen=True)
class RunningServer:
    url: str  # http://host:port
    pid: int
    auth: bool


def write_record(home: Path, url: str, auth: bool) -> bool:
    """Leave where this server listens; False when it cannot (a full disk: it serves all the same)."""
    path = home / RECORD
    temporary = path.with_suffix(".tmp")
    try:
        home.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps({"url": url, "pid": os.getpid(), "auth": auth}))
        temporary.replace(path)
    except OSError:
        temporary.unlink(missing_ok=True)
        return False
    return True


def remove_record(home: Path) -> None:
    path = home / RECORD
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def running_server(settings: Settings) -> RunningServer | None:
    """The server that holds the data directory and said where it listens; None when none does (or on
    PostgreSQL, where processes share the database and hold no directory)."""
    if settings.database_url:
        return None
    try:
        record = json.loads((settings.home / RECORD).read_text())
        server = RunningServer(str(record["url"]), int(record["pid"]), bool(record["auth"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    from calypso.services import data_directory_in_use  # here: the services are slow to import for --help

    return server if data_directory_in_use(settings) else None


class RemoteError(CalypsoError):
    """The server answered with an error: its OpenAI-shaped message, or why it could not be reached."""

    status = 502
    type = "server_error"


class ServerClient:
    """The few API calls the CLI makes of a running server."""

    def __init__(self, server: RunningServer) -> None:
        key = os.environ.get("CALYPSO_API_KEY")
        if server.auth and not key:
            raise InvalidRequest(
                f"The server at {server.url} requires API keys: set CALYPSO_API_KEY (create one with "
                "`calypso keys create --workspace NAME`)."
            )
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.server = server
        self._http = httpx.Client(base_url=server.url, headers=headers, timeout=TIMEOUT_SECONDS)

    def close(self) -> None:
        self._http.close()

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        body: Any
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code >= 400:
            error = body.get("error", {}) if isinstance(body, dict) else {}
            raise RemoteError(error.get("message") or f"The server answered {response.status_code}.")
        return body if isinstance(body, dict) else {}

    def _call(self, method: str, path: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise RemoteError(f"Could not reach the server at {self.server.url}: {exc}.") from exc
        return response.status_code, self._json(response)

    def upload(
        self, path: Path, namespace: str | None, media_type: str | None, wait: bool
    ) -> tuple[dict[str, Any], bool]:
        """Upload one file; with ``wait``, poll until its ingestion ends. (The document as the API shows it,
        whether it is new: identical bytes answer with the document already there.)"""
        data = {"namespace": namespace} if namespace else {}
        with path.open("rb") as file:
            files = {"file": (path.name, file, media_type or "application/octet-stream")}
            status, document = self._call("POST", "/v1/documents", data=data, files=files, params={"wait": "false"})
        while wait and document.get("status") == "in_progress":
            time.sleep(INGEST_POLL_SECONDS)
            document = self._call("GET", f"/v1/documents/{document['id']}")[1]
        return document, status == 201

    def ask(self, question: str) -> dict[str, Any]:
        """The default bot's answer (it searches the default namespace) as Chat Completions gives it."""
        body = {"model": DEFAULT_BOT_ID, "messages": [{"role": "user", "content": question}]}
        return self._call("POST", "/v1/chat/completions", json=body)[1]

    def search(self, query: str, namespace: str, k: int) -> list[dict[str, Any]]:
        body = {"query": query, "namespace": namespace, "max_num_results": k}
        return list(self._call("POST", "/v1/search", json=body)[1].get("data", []))
