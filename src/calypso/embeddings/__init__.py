"""Text embeddings: one contract (``base.Embedder``), backends side by side.

    open_embedder(settings) -> Embedder | None

- ``CALYPSO_EMBEDDING_BASE_URL`` set: ``OpenAIEmbedder`` (``openai_http.py``) asking that
  server for ``CALYPSO_EMBEDDING_MODEL``.
- otherwise a local model by name from the registry; built in: ``minilm-l6-v2-int8``
  (``local_onnx.py``, the default, English) and ``multilingual-e5-small-int8``
  (``multilingual_e5.py``, any language). If its packages are missing, one logged line says
  so and ``None`` is returned: search stays keyword-only.
- ``CALYPSO_EMBEDDING_MODEL=none``: ``None``.

Extensions add local models with ``register(name, factory, available)``.
Vectors are cached by content (``cache.py``) when a cache is given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from calypso.config import revealed
from calypso.embeddings import local_onnx, multilingual_e5
from calypso.embeddings.base import (
    DimensionMismatch,
    Embedder,
    EmbeddingError,
    EmbeddingUnavailable,
    check_dimension,
    covers,
    parse_languages,
)
from calypso.embeddings.cache import (
    CachedEmbedder,
    MemoryVectorCache,
    SQLiteVectorCache,
    VectorCache,
    open_sqlite_cache,
)
from calypso.embeddings.openai_http import OpenAIEmbedder

__all__ = [
    "CachedEmbedder",
    "DimensionMismatch",
    "Embedder",
    "EmbeddingError",
    "EmbeddingUnavailable",
    "MemoryVectorCache",
    "OpenAIEmbedder",
    "SQLiteVectorCache",
    "VectorCache",
    "check_dimension",
    "covers",
    "embeddings_off",
    "open_embedder",
    "open_sqlite_cache",
    "register",
]

log = logging.getLogger("calypso.embeddings")

DEFAULT_MODEL = local_onnx.MODEL_NAME
_local: dict[str, tuple[Callable[..., Embedder], Callable[[], bool], str]] = {}


def register(name: str, factory: Callable[..., Embedder], available: Callable[[], bool], install_hint: str) -> None:
    """A local model: ``factory(batch_size=...)`` builds it when ``available()`` says its packages are here."""
    _local[name] = (factory, available, install_hint)


def local_models() -> list[str]:
    return sorted(_local)


def embeddings_off(settings: Any) -> bool:
    """``CALYPSO_EMBEDDING_MODEL`` is none (or empty, or off): keyword-only search, nothing to open."""
    return (settings.embedding_model or "").strip().lower() in ("", "none", "off")


def open_embedder(settings: Any, *, cache: VectorCache | None = None) -> Embedder | None:
    """The configured embedder (wrapped in ``cache`` if given), or None for keyword-only search."""
    model = (settings.embedding_model or "").strip()
    embedder: Embedder
    if embeddings_off(settings):
        return None
    if settings.embedding_base_url:
        embedder = OpenAIEmbedder(
            settings.embedding_base_url,
            model,
            api_key=revealed(settings.embedding_api_key),
            batch_size=settings.embedding_batch_size,
            languages=parse_languages(settings.embedding_languages, None),
        )
    else:
        if model not in _local:
            raise EmbeddingUnavailable(
                f"Unknown local embedding model {model!r}; this installation has: {', '.join(local_models())}. "
                "Set CALYPSO_EMBEDDING_BASE_URL to use it from an OpenAI-compatible server, "
                "or CALYPSO_EMBEDDING_MODEL=none for keyword-only search."
            )
        factory, available, hint = _local[model]
        if not available():
            log.warning("embedding model %s is not installed (%s): search is keyword-only", model, hint)
            return None
        embedder = factory(batch_size=settings.embedding_batch_size)
        declared = parse_languages(settings.embedding_languages, embedder.languages)
        if declared != embedder.languages:
            embedder = _Declared(embedder, declared)
    return CachedEmbedder(embedder, cache) if cache is not None else embedder


class _Declared:
    """A local model with the languages ``CALYPSO_EMBEDDING_LANGUAGES`` says it covers."""

    def __init__(self, inner: Embedder, languages: frozenset[str] | None) -> None:
        self.inner, self.languages = inner, languages
        self.name, self.dimension, self.embed = inner.name, inner.dimension, inner.embed


register(
    local_onnx.MODEL_NAME,
    # The local model's batch of 4 is measured (see local_onnx); the batch size setting is for servers.
    lambda batch_size=4: local_onnx.LocalOnnxEmbedder(),
    local_onnx.available,
    local_onnx.INSTALL_HINT,
)
register(
    multilingual_e5.MODEL_NAME,
    lambda batch_size=1: multilingual_e5.MultilingualE5Embedder(),  # one text a run: see multilingual_e5
    multilingual_e5.available,
    local_onnx.INSTALL_HINT,
)
