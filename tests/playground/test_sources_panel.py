"""The playground's sources panel ("Kept in sync") in a real browser: a website added and synced, its counts shown,
synced again and removed; a refused address shown as the API's error. A screenshot checks it renders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.services import open_services
from calypso.sources.fake_site import FakeSite
from testkit.live_server import LiveServer, free_port


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LiveServer, FakeSite]]:
    settings = Settings(home=tmp_path / "home", crawl_allow_private=True, source_workers=0)
    services = open_services(settings)
    try:
        with FakeSite() as site, LiveServer(create_app(settings, services), free_port()) as server:
            yield server, site
    finally:
        services.close()


def test_sources_panel_adds_syncs_and_removes(
    browser: Any, served: tuple[LiveServer, FakeSite], tmp_path: Path
) -> None:
    server, site = served
    for n in range(3):
        site.put(f"/p{n}", f"<html><title>P{n}</title><body><p>The bittern{n} page.</p></body></html>")
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(server.url)
    page.select_option("#source-type", "website")
    page.fill("#source-origin", f"{site.url}/sitemap.xml")
    page.click("#source-form button[type=submit]")
    row = page.locator("#source-rows .source-row")
    row.locator(".source-status", has_text="3 added").wait_for(timeout=15_000)
    assert "sitemap.xml" in row.locator(".source-origin").inner_text()
    page.locator("#document-list li").first.wait_for(timeout=10_000)
    path = tmp_path / "sources-panel.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000

    site.remove("/p1")
    row.get_by_role("button", name="Sync now").click()
    row.locator(".source-status", has_text="1 removed").wait_for(timeout=15_000)
    row.get_by_role("button", name="Remove").click()
    page.locator("#source-rows", has_text="No synced source").wait_for(timeout=10_000)

    page.select_option("#source-type", "folder")
    page.fill("#source-origin", "/etc")
    page.click("#source-form button[type=submit]")
    page.locator("#alert", has_text="CALYPSO_SOURCE_ROOTS").wait_for(timeout=10_000)
    assert [e for e in errors if "400" not in e] == []
    context.close()
