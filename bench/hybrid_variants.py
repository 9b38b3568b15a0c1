"""Variants of hybrid retrieval measured offline with the shipped functions (issue 12, "Neighbour smoothing").

Keyword runs come from the shipped BM25 index through ``DocumentService`` (model off, query analysis on),
vector runs from the shipped model; ``calypso.retrieval.hybrid.fuse`` and ``smooth_neighbours`` combine
them as ``DocumentService.search`` does (100 deep, cosine floor 0.15, smoothing over the top 50 fused).
Grids over the embedding weight and the neighbour weight, on question sets where a document has many
passages:

- Alps PDF (39 SQuAD questions): first source's page range holds the gold page, as bench/alps_pages.py;
  then two-fold cross-validation of the neighbour weight over the questions (even / odd), weight 0.4.
- Alps HTML (the same page, other chunk boundaries, no pages): first source holds the question's gold fact.
- WiCE (326 claims with supporting sentences, each cited web page a document of ~10 passages): the first
  passage holds a gold supporting sentence (hit@1), and nDCG@10 over passages; held out from Alps.
- ``--scifact``: SciFact nDCG@10 on train and test (one passage per abstract, so smoothing cannot move it).

``--windows`` adds vectors that cover a whole passage (``tokmean``: the passage cut into 128-piece windows,
the model's token states averaged over all of them) beside the shipped first-128-pieces vectors; it embeds
two to three times as many pieces.

    .venv/bin/python -m bench.hybrid_variants [--windows] [--scifact]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import beir as be
from calypso.config import Settings
from calypso.embeddings.calibration import DEFAULT_QUERY_FLOOR as MIN_COSINE  # their model: MiniLM
from calypso.embeddings.local_onnx import LocalOnnxEmbedder
from calypso.retrieval.hybrid import NEIGHBOUR_POOL, fuse, smooth_neighbours
from calypso.retrieval.query import keyword_query
from calypso.services import open_services
from calypso.services.ingestion import Upload
from calypso.services.search import HYBRID_DEPTH

WEIGHTS = (0.3, 0.4, 0.5)
LAMBDAS = (0.0, 0.25, 0.5, 0.75, 1.0)
Chunk = tuple[int, str, int]  # (key, text, position in its document)


class Collection:
    """Documents ingested with the shipped settings; their chunks and each query's keyword run."""

    def __init__(self, docs: Sequence[tuple[str, bytes, str]], queries: Sequence[str], per_doc_query: bool, **kw: Any):
        home = Path(tempfile.mkdtemp(prefix="calypso-variants-"))
        services = open_services(Settings(home=home, embedding_model="none", **kw))
        searcher = services.search
        ids = [services.ingestion.ingest(Upload(data, name, ns)).document.id for name, data, ns in docs]
        self.runs: list[list[tuple[int, float]]] = []
        for i, q in enumerate(queries):
            ns = docs[i][2] if per_doc_query else docs[0][2]
            self.runs.append(searcher.index(ns).search(keyword_query(q), k=HYBRID_DEPTH))
        services.close()
        db = sqlite3.connect(str(home / "calypso.sqlite3"))
        self.chunks: list[list[Chunk]] = []
        self.pages: dict[int, set[int]] = {}
        self.spans: dict[int, tuple[int, int]] = {}  # offsets into the document text
        for doc_id in ids:
            rows = db.execute(
                'SELECT c.key, c.text, c.chunk_index, c.page_start, c.page_end, c.start, c."end" FROM chunks c '
                "JOIN documents d ON d.key = c.document_key WHERE d.id = ? ORDER BY c.chunk_index",
                (doc_id,),
            ).fetchall()
            self.chunks.append([(k, t, i) for k, t, i, *_ in rows])
            for k, _, _, first, last, start, end in rows:
                self.pages[k] = set(range(first, last + 1))
                self.spans[k] = (start, end)
        db.close()
        shutil.rmtree(home, ignore_errors=True)
        self.position = {k: (d, i) for d, cs in enumerate(self.chunks) for k, _, i in cs}


