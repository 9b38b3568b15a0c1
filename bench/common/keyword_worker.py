"""A keyword index (ours, bm25s, FTS5) built and searched in a forked process of its own."""

from __future__ import annotations

import gc
import multiprocessing as mp
import random
import time
from collections.abc import Callable

import numpy as np

from bench.common.synthetic import SEED
from calypso.retrieval.bm25 import BM25Index

Search = Callable[[str], list[tuple[int, float]]]


def _rss_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return float("nan")


def build_bm25s(texts: list[str], per_doc: int) -> tuple[Search, dict, None]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(k1=BM25Index().k1, b=BM25Index().b, method="lucene")
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    mb = sum(v.nbytes for v in retriever.scores.values() if isinstance(v, np.ndarray)) / 2**20

    def search(q: str) -> list[tuple[int, float]]:
        tok = bm25s.tokenize(q, stopwords="en", stemmer=stemmer, show_progress=False)
        try:
            docs, scores = retriever.retrieve(tok, k=10, show_progress=False)
        except ValueError:  # no query token in the vocabulary
            return []
        return [(d, s) for d, s in zip(docs[0].tolist(), scores[0].tolist()) if s > 0]

    return search, {"index_mb": mb}, None


def _updates(idx: BM25Index, texts: list[str], queries: list[str], per_doc: int) -> dict:
    """Median time of add(one doc) / remove(one doc), and of the first search after each
    (which compiles the pending rows / swaps the snapshot)."""
    rng = random.Random(SEED)
    add, add_q, rem, rem_q = [], [], [], []
    next_key, n_docs = len(texts), (len(texts) + per_doc - 1) // per_doc
    for r in range(30):
        chunks = [(next_key + j, texts[rng.randrange(len(texts))]) for j in range(per_doc)]
        next_key += per_doc
        t = time.perf_counter()
        idx.add(n_docs + r, chunks)
        add.append(time.perf_counter() - t)
        t = time.perf_counter()
        idx.search(queries[r], k=10)
        add_q.append(time.perf_counter() - t)
        t = time.perf_counter()
        idx.remove(rng.randrange(n_docs))
        rem.append(time.perf_counter() - t)
        t = time.perf_counter()
        idx.search(queries[r], k=10)
        rem_q.append(time.perf_counter() - t)

    def med(ts: list[float]) -> float:
        return float(np.median(ts) * 1000)

    return {"add_ms": med(add), "add_search_ms": med(add_q), "rm_ms": med(rem), "rm_search_ms": med(rem_q)}


def _worker(conn, build, texts: list[str], queries: list[str], per_doc: int) -> None:
    gc.collect()
    rss0 = _rss_mb("VmRSS")
    t0 = time.perf_counter()
    search, info, idx = build(texts, per_doc)
    info["build_s"] = time.perf_counter() - t0
    info["peak_mb"] = _rss_mb("VmHWM") - rss0
    conn.send(info)
    while (msg := conn.recv()) is not None:
        if msg == "top10":
            conn.send({q: search(q) for q in queries[:300]})
        elif msg == "updates":
            conn.send(_updates(idx, texts, queries, per_doc) if idx is not None else {})
        elif msg == "mem":
            conn.send(idx.memory_bytes() / 2**20 if idx is not None else float("nan"))
        elif msg == "warm":  # all queries back to back: caches stay warm
            ts = []
            for q in queries:
                t = time.perf_counter()
                search(q)
                ts.append(time.perf_counter() - t)
            conn.send(ts)
        else:
            t = time.perf_counter()
            search(queries[msg])
            conn.send(time.perf_counter() - t)


class Worker:
    def __init__(self, build, texts: list[str], queries: list[str], per_doc: int) -> None:
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, build, texts, queries, per_doc))
        self.proc.start()
        self.info = self.conn.recv()  # wait: builds never overlap
        self.times: list[float] = []

    def ask(self, msg: object) -> object:
        self.conn.send(msg)
        return self.conn.recv()

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join()
