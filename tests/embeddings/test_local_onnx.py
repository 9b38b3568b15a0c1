"""all-MiniLM-L6-v2 int8 from its PyPI package: real vectors, on small texts."""

from __future__ import annotations

import numpy as np
import pytest

from calypso.embeddings import Embedder, check_dimension
from calypso.embeddings.base import DimensionMismatch
from calypso.embeddings.local_onnx import DIMENSION, MODEL_NAME, LocalOnnxEmbedder

TEXTS = [
    "Mitosis is the process by which a eukaryotic cell divides its nucleus into two.",
    "The central bank raised interest rates to curb inflation in the bond market.",
    "Refunds are available within 30 days of purchase with a receipt.",
]


def test_contract(minilm: LocalOnnxEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert (minilm.name, minilm.dimension) == (MODEL_NAME, DIMENSION)
    v = minilm.embed(TEXTS)
    assert v.shape == (3, DIMENSION) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, DIMENSION)


def test_meaning(minilm: LocalOnnxEmbedder) -> None:
    q = minilm.embed(["how do cells divide?", "can I get my money back?"])
    sims = q @ minilm.embed(TEXTS).T
    assert sims[0].argmax() == 0 and sims[1].argmax() == 2


def test_rows_do_not_depend_on_batch_or_order(minilm: LocalOnnxEmbedder) -> None:
    long_text = " ".join(["Cell division and nuclear envelope breakdown."] * 200)  # far past 256 word pieces
    texts = [*TEXTS, long_text, "short"]
    together = minilm.embed(texts)
    one_by_one = np.concatenate([minilm.embed([t]) for t in texts])
    reversed_ = minilm.embed(texts[::-1])[::-1]
    np.testing.assert_allclose(together, one_by_one, atol=1e-4)
    np.testing.assert_allclose(together, reversed_, atol=1e-4)


def test_dimension_mismatch_says_how_to_fix(minilm: LocalOnnxEmbedder) -> None:
    check_dimension(None, minilm)
    check_dimension(DIMENSION, minilm)
    with pytest.raises(DimensionMismatch) as err:
        check_dimension(768, minilm, stored_model="openai:nomic-embed-text")
    message = str(err.value)
    assert "768" in message and "384" in message and "calypso reindex" in message
    assert err.value.status == 409


def test_idle_threads_do_not_spin(minilm: LocalOnnxEmbedder) -> None:
    # Spinning intra-op threads burned ~40% of the model's CPU on shared cores (docs/benchmarks/hybrid.md).
    options = minilm.session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == minilm.threads


def test_queries_run_in_a_spinning_session_of_the_same_model(minilm: LocalOnnxEmbedder) -> None:
    queries = minilm.for_queries()
    assert queries is minilm.for_queries() and queries.name == minilm.name  # one sibling, the same vector space
    assert queries.session_options().get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert queries.session_options().get_session_config_entry("session.force_spinning_stop") == "1"
    assert minilm.session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
    texts = ["Do ducks eat bread?", "0-dimensional biomaterials show inductive properties."]
    assert np.allclose(queries.embed(texts), minilm.embed(texts), atol=1e-6)


def test_search_embeds_queries_by_the_model_not_through_the_disk_cache(minilm: LocalOnnxEmbedder, tmp_path) -> None:
    from calypso.embeddings import CachedEmbedder, open_sqlite_cache
    from calypso.embeddings.base import query_embedder

    cached = CachedEmbedder(minilm, open_sqlite_cache(tmp_path / "cache.sqlite"))
    assert query_embedder(cached) is minilm.for_queries()