class Windows:
    """The shipped model over 128-piece windows of a text (bench only: uses the embedder's session)."""

    def __init__(self, model: LocalOnnxEmbedder) -> None:
        from tokenizers import Tokenizer

        from calypso.embeddings.local_onnx import model_files

        model.load()
        self.model = model
        self.tokenizer = Tokenizer.from_file(str(model_files()[1]))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def tokmean(self, texts: Sequence[str]) -> np.ndarray:
        body = self.model.max_tokens - 2  # pieces per window besides [CLS] and [SEP]
        out = np.zeros((len(texts), 384), dtype=np.float32)
        windows: list[tuple[int, list[int]]] = []
        for row, enc in enumerate(self.tokenizer.encode_batch(list(texts))):
            ids = enc.ids[1:-1]
            starts = [0] if len(ids) <= body else [*range(0, len(ids) - body, body), len(ids) - body]
            windows += [(row, [enc.ids[0], *ids[s : s + body], enc.ids[-1]]) for s in starts]
        windows.sort(key=lambda w: len(w[1]))
        for start in range(0, len(windows), 4):
            batch = windows[start : start + 4]
            width = max(len(ids) for _, ids in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, (_, w) in enumerate(batch):
                ids[r, : len(w)], mask[r, : len(w)] = w, 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.model._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.model._session.run(None, feeds)[0]
            sums = (hidden * mask[..., None]).sum(axis=1)
            for r, (row, _) in enumerate(batch):
                out[row] += sums[r]
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def dense_runs(coll: Collection, qvecs: np.ndarray, vecs: dict[int, np.ndarray], per_doc: bool) -> list[list]:
    runs = []
    all_keys = [k for cs in coll.chunks for k, _, _ in cs]
    for i, q in enumerate(qvecs):
        keys = [k for k, _, _ in coll.chunks[i]] if per_doc else all_keys
        matrix = np.stack([vecs[k] for k in keys])
        scores = matrix @ q
        order = np.argsort(-scores)[:HYBRID_DEPTH]
        runs.append([(keys[j], float(scores[j])) for j in order if scores[j] >= MIN_COSINE])
    return runs


def embed_chunks(coll: Collection, embed: Callable[[list[str]], np.ndarray]) -> dict[int, np.ndarray]:
    keys = [k for cs in coll.chunks for k, _, _ in cs]
    texts = [t for cs in coll.chunks for _, t, _ in cs]
    t0 = time.perf_counter()
    vectors = embed(texts)
    print(f"  embedded {len(texts):,} passages in {time.perf_counter() - t0:.0f} s", flush=True)
    return dict(zip(keys, vectors))


def ranked(coll: Collection, dense: list[list], w: float, lam: float) -> list[list[tuple[int, float]]]:
    out = []
    for text_run, dense_run in zip(coll.runs, dense):
        pool = fuse(text_run, dense_run, text_weight=1 - w, embedding_weight=w)[:NEIGHBOUR_POOL]
        out.append(smooth_neighbours(pool, {k: coll.position[k] for k, _ in pool}, lam))
    return out


def norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def alps(args: argparse.Namespace, model: LocalOnnxEmbedder, windows: Windows | None) -> None:
    root = be.data_root() / "alps-wiki-qa"
    rows = [json.loads(line) for line in open(root / "alps_qa_with_pdf_pages.jsonl", encoding="utf-8")]
    questions = [r["question"] for r in rows]
    qvecs = model.embed(questions)
    for name in ("alps_wiki.pdf", "alps_wiki.html"):
        coll = Collection([(name, (root / name).read_bytes(), "alps")], questions, per_doc_query=False)
        texts = {k: norm(t) for cs in coll.chunks for k, t, _ in cs}

        def hit(
            r: dict, top: list[tuple[int, float]], coll: Collection = coll, name: str = name, texts: dict = texts
        ) -> bool:
            if not top:
                return False
            if name.endswith(".pdf"):
                return bool(coll.pages[top[0][0]] & set(r["gold_pdf_pages"]))
            return norm(r["facts"][0])[:50] in texts[top[0][0]]

        what = "first source holds the gold page" if name.endswith(".pdf") else "first source holds the gold fact"
        print(f"\n{name}: {sum(len(c) for c in coll.chunks)} passages; {what}, of {len(rows)}", flush=True)
        vector_sets = {"first 128 pieces (shipped)": embed_chunks(coll, model.embed)}
        if windows is not None:
            vector_sets["tokmean, all windows"] = embed_chunks(coll, windows.tokmean)
        for label, vecs in vector_sets.items():
            dense = dense_runs(coll, qvecs, vecs, per_doc=False)
            print(f"\n{label}: dense only {sum(hit(r, d) for r, d in zip(rows, dense))}")
            print("| neighbour weight | " + " | ".join(f"w_dense {w}" for w in WEIGHTS) + " |")
            print("|---|" + "---|" * len(WEIGHTS))
            hits: dict[tuple[float, float], list[bool]] = {}
            for lam in LAMBDAS:
                cells = []
                for w in WEIGHTS:
                    hits[w, lam] = [hit(r, top) for r, top in zip(rows, ranked(coll, dense, w, lam))]
                    base = hits[w, 0.0]
                    gained = [r["qid"][5:] for r, h, b in zip(rows, hits[w, lam], base) if h and not b]
                    lost = [r["qid"][5:] for r, h, b in zip(rows, hits[w, lam], base) if b and not h]
                    change = f" (gained {','.join(gained) or 'none'}; lost {','.join(lost) or 'none'})" if lam else ""
                    cells.append(f"{sum(hits[w, lam])}{change}")
                print(f"| {lam} | " + " | ".join(cells) + " |")
            if name.endswith(".pdf"):
                cross_validate(rows, hits)


def cross_validate(rows: list[dict], hits: dict[tuple[float, float], list[bool]], w: float = 0.4) -> None:
    """Neighbour weight chosen on half the questions (ties: the smaller), counted on the other half."""
    total = 0
    for fold in (0, 1):
        tune = [i for i in range(len(rows)) if i % 2 == fold]
        held = [i for i in range(len(rows)) if i % 2 != fold]
        best = max(LAMBDAS, key=lambda lam: (sum(hits[w, lam][i] for i in tune), -lam))
        got = sum(hits[w, best][i] for i in held)
        total += got
        print(f"  cross-validation, w_dense {w}: tuned on fold {fold} -> {best}; held-out fold: {got}/{len(held)}")
    print(f"  cross-validated total: {total}/{len(rows)}")


def wice(model: LocalOnnxEmbedder, windows: Windows | None) -> None:
    path = be.data_root() / "wice" / "entailment_retrieval" / "claim" / "test.jsonl"
    rows = []
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        gold = {i for ann in r["supporting_sentences"] for i in ann}
        if r["label"] != "not_supported" and gold:
            rows.append((r, gold))
    docs, spans = [], []
    for n, (r, gold) in enumerate(rows):
        text, offsets = "", []
        for sentence in r["evidence"]:
            text += "\n" if text else ""
            offsets.append((len(text), len(text) + len(sentence)))
            text += sentence
        docs.append((f"wice{n}.txt", text.encode(), f"wice{n}"))
        spans.append([offsets[i] for i in gold if i < len(offsets)])
    claims = [r["claim"] for r, _ in rows]
    coll = Collection(docs, claims, per_doc_query=True)
    # Relevant passages: those overlapping a gold supporting sentence.
    relevant = [
        {k for k, _, _ in cs if any(coll.spans[k][0] < e and s < coll.spans[k][1] for s, e in spans[n])}
        for n, cs in enumerate(coll.chunks)
    ]
    passages = sum(len(cs) for cs in coll.chunks)
    print(f"\nWiCE: {len(rows)} claims, {passages:,} passages; hit@1 / nDCG@10", flush=True)
    qvecs = model.embed(claims)
    vector_sets = {"first 128 pieces (shipped)": embed_chunks(coll, model.embed)}
    if windows is not None:
        vector_sets["tokmean, all windows"] = embed_chunks(coll, windows.tokmean)
    keyword = evaluate_wice(coll.runs, relevant)
    print(f"keyword only: {keyword[0]:.3f} / {keyword[1]:.3f}")
    for label, vecs in vector_sets.items():
        dense = dense_runs(coll, qvecs, vecs, per_doc=True)
        d = evaluate_wice(dense, relevant)
        print(f"\n{label}: dense only {d[0]:.3f} / {d[1]:.3f}")
        print("| neighbour weight | " + " | ".join(f"w_dense {w}" for w in WEIGHTS) + " |")
        print("|---|" + "---|" * len(WEIGHTS))
        for lam in LAMBDAS:
            cells = [evaluate_wice(ranked(coll, dense, w, lam), relevant) for w in WEIGHTS]
            print(f"| {lam} | " + " | ".join(f"{h:.3f} / {n:.3f}" for h, n in cells) + " |")


def evaluate_wice(runs: list[list[tuple[int, float]]], relevant: list[set[int]]) -> tuple[float, float]:
    hit = ndcg = 0.0
    for run, rel in zip(runs, relevant):
        keys = [k for k, _ in run]
        hit += bool(keys) and keys[0] in rel
        dcg = sum(1 / math.log2(i + 2) for i, k in enumerate(keys[:10]) if k in rel)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(rel))))
        ndcg += dcg / ideal if ideal else 0.0
    return hit / len(runs), ndcg / len(runs)


