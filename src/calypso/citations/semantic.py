"""The support scorer's semantic feature: how close a cited segment is in meaning to its passage.

Given an embedding model (``calypso.embeddings``), ``features`` embeds the cleaned segment and
the passage's sentences and returns ``cos_cent``: the cosine between the segment's vector and
the unit-length mean of the sentence vectors (the passage's "centroid" sentence). Chosen by
5-fold cross-validation on the AttributionBench OOD file among max, top-2/3 mean, mean,
best-window and centroid cosines (bench/fit_support.py --semantic); measured in
docs/benchmarks/answers.md, "Citation support scorer (issue 3)".

The weights that go with it (in calypso.citations.support) were fitted with vectors of one
model, ``MODEL``: another model's cosines live on another scale, so they are read through its
fitted map onto MiniLM's (``embeddings/calibration.py``), and with a model that has none the
scorer stays lexical. A failing embedder (a remote server down) also leaves the score
lexical: a citation is never lost because an optional feature could not be computed.

Cost: the segment and each sentence are one text to embed. Through ``CachedEmbedder`` (what
the services build) a passage's sentence vectors are computed once and then read from the
content-hash cache, so a passage cited again costs one embedding of the segment.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from calypso.embeddings import calibration
from calypso.embeddings.base import EmbeddingError

if TYPE_CHECKING:
    from calypso.embeddings.base import Embedder

MODEL = calibration.REFERENCE_MODEL  # the vectors the semantic weights were fitted with
FEATURE_NAMES: tuple[str, ...] = ("cos_cent",)

log = logging.getLogger("calypso.citations")


def usable(embedder: Embedder | None) -> bool:
    """Whether ``embedder`` makes the vectors the semantic weights were fitted for."""
    if embedder is None:
        return False
    try:
        return calibration.calibrated(embedder.name)
    except EmbeddingError:
        return False


def cosines(claim_vector: np.ndarray, sentence_vectors: np.ndarray) -> dict[str, float]:
    """The semantic features from unit vectors: ``cos_cent`` and candidates measured but not used."""
    sims = sentence_vectors @ claim_vector
    centroid = sentence_vectors.sum(axis=0)
    norm = float(np.linalg.norm(centroid))
    top = np.sort(sims)[::-1]
    return {
        "cos_cent": float(centroid @ claim_vector) / norm if norm > 0 else 0.0,
        "cos_max": float(top[0]),
        "cos_top3": float(top[:3].mean()),
        "cos_mean": float(sims.mean()),
    }


def features(embedder: Embedder, claim: str, sentences: Sequence[str]) -> dict[str, float] | None:
    """Semantic features of (cleaned segment, passage sentences), or None when they cannot be had."""
    if not claim or not sentences:
        return None
    try:
        vectors = np.asarray(embedder.embed([claim, *sentences]), dtype=np.float32)
    except EmbeddingError as exc:
        log.warning("support scorer: embedding failed, lexical score only (%s)", exc)
        return None
    found = cosines(vectors[0], vectors[1:])
    scaled = calibration.reference_scale(embedder.name, list(found.values()))
    return dict(zip(found, (float(v) for v in scaled), strict=True))
