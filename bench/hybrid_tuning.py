"""The one-language fusion defaults per embedding model, tuned on SciFact train and reported on test (issue 45).

``retrieval/hybrid.py``'s 0.6 / 0.4 were chosen on SciFact train with MiniLM; multilingual-e5-small's vectors
fuse with BM25 otherwise. For each model this captures, through the shipped service, every SciFact claim's runs
as ``SearchService`` fetches them at the server's defaults (one passage per abstract, as bench/hybrid_quality.py;
train and test claims): the keyword run and the vector run (each 100 deep, the vector run before the model's
cosine floor, the query embedded by ``SearchService.query_vector``) and the exact-match signal with its weight.
Then, offline with the shipped ``hybrid.fuse``:

- a check that the shipped path is reproduced: the server's defaults fused here give the test nDCG@10 that
  ``SearchService.search`` gives (printed beside it);
- e5's prefixes: the stored passage vectors and the query vectors are e5's of ``"passage: " + text`` and
  ``"query: " + text`` (cosines to vectors embedded with the prefix written out, and without it);
- the cosine floor: how many gold abstracts in the vector run's top 100 it drops;
- a grid over the text weight (embedding weight 1 - t), the exact signal's scale and the floor, chosen on
  train (809 claims) only; every cell's test figure is printed too, so the choice can be seen against it;
- other ways of handing the runs to ``fuse`` (``SHAPES``: e5's cosines put on MiniLM's scale first, shallower
  runs, the vector run by rank), each with its text weight chosen on train;
- ``--longer 192,256,512``: e5 (the first model) reading more of each abstract than its shipped 192 pieces;
- with two models, claim by claim: the first's hybrid nDCG@10 less the second's on each split, a bootstrap 95%
  interval, and the spread of that difference over 300-claim samples of train (the size of the test split).

The runs are cached in ``--cache`` (per model: the ingested home with its embedding cache, and the runs as
JSON), so a second run neither re-embeds nor re-searches.

    .venv/bin/python -m bench.hybrid_tuning [--models multilingual-e5-small-int8,minilm-l6-v2-int8] [--longer 192,256,512]
        [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import beir as be
from bench.hybrid_quality import loadavg, open_with_model
from calypso.config import Settings
from calypso.embeddings import calibration
from calypso.retrieval import hybrid
from calypso.retrieval.exact_match import EXACT_WEIGHT, exact_signal
from calypso.retrieval.query import keyword_query
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from calypso.services.search import HYBRID_DEPTH

NAMESPACE = "scifact"
TEXT_WEIGHTS = tuple(round(0.30 + 0.05 * i, 2) for i in range(11))  # 0.30 … 0.80
EXACT_SCALES = (0.0, 1.0, 1.5, 2.0)  # times the shipped EXACT_WEIGHT's share: 1.0 is the shipped signal
HIGHER_FLOORS = (0.75, 0.80)  # beside the model's own floor (calibration.query_floor), for e5's bunched cosines
Run = list[tuple[str, float]]
Qrels = dict[str, dict[str, int]]


def capture(model: str, cache: Path) -> dict[str, Any]:
    """Every SciFact claim's keyword run, vector run (no floor) and exact signal; the shipped search's test run."""
    out_file = cache / f"runs-{model}.json"
    if out_file.exists():
        cached: dict[str, Any] = json.loads(out_file.read_text())
        return cached
    path = be.scifact_dir()
    corpus, queries = be.load_corpus(path), be.load_queries(path)
    splits = {split: be.load_qrels(path, split) for split in ("train", "test")}
    services = open_with_model(Settings(home=cache / model, chunk_size=100_000, chunk_overlap=0, embedding_model=model))
    try:
        search = services.search
        if len(search.index(NAMESPACE)) == 0:
            for doc_id, text in corpus.items():
                services.ingestion.ingest(Upload(text.encode(), f"{doc_id}.txt", NAMESPACE))
        t0 = time.perf_counter()
        embedded = embed_all(services.vectors)
        print(f"  [{model}] embed_all: {embedded:,} passages in {time.perf_counter() - t0:.1f} s", flush=True)
        index, vectors = search.index(NAMESPACE), search.vectors(NAMESPACE)
        assert vectors is not None and len(vectors) == len(corpus), "every abstract embedded"
        doc_of: dict[int, str] = {}

        def named(run: list[tuple[int, float]]) -> Run:
            missing = [key for key, _ in run if key not in doc_of]
            for key, (_, document) in search.store.get_passages("default", missing, NAMESPACE).items():
                doc_of[key] = document.filename.removesuffix(".txt")
            return [(doc_of[key], score) for key, score in run]

        runs: dict[str, Any] = {}
        for qid in sorted({q for qrels in splits.values() for q in qrels}):
            query = queries[qid]
            keywords = keyword_query(query)
            matches, weight = exact_signal(index, query, keywords, HYBRID_DEPTH)
            runs[qid] = {
                "text": named(index.search(keywords, k=HYBRID_DEPTH)),
                "dense": named(vectors.search(search.query_vector(query), k=HYBRID_DEPTH)),
                "exact": dict(named(list(matches.items()))),
                "exact_weight": weight,
            }
        shipped = {}
        for qid in splits["test"]:
            found = search.search(queries[qid], search.scope(NAMESPACE, max_results=100))
            shipped[qid] = list(dict.fromkeys(p.document.filename.removesuffix(".txt") for p in found))
        result = {
            "model": model,
            "runs": runs,
            "shipped_test": shipped,
            "prefixes": prefixes(services, corpus, queries),
        }
    finally:
        services.close()
    out_file.write_text(json.dumps(result))
    return result


def prefixes(services: Any, corpus: dict[str, str], queries: dict[str, str]) -> dict[str, float] | None:
    """e5 only: cosines of the stored passage vectors and the search's query vectors to e5's own vectors of the
    texts with the role written out (``"passage: "`` / ``"query: "``) and of the bare texts."""
    from calypso.embeddings.multilingual_e5 import MultilingualE5Embedder

    embedder = services.vectors.embedder
    if not embedder.name.startswith("multilingual-e5"):
        return None
    bare = MultilingualE5Embedder(prefix="")
    texts, claims = list(corpus.values())[:20], list(queries.values())[:20]
    stored = np.asarray(embedder.embed(texts))  # from the embedding cache: the vectors embed_all stored
    asked = np.asarray([services.search.query_vector(q) for q in claims])

    def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.mean(np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))

    return {
        "passages vs 'passage: ' + text": mean_cosine(stored, bare.embed(["passage: " + t for t in texts])),
        "passages vs bare text": mean_cosine(stored, bare.embed(texts)),
        "queries vs 'query: ' + text": mean_cosine(asked, bare.embed(["query: " + q for q in claims])),
        "queries vs bare text": mean_cosine(asked, bare.embed(claims)),
    }


Shape = Callable[[str, Run, Run], tuple[Run, Run]]


def _rescored(run: Run, scores: Sequence[float]) -> Run:
    return [(doc, float(score)) for (doc, _), score in zip(run, scores, strict=True)]


# Other ways to hand the two runs to ``fuse`` (model, keyword run, vector run -> the runs fused), tried beside the
# shipped one with every text weight, chosen on train like the weights.
SHAPES: dict[str, Shape] = {
    "shipped (min-max of each run, 100 deep)": lambda model, text, dense: (text, dense),
    "cosines on MiniLM's scale (calibration.reference_scale)": lambda model, text, dense: (
        text,
        _rescored(dense, calibration.reference_scale(model, [c for _, c in dense]).tolist()),
    ),
    "vector run 50 deep": lambda model, text, dense: (text, dense[:50]),
    "keyword run 50 deep": lambda model, text, dense: (text[:50], dense),
    "vector run by rank (1 - rank / 100)": lambda model, text, dense: (
        text,
        _rescored(dense, [1 - i / HYBRID_DEPTH for i in range(len(dense))]),
    ),
}
SHIPPED = next(iter(SHAPES))


def ranked(
    model: str, runs: dict[str, Any], text_weight: float, exact_scale: float, floor: float, shape: str = SHIPPED
) -> list[str]:
    """One claim's ranking as ``SearchService._search_namespace`` fuses it at default weights (one-passage
    documents: the neighbour smoothing leaves them as they are)."""
    dense = [(doc, cosine) for doc, cosine in runs["dense"] if cosine >= floor]
    text, dense = SHAPES[shape](model, runs["text"], dense)
    fused = hybrid.fuse(
        text,
        dense,
        text_weight=text_weight,
        embedding_weight=round(1 - text_weight, 4),
        exact=runs["exact"],
        exact_weight=runs["exact_weight"] * exact_scale,
    )
    return [doc for doc, _ in fused]


def per_claim(
    captured: dict[str, Any], qrels: Qrels, text_weight: float, exact_scale: float, floor: float, shape: str = SHIPPED
) -> list[float]:
    model, runs = captured["model"], captured["runs"]
    run = {q: ranked(model, runs[q], text_weight, exact_scale, floor, shape) for q in qrels}
    return be.per_query(run, qrels)["ndcg@10"]


def ndcg(
    captured: dict[str, Any], qrels: Qrels, text_weight: float, exact_scale: float, floor: float, shape: str = SHIPPED
) -> float:
    scores = per_claim(captured, qrels, text_weight, exact_scale, floor, shape)
    return sum(scores) / len(scores)


def report(captured: dict[str, Any], splits: dict[str, Qrels]) -> dict[str, Any]:
    model, runs = captured["model"], captured["runs"]
    floor = calibration.query_floor(model)
    test, train = splits["test"], splits["train"]
    out: dict[str, Any] = {"model": model, "prefixes": captured["prefixes"]}
    print(f"\n## {model} (cosine floor {floor})")
    if captured["prefixes"]:
        print("prefix check (mean cosine over 20 texts): " + json.dumps(captured["prefixes"]))
    shipped = be.evaluate(captured["shipped_test"], test)["ndcg@10"]
    here = ndcg(captured, test, hybrid.DEFAULT_TEXT_WEIGHT, 1.0, floor)
    print(f"test nDCG@10, SearchService.search on the defaults {shipped:.4f}; the same fused here {here:.4f}")
    keyword = {q: [d for d, _ in runs[q]["text"]] for q in runs}
    dense = {q: [d for d, c in runs[q]["dense"] if c >= floor] for q in runs}
    for split, qrels in (("train", train), ("test", test)):
        k, d = be.evaluate(keyword, qrels), be.evaluate(dense, qrels)
        out[f"{split} keyword"], out[f"{split} dense"] = k, d
        print(
            f"{split} ({len(qrels)}): keyword {k['ndcg@10']:.4f} / R@100 {k['recall@100']:.4f}, dense "
            f"{d['ndcg@10']:.4f} / {d['recall@100']:.4f}, hybrid on the defaults "
            f"{ndcg(captured, qrels, hybrid.DEFAULT_TEXT_WEIGHT, 1.0, floor):.4f}"
        )
    gold_in_dense = [(c, doc in qrels[q]) for qrels in (train, test) for q in qrels for doc, c in runs[q]["dense"]]
    gold = sorted(c for c, is_gold in gold_in_dense if is_gold)
    dropped, every = sum(c < floor for c in gold), [c for c, _ in gold_in_dense]
    print(
        f"cosines in the vector runs: gold {len(gold)} (min {gold[0]:.3f}, 1st pct {gold[len(gold) // 100]:.3f}), "
        f"{dropped} below the floor {floor}; of all {len(every):,} returned, {sum(c < floor for c in every)} below "
        f"it (min {min(every):.3f}); each run's 100th cosine: median "
        f"{float(np.median([runs[q]['dense'][-1][1] for q in runs])):.3f}"
    )
    out["gold below floor"] = dropped
    grid: list[dict[str, Any]] = []
    for cut in [floor, *(f for f in HIGHER_FLOORS if floor >= 0.5 and f > floor)]:
        for scale in EXACT_SCALES:
            for t in TEXT_WEIGHTS:
                grid.append(
                    {
                        "text_weight": t,
                        "exact_scale": scale,
                        "floor": cut,
                        "train": ndcg(captured, train, t, scale, cut),
                        "test": ndcg(captured, test, t, scale, cut),
                    }
                )
    out["grid"] = grid
    print(f"\ntext weight (embedding 1 - t) x exact scale (x {EXACT_WEIGHT} x idf share), floor {floor}: train / test")
    print("| t | " + " | ".join(f"exact x{s}" for s in EXACT_SCALES) + " |\n|---|" + "---|" * len(EXACT_SCALES))
    for t in TEXT_WEIGHTS:
        cells = [g for g in grid if g["text_weight"] == t and g["floor"] == floor]
        print(f"| {t} | " + " | ".join(f"{g['train']:.4f} / {g['test']:.4f}" for g in cells) + " |")
    best = max(grid, key=lambda g: (round(g["train"], 6), -abs(g["text_weight"] - 0.6)))
    out["chosen on train"] = best
    print(
        f"chosen on train: text {best['text_weight']}, exact x{best['exact_scale']}, floor {best['floor']}: "
        f"train {best['train']:.4f}, test {best['test']:.4f}; the best test cell of the grid "
        f"{max(g['test'] for g in grid):.4f}"
    )
    for f in sorted({g["floor"] for g in grid}):
        top = max((g for g in grid if g["floor"] == f), key=lambda g: g["train"])
        print(f"  best on train at floor {f}: text {top['text_weight']}, exact x{top['exact_scale']}: "
              f"train {top['train']:.4f}, test {top['test']:.4f}")  # fmt: skip
    out["shapes"] = shapes(captured, train, test, floor)
    return out


def shapes(captured: dict[str, Any], train: Qrels, test: Qrels, floor: float) -> dict[str, Any]:
    """Each way of shaping the runs, its text weight chosen on train (the exact signal as shipped)."""
    out: dict[str, Any] = {}
    print(
        "\n| runs as fused | text weight chosen on train | train | test | best test at any weight |\n|---|---|---|---|---|"
    )
    for shape in SHAPES:
        cells = [(t, ndcg(captured, train, t, 1.0, floor, shape), ndcg(captured, test, t, 1.0, floor, shape))
                 for t in TEXT_WEIGHTS]  # fmt: skip
        t, tr, te = max(cells, key=lambda c: c[1])
        out[shape] = {"text_weight": t, "train": tr, "test": te, "best test": max(c[2] for c in cells)}
        print(f"| {shape} | {t} | {tr:.4f} | {te:.4f} | {out[shape]['best test']:.4f} |")
    return out


def compare(first: dict[str, Any], second: dict[str, Any], splits: dict[str, Qrels]) -> dict[str, Any]:
    """Claim by claim, on the defaults: the first model's hybrid nDCG@10 less the second's, with a bootstrap 95%
    interval; and how far apart 300-claim samples of train put them (the test split is 300 claims)."""
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    print(f"\n## {first['model']} less {second['model']}, hybrid on the defaults, claim by claim")
    for split, qrels in {**splits, "all": {**splits["train"], **splits["test"]}}.items():
        a, b = (np.asarray(per_claim(c, qrels, hybrid.DEFAULT_TEXT_WEIGHT, 1.0, calibration.query_floor(c["model"])))
                for c in (first, second))  # fmt: skip
        diff = a - b
        boot = [float(diff[rng.integers(0, len(diff), len(diff))].mean()) for _ in range(5000)]
        if split == "train":  # the test split is one 300-claim sample
            samples = [float(diff[rng.choice(len(diff), 300, replace=False)].mean()) for _ in range(5000)]
            out["train 300-claim samples, 2.5-97.5th"] = [float(np.percentile(samples, q)) for q in (2.5, 97.5)]
        out[split] = {
            "difference": float(diff.mean()),
            "interval": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
            "better": int((diff > 1e-9).sum()),
            "worse": int((diff < -1e-9).sum()),
        }
        row = out[split]
        print(
            f"{split} ({len(qrels)}): {a.mean():.4f} against {b.mean():.4f}, difference {row['difference']:+.4f} "
            f"(95% {row['interval'][0]:+.4f} to {row['interval'][1]:+.4f}); better on {row['better']}, worse on "
            f"{row['worse']}"
        )
    low, high = out["train 300-claim samples, 2.5-97.5th"]
    print(f"the difference over 300-claim samples of train (2.5th to 97.5th percentile): {low:+.4f} to {high:+.4f}")
    return out


def longer_passages(captured: dict[str, Any], splits: dict[str, Qrels], lengths: Sequence[int], cache: Path) -> Any:
    """e5 reading more of each abstract (``max_tokens``; the shipped 192 keeps 67.7 passages/s): an exact top 100
    by cosine over every abstract (what the in-memory index returns at this size; 192's stored vectors give the
    captured runs' figures), fused with the captured keyword runs and exact signal, the text weight chosen on train."""
    from calypso.embeddings.multilingual_e5 import MAX_TOKENS, MultilingualE5Embedder

    corpus, queries = be.load_corpus(be.scifact_dir()), be.load_queries(be.scifact_dir())
    ids, runs, floor = list(corpus), captured["runs"], calibration.query_floor(captured["model"])
    claims = sorted(runs)
    shipped = MultilingualE5Embedder()
    asked = np.asarray(shipped.for_queries().embed([queries[q] for q in claims]))  # claims are under 192 pieces
    out: dict[str, Any] = {}
    print(
        "\n| e5 reads (pieces) | passages/s | dense train / test | text weight chosen on train | hybrid train / test |"
    )
    print("|---|---|---|---|---|")
    for length in lengths:
        saved, timing = cache / f"e5-passages-{length}.npy", cache / f"e5-passages-{length}.rate"
        speed = "the capture's"
        if length == MAX_TOKENS:  # the vectors the capture stored
            with sqlite3.connect(cache / captured["model"] / "calypso.sqlite3") as db:
                stored = dict(db.execute(
                    "SELECT d.filename, e.vector FROM chunk_embeddings e JOIN documents d ON d.key = e.document_key"
                ).fetchall())  # fmt: skip
            passages = np.stack([np.frombuffer(stored[f"{doc}.txt"], dtype=np.float32) for doc in ids])
        elif saved.exists():
            passages, speed = np.load(saved), timing.read_text()
        else:
            t0 = time.perf_counter()
            passages = np.asarray(MultilingualE5Embedder(max_tokens=length).embed(list(corpus.values())))
            speed = f"{len(ids) / (time.perf_counter() - t0):.1f} (load average {loadavg()})"
            np.save(saved, passages)
            timing.write_text(speed)
        cosines = asked @ passages.T / np.linalg.norm(passages, axis=1) / np.linalg.norm(asked, axis=1)[:, None]
        dense: dict[str, Run] = {}
        for row, q in enumerate(claims):
            top = np.argsort(-cosines[row])[:HYBRID_DEPTH]
            dense[q] = [(ids[j], float(cosines[row, j])) for j in top if cosines[row, j] >= floor]
        at_length = {"model": captured["model"], "runs": {q: {**runs[q], "dense": dense[q]} for q in claims}}
        cells = [(t, ndcg(at_length, splits["train"], t, 1.0, floor), ndcg(at_length, splits["test"], t, 1.0, floor))
                 for t in TEXT_WEIGHTS]  # fmt: skip
        t, train, test = max(cells, key=lambda c: c[1])
        alone = [
            be.evaluate({q: [d for d, _ in dense[q]] for q in qrels}, qrels)["ndcg@10"] for qrels in splits.values()
        ]
        out[str(length)] = {"passages/s": speed, "dense": alone, "text_weight": t, "train": train, "test": test}
        print(f"| {length} | {speed} | {alone[0]:.4f} / {alone[1]:.4f} | {t} | {train:.4f} / {test:.4f} |", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="multilingual-e5-small-int8,minilm-l6-v2-int8")
    ap.add_argument("--longer", default="", help="e5 only: also read N pieces of each abstract, e.g. 192,256,512")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "calypso-hybrid-tuning")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    print(f"load average {loadavg()}", flush=True)
    path = be.scifact_dir()
    splits = {split: be.load_qrels(path, split) for split in ("train", "test")}
    t0 = time.perf_counter()
    captured = [capture(model, args.cache) for model in args.models.split(",")]
    results: list[dict[str, Any]] = [report(c, splits) for c in captured]
    if len(captured) == 2:
        results.append(compare(captured[0], captured[1], splits))
    if args.longer:
        lengths = [int(n) for n in args.longer.split(",")]
        results.append(longer_passages(captured[0], splits, lengths, args.cache))
    (args.cache / "report.json").write_text(json.dumps(results, indent=1))
    print(f"\n({time.perf_counter() - t0:.0f} s; load average {loadavg()}; raw: {args.cache / 'report.json'})")


if __name__ == "__main__":
    main()
