"""The real local model, once per session; tests that need it skip with the reason when the extra is absent."""

from __future__ import annotations

import pytest

from calypso.embeddings import local_onnx


@pytest.fixture(scope="session")
def minilm() -> local_onnx.LocalOnnxEmbedder:
    if not local_onnx.available():
        pytest.skip(f"the local embedding model is not installed ({local_onnx.INSTALL_HINT})")
    model = local_onnx.LocalOnnxEmbedder(batch_size=4)
    model.load()
    return model
