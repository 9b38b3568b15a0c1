"""all-MiniLM-L6-v2 int8 from its PyPI package: real vectors, on small texts."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from calypso.embeddings import Embedder, check_dimension
from calypso.embeddings.base import DimensionMismatch
from calypso.embeddings.local_onnx import (
    DIMENSION,
    GRAPHS_KEPT,
    MODEL_NAME,
    LocalOnnxEmbedder,
    cached_graph,
    graph_cache_dir,
)

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


def test_threads_spin_within_a_run_only(minilm: LocalOnnxEmbedder) -> None:
    # One session for queries and passages (a second one cost 110-150 MB): its threads spin between operators
    # during a run (a query 4.4 against 6.1 ms) and stop when it returns, so idle cores stay idle.
    options = minilm.session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    assert options.intra_op_num_threads == minilm.threads
    sleeping = LocalOnnxEmbedder(spinning=False).session_options()
    assert sleeping.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_queries_embedded_during_a_batch_get_the_vectors_they_get_alone(minilm: LocalOnnxEmbedder) -> None:
    # The search thread and the embedding worker run the same session at once (onnxruntime's run is thread-safe).
    passages = [" ".join([text] * 8) for text in TEXTS] * 4
    queries = ["Do ducks eat bread?", "0-dimensional biomaterials show inductive properties.", "refund policy"]
    alone_passages, alone_queries = minilm.embed(passages), minilm.embed(queries)
    got: dict[str, list[np.ndarray]] = {"passages": [], "queries": []}
    errors: list[BaseException] = []

    def run(name: str, texts: list[str], times: int) -> None:
        try:
            for _ in range(times):
                got[name].append(minilm.embed(texts))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=("passages", passages, 3)),
        threading.Thread(target=run, args=("queries", queries, 20)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and len(got["passages"]) == 3 and len(got["queries"]) == 20
    for vectors in got["passages"]:
        np.testing.assert_allclose(vectors, alone_passages, atol=1e-6)
    for vectors in got["queries"]:
        np.testing.assert_allclose(vectors, alone_queries, atol=1e-6)


def test_search_embeds_queries_by_the_model_not_through_the_disk_cache(minilm: LocalOnnxEmbedder, tmp_path) -> None:
    from calypso.embeddings import CachedEmbedder, open_sqlite_cache
    from calypso.embeddings.base import query_embedder

    cached = CachedEmbedder(minilm, open_sqlite_cache(tmp_path / "cache.sqlite"))
    assert query_embedder(cached) is minilm.for_queries()


def test_compact_graph_gives_the_exported_models_vectors(minilm: LocalOnnxEmbedder) -> None:
    # Passages are embedded by the graph minilm_graph builds from the package's weights; stored vectors and caches
    # were made by the export itself, so the two must agree to float rounding.
    import onnxruntime as ort

    from calypso.embeddings.local_onnx import model_files

    export = ort.InferenceSession(str(model_files()[0]), providers=["CPUExecutionProvider"])
    texts = [*TEXTS, "short", " ".join(["Cell division and nuclear envelope breakdown."] * 40)]
    rows = []
    for text in texts:
        ids = np.array([minilm._tokenizer.encode(text).ids], dtype=np.int64)
        hidden = export.run(
            None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        )[0]
        rows.append(hidden.mean(axis=1)[0])
    exported = np.array(rows) / np.linalg.norm(rows, axis=1, keepdims=True)
    np.testing.assert_allclose(minilm.embed(texts), exported, atol=2e-5)


def test_queries_run_int8_products_close_to_the_passages_vectors(minilm: LocalOnnxEmbedder) -> None:
    queries = minilm.for_queries()
    assert queries is minilm.for_queries() and queries.for_queries() is queries
    assert (queries.name, queries.dimension, queries.languages) == (minilm.name, minilm.dimension, minilm.languages)
    texts = [*TEXTS, "how do cells divide?", "can I get my money back?", "Rückerstattung innerhalb von 30 Tagen"]
    cosines = (queries.embed(texts) * minilm.embed(texts)).sum(axis=1)
    assert cosines.min() > 0.98, cosines
    sims = queries.embed(["how do cells divide?", "can I get my money back?"]) @ minilm.embed(TEXTS).T
    assert sims[0].argmax() == 0 and sims[1].argmax() == 2


def test_a_process_that_only_searches_never_loads_the_fp32_weights() -> None:
    from calypso.embeddings.base import query_embedder

    fresh = LocalOnnxEmbedder()
    query_embedder(fresh).embed(["how do cells divide?"])
    assert fresh._session is None and fresh.for_queries()._session is not None


CACHED_QUERY = """
import json, sys
from calypso.embeddings.local_onnx import LocalOnnxEmbedder, graph_cache_dir
vector = LocalOnnxEmbedder().for_queries().embed(["how do cells divide?"])[0]
print(json.dumps({"onnx": "onnx" in sys.modules, "files": sorted(p.name for p in graph_cache_dir().iterdir()),
                  "vector": vector.tolist()}))
