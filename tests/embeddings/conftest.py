"""The real local model, once per session; without the `embed` extra its tests skip, saying why (under CI they fail)."""

from __future__ import annotations

import os

import pytest

from calypso.embeddings import local_onnx


@pytest.fixture(scope="session")
def minilm() -> local_onnx.LocalOnnxEmbedder:
    if not local_onnx.available():
        message = f"the local embedding model is not installed ({local_onnx.INSTALL_HINT})"
        if os.environ.get("CI"):  # the default install has it: CI must run these tests
            pytest.fail(message)
        pytest.skip(message)
    model = local_onnx.LocalOnnxEmbedder(batch_size=4)
    model.load()
    return model
