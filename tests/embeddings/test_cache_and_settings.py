"""The content-hash cache (re-embedding unchanged text embeds nothing) and choosing a backend from settings."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from calypso.config import Settings
from calypso.embeddings import (
    CachedEmbedder,
    EmbeddingUnavailable,
    MemoryVectorCache,
    OpenAIEmbedder,
    SQLiteVectorCache,
    open_embedder,
    register,
)
from calypso.embeddings.cache import content_key
from calypso.embeddings.local_onnx import LocalOnnxEmbedder


def test_unchanged_text_is_not_embedded_again(minilm: LocalOnnxEmbedder, tmp_path: Path) -> None:
    cache = SQLiteVectorCache(tmp_path / "vectors.sqlite")
    cached = CachedEmbedder(minilm, cache)
    texts = ["alpha beta", "gamma", "alpha beta"]
    first = cached.embed(texts)
    assert cached.embedded == 2  # the repeated text once
    np.testing.assert_allclose(first, minilm.embed(texts), atol=1e-6)
    again = cached.embed(["gamma", "alpha beta", "delta"])
    assert cached.embedded == 3  # only "delta" was new
    np.testing.assert_allclose(again[:2], first[[1, 0]], atol=0)
    cache.close()
    reopened = CachedEmbedder(minilm, SQLiteVectorCache(tmp_path / "vectors.sqlite"))
    reopened.embed(texts)
    assert reopened.embedded == 0 and len(reopened.cache) == 3  # type: ignore[arg-type]


def test_keys_separate_models() -> None:
    assert content_key("a", "text") != content_key("b", "text")
    assert content_key("a", "text") == content_key("a", "text")


def test_cache_wraps_any_backend(minilm: LocalOnnxEmbedder) -> None:
    cache = MemoryVectorCache()
    s = Settings(embedding_model="minilm-l6-v2-int8")
    embedder = open_embedder(s, cache=cache)
    assert isinstance(embedder, CachedEmbedder) and embedder.dimension == 384
    embedder.embed(["one", "two"])
    assert len(cache) == 2


def test_settings_choose_the_backend(caplog: pytest.LogCaptureFixture) -> None:
    assert open_embedder(Settings(embedding_model="none")) is None
    remote = open_embedder(Settings(embedding_model="nomic-embed-text", embedding_base_url="http://127.0.0.1:1/v1"))
    assert isinstance(remote, OpenAIEmbedder) and remote.name == "openai:nomic-embed-text"
    with pytest.raises(EmbeddingUnavailable, match="CALYPSO_EMBEDDING_BASE_URL"):
        open_embedder(Settings(embedding_model="no-such-model"))
    register("not-installed-here", LocalOnnxEmbedder, lambda: False, "pip install something")
    with caplog.at_level(logging.WARNING, logger="calypso.embeddings"):
        assert open_embedder(Settings(embedding_model="not-installed-here")) is None
    assert "keyword-only" in caplog.text and "pip install something" in caplog.text
