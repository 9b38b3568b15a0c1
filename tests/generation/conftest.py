"""One fake upstream per module, reset before each test (the real embedding model: tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from calypso.generation.fake_upstream import FakeUpstream


@pytest.fixture(scope="module")
def server() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeUpstream) -> FakeUpstream:
    server.reset()
    return server
