"""The embedding contract: one small Protocol every backend implements.

An ``Embedder`` turns texts into unit-length float32 vectors, one row per text,
in input order::

    vectors = embedder.embed(["first passage", "second passage"])
    vectors.shape == (2, embedder.dimension); vectors.dtype == np.float32
    np.linalg.norm(vectors, axis=1) ~= 1.0   # so a dot product is the cosine

``name`` identifies the model *and* its vector space: two embedders with the same
name must give interchangeable vectors (the cache and stored vectors are keyed by
it). Backends batch internally; callers may pass any number of texts. ``languages`` are the
ISO 639-1 codes of the languages whose texts the model places meaningfully (None: any language);
search uses vectors only for queries and knowledge bases in them (``covers``).

    EmbeddingError                    an embedding could not be computed (CalypsoError, 502)
    ├── EmbeddingUnavailable          the configured backend cannot run here (package missing …)
    └── DimensionMismatch             stored vectors' dimension differs from the model's
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from calypso.errors import CalypsoError, UpstreamError


@runtime_checkable
class Embedder(Protocol):
    """Texts in, unit-length float32 rows out (shape ``(len(texts), dimension)``)."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def languages(self) -> frozenset[str] | None: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def query_embedder(embedder: Embedder) -> Embedder:
    """What search queries are embedded by: the model itself, not through the passages' cache on disk (a lookup,
    an insert and a commit per query cost more than they save). Wrappers (the cache, declared languages) expose
    the model as ``inner``; a model with a cheaper way to embed queries into the same space offers it as
    ``for_queries()`` (the local model's int8 products)."""
    while (inner := getattr(embedder, "inner", None)) is not None:
        embedder = inner
    for_queries = getattr(embedder, "for_queries", None)
    return for_queries() if callable(for_queries) else embedder


def covers(embedder: Embedder, language: str) -> bool:
    """Whether the model's vectors mean something for text in ``language``."""
    languages = embedder.languages
    return languages is None or language in languages


def parse_languages(setting: str, default: frozenset[str] | None) -> frozenset[str] | None:
    """``CALYPSO_EMBEDDING_LANGUAGES``: "" keeps the model's own, "*" is any language, else ISO codes."""
    value = setting.strip().lower()
    if not value:
        return default
    if value in ("*", "any", "all"):
        return None
    return frozenset(code.strip() for code in value.split(",") if code.strip())


class EmbeddingError(UpstreamError):
    """An embedding backend failed; the message says what to change."""


class EmbeddingUnavailable(EmbeddingError):
    """The configured backend cannot run in this installation."""

    status = 503


class DimensionMismatch(CalypsoError):
    """Vectors already stored were made by a model of another dimension."""

    status = 409
    type = "invalid_request_error"
    default_code = "embedding_dimension_mismatch"


def check_dimension(stored: int | None, embedder: Embedder, *, stored_model: str | None = None) -> None:
    """Raise ``DimensionMismatch`` when stored vectors cannot be compared with this embedder's."""
    if stored is None or stored == embedder.dimension:
        return
    made_by = f" by {stored_model!r}" if stored_model else ""
    raise DimensionMismatch(
        f"The stored vectors were made{made_by} with {stored} dimensions, but the configured embedding model "
        f"{embedder.name!r} makes {embedder.dimension}. Run `calypso reindex` to re-embed every passage with the "
        f"new model, or set CALYPSO_EMBEDDING_MODEL back to the model that made them."
    )


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as float32 (zero rows stay zero)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {v.shape}")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    out: np.ndarray = v / np.maximum(norms, np.float32(1e-12))
    return out