def scifact(model: LocalOnnxEmbedder, windows: Windows | None) -> None:
    path = be.scifact_dir()
    corpus, queries = be.load_corpus(path), be.load_queries(path)
    qrels = {split: be.load_qrels(path, split) for split in ("train", "test")}
    docs = [(f"{d}.txt", t.encode(), "scifact") for d, t in corpus.items()]
    qids = list(queries)
    coll = Collection(docs, [queries[q] for q in qids], per_doc_query=False, chunk_size=100_000, chunk_overlap=0)
    doc_of = {k: d.removesuffix(".txt") for (d, _, _), cs in zip(docs, coll.chunks) for k, _, _ in cs}
    print(f"\nSciFact: {len(docs):,} abstracts, one passage each; nDCG@10 train / test", flush=True)
    qvecs = model.embed([queries[q] for q in qids])

    def ndcg(runs: list[list[tuple[int, float]]]) -> str:
        run = {q: [doc_of[k] for k, _ in r] for q, r in zip(qids, runs)}
        return " / ".join(
            f"{be.evaluate({q: run[q] for q in qrels[s]}, qrels[s])['ndcg@10']:.4f}" for s in ("train", "test")
        )

    print(f"keyword only: {ndcg(coll.runs)}")
    vector_sets = {"first 128 pieces (shipped)": embed_chunks(coll, model.embed)}
    if windows is not None:
        vector_sets["tokmean, all windows"] = embed_chunks(coll, windows.tokmean)
    for label, vecs in vector_sets.items():
        dense = dense_runs(coll, qvecs, vecs, per_doc=False)
        print(f"{label}: dense only {ndcg(dense)}")
        for w in WEIGHTS:
            print(
                f"  w_dense {w}: "
                + "; ".join(f"neighbours {lam}: {ndcg(ranked(coll, dense, w, lam))}" for lam in (0.0, 0.5))
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", action="store_true", help="also vectors averaged over all 128-piece windows")
    ap.add_argument("--scifact", action="store_true", help="also SciFact train/test (5,183 passages to embed)")
    args = ap.parse_args()
    print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}", flush=True)
    model = LocalOnnxEmbedder()
    windows = Windows(model) if args.windows else None
    t0 = time.perf_counter()
    alps(args, model, windows)
    wice(model, windows)
    if args.scifact:
        scifact(model, windows)
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
