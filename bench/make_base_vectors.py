"""The real vectors the structured-vector benches mix, built reproducibly (issue 30, goal 4's recall).

    .venv/bin/python -m bench.make_base_vectors [--count 20000] [--out /tmp/calypso-bench-embeddings-20k.sqlite]
    CALYPSO_BENCH_EMBEDDINGS=/tmp/calypso-bench-embeddings-20k.sqlite .venv/bin/python -m bench.pg_hybrid_scale --size 1000000

``bench/pg_hybrid_scale.py`` and ``bench/pgvector_hnsw.py`` make every vector 0.75 x one base vector + 0.25 x
another + noise, reading the base from an embedding cache (``CALYPSO_BENCH_EMBEDDINGS``). With ~1,400 base
vectors, each of 1M vectors has ~700 near-copies, and a query's top 10 is a choice among near-ties that says
more about the data than about the index (recall@10 0.2-0.6 in session 17, against 0.95 on a cache of
another machine in session 16). This writes ``--count`` SciFact corpus sentences of six words or more (seeded
choice), embedded by the default model as passages are, into such a cache: ~50 near-copies each at 1M.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sqlite3
import time
from pathlib import Path

import numpy as np

from bench.common import beir as be
from calypso.embeddings.local_onnx import LocalOnnxEmbedder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--out", type=Path, default=Path("/tmp/calypso-bench-embeddings-20k.sqlite"))
    args = ap.parse_args()
    with gzip.open(be.scifact_dir() / "corpus_sentences.jsonl.gz", "rt", encoding="utf-8") as lines:
        sentences = [s for line in lines for s in json.loads(line)["sentences"] if len(s.split()) >= 6]
    rng = np.random.default_rng(0)
    chosen = [
        sentences[i] for i in sorted(rng.choice(len(sentences), size=min(args.count, len(sentences)), replace=False))
    ]
    started = time.perf_counter()
    vectors = LocalOnnxEmbedder().embed(chosen)
    con = sqlite3.connect(args.out)
    con.execute(
        "CREATE TABLE IF NOT EXISTS embedding_cache (key BLOB PRIMARY KEY, dim INTEGER NOT NULL, vector BLOB NOT NULL)"
    )
    con.execute("DELETE FROM embedding_cache")
    con.executemany(
        "INSERT INTO embedding_cache VALUES (?, ?, ?)",
        [(str(i).encode(), vectors.shape[1], row.tobytes()) for i, row in enumerate(vectors)],
    )
    con.commit()
    con.close()
    print(
        f"{len(chosen):,} of {len(sentences):,} sentences embedded in {time.perf_counter() - started:.0f} s -> {args.out}"
    )


if __name__ == "__main__":
    main()
