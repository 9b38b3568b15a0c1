"""Helpers the tests share: the evaluation data folder and a live server on loopback."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from calypso.services.ingestion import Upload
from testkit.live_server import LiveServer, free_port

REPO = Path(__file__).resolve().parents[1]


def eval_data_dir() -> Path:
    """The shared evaluation data; skip when absent, but fail under CI so CI always runs these tests."""
    path = Path(os.environ.get("CALYPSO_EVAL_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        message = f"evaluation data not found at {path} (set CALYPSO_EVAL_DATA)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


# -- ingestion jobs: uploads answer at once; these wait for the job to end -----------------------

WAIT = {"wait": "true"}  # query parameters of an upload that answers only when ingestion ended
ENDED = ("completed", "failed", "cancelled")


def wait_for_document(http, document_id: str, timeout: float = 60) -> dict:
    """GET the document until its ingestion ended; its JSON."""
    deadline = time.monotonic() + timeout
    while True:
        doc = http.get(f"/v1/documents/{document_id}").json()
        if doc.get("status") in ENDED:
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"document {document_id} still {doc.get('status')} after {timeout}s")
        time.sleep(0.05)


def wait_for_file(client, file_id: str, timeout: float = 60):
    """``files.retrieve`` (openai SDK) until the file is processed or failed: the SDK cannot ask to wait."""
    deadline = time.monotonic() + timeout
    while True:
        file = client.files.retrieve(file_id)
        if file.status != "uploaded":
            return file
        if time.monotonic() > deadline:
            raise AssertionError(f"file {file_id} still uploaded after {timeout}s")
        time.sleep(0.05)


# -- seed 004's render(), copied verbatim (its "Rendering citations" section) ---------------------

MARKER = re.compile(r"\[Source (\d+)\]")


def render(message: dict) -> str:
    by_index = {c["source_index"]: c for c in message.get("citations") or []}
    footnotes = []

    def replace(match: re.Match) -> str:
        n = int(match.group(1))
        citation = by_index.get(n)
        if citation is None:
            return ""  # marker without a citation: drop it
        if citation not in footnotes:
            footnotes.append(citation)
        return f"[{footnotes.index(citation) + 1}]"

    body = MARKER.sub(replace, message["content"]).strip()
    notes = "\n".join(
        f'[{i}] {c["source_filename"] or c["document_id"]}: "{c["text_preview"]}"'
        for i, c in enumerate(footnotes, start=1)
    )
    return f"{body}\n\n{notes}" if notes else body


@contextmanager
def served_knowledge_base(home: Path, upstream_url: str, documents: list[str], bots: list) -> Iterator[LiveServer]:
    """A live server over real documents (paths under ingestion-docs) plus the demo ones.

    The extractive answerer is the default; bots that name ``generator="upstream"``
    use the fake upstream at ``upstream_url``. ``bots`` are created in the default workspace.
    """
    from calypso.api.app import create_app
    from calypso.config import Settings
    from calypso.demo import ingest_demo
    from calypso.scope import DEFAULT_WORKSPACE
    from calypso.services import open_services

    docs = eval_data_dir() / "ingestion-docs"
    settings = Settings(
        home=home,
        chunk_size=800,
        chunk_overlap=120,
        llm_base_url=upstream_url,
        llm_model="fake-model",
        generator="extractive",
    )
    services = open_services(settings)
    for name in documents:
        services.ingestion.ingest(Upload((docs / name).read_bytes(), Path(name).name))
    ingest_demo(services.ingestion)
    for bot in bots:
        services.bots.create(DEFAULT_WORKSPACE, bot)
    app = create_app(settings, services)
    try:
        with LiveServer(app, free_port()) as server:
            server.kb = services.documents  # type: ignore[attr-defined]
            yield server
    finally:
        services.close()


def within(seconds: float, condition: Callable[[], bool]) -> float:
    """Seconds until ``condition()`` held, polled; AssertionError when it did not within ``seconds``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > seconds:
            raise AssertionError(f"not within {seconds} s")
        time.sleep(0.01)
    return time.monotonic() - start
