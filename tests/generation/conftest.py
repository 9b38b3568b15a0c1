"""One fake upstream per module, reset before each test; the real local embedding model, once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from calypso.embeddings import local_onnx
from calypso.generation.fake_upstream import FakeUpstream


@pytest.fixture(scope="module")
def server() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeUpstream) -> FakeUpstream:
    server.reset()
    return server


@pytest.fixture(scope="session")
def minilm() -> local_onnx.LocalOnnxEmbedder:
    """The real local embedding model; without the `embed` extra its tests skip (under CI they fail)."""
    if not local_onnx.available():
        message = f"the local embedding model is not installed ({local_onnx.INSTALL_HINT})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    model = local_onnx.LocalOnnxEmbedder()
    model.load()
    return model
