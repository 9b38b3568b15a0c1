"""A real browser (Debian's chromium through Playwright) against a real server with the fake upstream behind it.

Playwright's own browser download cannot work here, so the browser is the system's
``/usr/bin/chromium`` (``CALYPSO_CHROMIUM`` overrides). Without it the tests skip, except
under ``CI=true``, where they fail: CI installs chromium (``.ci/run``) and must run them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.generation.fake_upstream import FakeUpstream
from calypso.scope import DEFAULT_WORKSPACE
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port

CHROMIUM = os.environ.get("CALYPSO_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-quic",
    "--disable-component-update",
    "--disable-sync",
]
BOTS = [
    {"id": "hidden-bot", "sources_policy": "hidden"},
    {"id": "plain-bot", "namespace": None},
]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the playground's browser tests cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless chromium, launched once per module."""
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
        return
    if not Path(CHROMIUM).exists():
        _unavailable(f"no chromium at {CHROMIUM} (apt-get install chromium, or set CALYPSO_CHROMIUM)")
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        except PlaywrightError as exc:
            _unavailable(f"chromium at {CHROMIUM} did not start: {exc}")
            return
        yield launched
        launched.close()


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


@pytest.fixture
def playground(tmp_path: Path, upstream: FakeUpstream) -> Iterator[LiveServer]:
    """``calypso serve``'s app on loopback (auth auto: off), answering through the fake upstream."""
    settings = Settings(
        home=tmp_path / "home",
        chunk_size=800,
        chunk_overlap=120,
        llm_base_url=upstream.base_url,
        llm_model="fake-model",
        generator="upstream",
    )
    services = open_services(settings)
    for bot in BOTS:
        services.bots.create(DEFAULT_WORKSPACE, bot)
    try:
        with LiveServer(create_app(settings, services), free_port()) as server:
            yield server
    finally:
        services.close()