"""


def _query_in_a_fresh_process(cache: Path) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    run = subprocess.run([sys.executable, "-c", CACHED_QUERY], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_graph_is_built_once_per_user_and_later_processes_skip_onnx(tmp_path: Path) -> None:
    first = _query_in_a_fresh_process(tmp_path)
    assert first["onnx"] is True and len(first["files"]) == 1 and first["files"][0].startswith("minilm-int8-")
    second = _query_in_a_fresh_process(tmp_path)
    assert second["onnx"] is False and second["files"] == first["files"]
    assert second["vector"] == first["vector"]
    # A damaged file (a disk filled mid-copy, an edit) is built again, not trusted and not fatal.
    (tmp_path / "calypso" / "models" / first["files"][0]).write_bytes(b"not a graph")
    third = _query_in_a_fresh_process(tmp_path)
    assert third["files"] == first["files"] and third["vector"] == first["vector"]


def test_a_cache_that_cannot_be_written_means_building_at_every_start(tmp_path: Path) -> None:
    (tmp_path / "calypso").write_text("a file where the cache directory would go")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    script = (
        "from calypso.embeddings.local_onnx import LocalOnnxEmbedder as E; print(E().for_queries().embed(['x']).shape)"
    )
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "(1, 384)"


def test_a_new_graph_replaces_all_but_the_one_before_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each change to the graph's code or model names a new file: the cache keeps the newest two of a model."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    models = graph_cache_dir()
    models.mkdir(parents=True)
    for age, name in enumerate(
        ["minilm-int8-00000000000000a1", "minilm-int8-00000000000000a2", "minilm-int8-00000000000000a3"]
    ):
        (models / f"{name}.onnx").write_bytes(b"old graph")
        os.utime(models / f"{name}.onnx", (1_000_000 + age, 1_000_000 + age))
    (models / "minilm-fp32-00000000000000b1.onnx").write_bytes(b"another model's graph")
    (models / "minilm-int8-notes.txt").write_text("not a graph")
    written = cached_graph("minilm-int8", hashlib.sha256(b"new"), lambda: b"new graph", tmp_path / "scratch")
    assert written.read_bytes() == b"new graph" and GRAPHS_KEPT == 2
    assert sorted(p.name for p in models.iterdir()) == sorted(
        [
            written.name,
            "minilm-int8-00000000000000a3.onnx",
            "minilm-fp32-00000000000000b1.onnx",
            "minilm-int8-notes.txt",
        ]
    )
    # Found in the cache: nothing is built or removed.
    again = cached_graph("minilm-int8", hashlib.sha256(b"new"), lambda: b"built again", tmp_path / "scratch")
    assert again == written and written.read_bytes() == b"new graph" and len(list(models.iterdir())) == 4
