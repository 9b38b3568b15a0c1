"""A server with keys on and the Alps PDF in workspace "acme", once per module (ingesting it takes a second)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp_support import ADMIN, Secured, ingest_alps

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    settings = Settings(home=tmp_path_factory.mktemp("mcp") / "home", auth="on", admin_key=ADMIN)
    services = open_services(settings)
    document_id = ingest_alps(services, "acme")
    _, key_a = services.keys.create("acme", "mcp tests")
    _, key_b = services.keys.create("globex", "mcp tests")
    with LiveServer(create_app(settings, services), free_port()) as live:
        yield Secured(live.url, key_a, key_b, document_id)
    services.close()
