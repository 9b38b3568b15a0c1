"""OpenAIEmbedder against a real OpenAI-compatible /v1/embeddings server on loopback."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from calypso.embeddings import EmbeddingError, OpenAIEmbedder
from calypso.embeddings.local_onnx import LocalOnnxEmbedder
from calypso.embeddings.serve_embeddings import EmbeddingsServer


class WordHashEmbedder:
    """A real (if crude) embedding: hashed bag of words. Lets the transport tests run without the model extra."""

    name = "word-hash-16"
    dimension = 16
    languages = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for r, text in enumerate(texts):
            for word in text.lower().split():
                out[r, hashlib.sha256(word.encode()).digest()[0] % 16] += 1.0
        return out * 3.0  # not unit length: the client must normalise


@pytest.fixture()
def server() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer(WordHashEmbedder(), model="hash", api_key="sk-test") as s:
        yield s


def test_same_vectors_as_in_process(minilm: LocalOnnxEmbedder) -> None:
    texts = ["how do cells divide?", "interest rates and inflation", "refund policy", "mitosis"]
    with EmbeddingsServer(minilm, model="all-minilm") as server:
        client = OpenAIEmbedder(server.base_url, "all-minilm", batch_size=3)
        remote = client.embed(texts)
        assert client.name == "openai:all-minilm" and client.dimension == 384
        assert [len(r["input"]) for r in server.requests] == [3, 1]
    np.testing.assert_allclose(remote, minilm.embed(texts), atol=1e-6)


def test_batches_order_and_normalisation(server: EmbeddingsServer) -> None:
    server.reverse = True  # the client must put rows back by "index"
    client = OpenAIEmbedder(server.base_url, "hash", api_key="sk-test", batch_size=2)
    texts = ["a b c", "d", "e f", "g h i j", "k"]
    v = client.embed(texts)
    assert [r["input"] for r in server.requests] == [texts[0:2], texts[2:4], texts[4:5]]
    expected = WordHashEmbedder().embed(texts)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(v, expected, atol=1e-6)
    assert v.dtype == np.float32 and client.dimension == 16
    assert client.embed([]).shape == (0, 16)


def test_retries_server_errors_then_succeeds(server: EmbeddingsServer) -> None:
    server.fail(503, times=2)
    client = OpenAIEmbedder(server.base_url, "hash", api_key="sk-test", max_retries=2)
    assert client.embed(["x y"]).shape == (1, 16)
    assert len(server.requests) == 3


def test_gives_up_after_retries(server: EmbeddingsServer) -> None:
    server.fail(500, times=5)
    client = OpenAIEmbedder(server.base_url, "hash", api_key="sk-test", max_retries=1)
    with pytest.raises(EmbeddingError, match="answered 500"):
        client.embed(["x"])


def test_errors_say_how_to_fix(server: EmbeddingsServer) -> None:
    with pytest.raises(EmbeddingError, match="CALYPSO_EMBEDDING_API_KEY"):
        OpenAIEmbedder(server.base_url, "hash", api_key="wrong").embed(["x"])
    with pytest.raises(EmbeddingError, match="serves model 'nomic'"):
        OpenAIEmbedder(server.base_url, "nomic", api_key="sk-test").embed(["x"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(EmbeddingError, match="CALYPSO_EMBEDDING_BASE_URL"):
        OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "hash", max_retries=0).embed(["x"])


def test_a_changed_dimension_is_an_error(server: EmbeddingsServer) -> None:
    client = OpenAIEmbedder(server.base_url, "hash", api_key="sk-test", dimension=384)
    with pytest.raises(EmbeddingError, match="calypso reindex"):
        client.embed(["x"])
