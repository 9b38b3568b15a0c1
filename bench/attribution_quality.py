"""Citation support scorer as a classifier: AttributionBench (ID, OOD) and WiCE.

    .venv/bin/python -m bench.attribution_quality [--quick] [--semantic]

Data: $CALYPSO_EVAL_DATA (default <repo>/../shared/data)/attributionbench and /wice.

What is honest here:
- ``calypso.citations.support`` was fitted (weights and SUPPORT_THRESHOLD) on the
  AttributionBench OOD file only (bench/fit_support.py), so its OOD row is in-sample.
- The ID file (test_all_subset_balanced_sampled500) and WiCE are held out: nothing was
  tuned on them. The headline is ID macro-F1 at SUPPORT_THRESHOLD.
- The content-word-overlap baseline's threshold IS tuned on the ID file (the "floor" the
  issue quotes), and so is the "oracle threshold" row of our scorer: information only.

A row's evidence is its ``references`` joined with blank lines (the segment cites them
all); rows with no reference score 0 (the OOD file has 75). WiCE evidence is the cited
page's sentences joined with newlines; supported -> positive, not_supported -> negative,
partially_supported either excluded (headline) or counted as negative.

``--semantic`` adds the scorer with the local embedding model (calypso.citations.semantic,
weights from ``bench/fit_support.py --semantic``, also fitted on the OOD file only) side by side
with the lexical one, and its cost per segment: cold (the segment and every passage sentence
embedded) and with the passage's sentence vectors already cached (the segment embedded only).
Vectors for the quality rows come through the same cache file as fit_support.py's.
"""

from __future__ import annotations

import argparse
import bisect
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.common.attribution import (
    DEFAULT_CACHE,
    ID_FILE,
    OOD_FILE,
    Example,
    balanced_accuracy,
    best_threshold,
    load_attributionbench,
    load_wice,
    macro_f1,
    open_bench_embedder,
)
from bench.common.paths import data_dir
from bench.common.stats import percentile
from calypso.citations import support as sup
from calypso.text.tokenize import Analyzer

# ------------------------------------------------------------------ scorers
_BASELINE_ANALYZER = Analyzer()  # Lucene stopwords + Snowball stems, as retrieval uses


def overlap_score(claim: str, evidence: str) -> float:
    """Plain content-word overlap: share of the claim's distinct terms found in the evidence."""
    c = set(_BASELINE_ANALYZER.tokenize(claim))
    if not c:
        return 0.0
    return len(c & set(_BASELINE_ANALYZER.tokenize(evidence))) / len(c)


def score_all(examples: Sequence[Example], scorer: Callable[[str, str], float]) -> tuple[list[float], list[float]]:
    """Scores and per-example wall times (ms)."""
    scores, times = [], []
    for ex in examples:
        t0 = time.perf_counter()
        scores.append(scorer(ex.claim, ex.evidence))
        times.append((time.perf_counter() - t0) * 1000)
    return scores, times


def row(name: str, labels: Sequence[int], scores: Sequence[float], threshold: float, note: str = "") -> str:
    predicted = [s >= threshold for s in scores]
    return (
        f"| {name} | {len(labels)} | {threshold:.3f} | {100 * macro_f1(labels, predicted):.1f} "
        f"| {100 * balanced_accuracy(labels, predicted):.1f} | {note} |"
    )


def evaluate(quick: bool = False) -> dict:
    """Run everything; returns the numbers (used by tests) and prints the tables."""
    root = data_dir()
    id_rows = load_attributionbench(ID_FILE, root)
    ood_rows = load_attributionbench(OOD_FILE, root)
    wice_rows = load_wice(root)
    if quick:
        ood_rows = ood_rows[::4]
        wice_rows = wice_rows[::2]
    t_sup = sup.SUPPORT_THRESHOLD

    id_y = [e.label for e in id_rows]
    id_s, id_ms = score_all(id_rows, sup.support_score)
    ood_y = [e.label for e in ood_rows]
    ood_s, ood_ms = score_all(ood_rows, sup.support_score)
    wice_s, wice_ms = score_all(wice_rows, sup.support_score)
    base_s, _ = score_all(id_rows, overlap_score)
    base_t, _ = best_threshold(id_y, base_s)
    oracle_t, _ = best_threshold(id_y, id_s)

    print(f"Support scorer: calypso.citations.support, SUPPORT_THRESHOLD = {t_sup:.3f} (chosen on the OOD file)\n")
    print("| set | n | threshold | macro-F1 | balanced acc | note |")
    print("|---|---:|---:|---:|---:|---|")
    print(row("AttributionBench ID (headline)", id_y, id_s, t_sup, "held out"))
    print(row("ID, content-word overlap baseline", id_y, base_s, base_t, "threshold tuned ON the ID file (floor)"))
    print(row("ID, our scorer at oracle threshold", id_y, id_s, oracle_t, "tuned ON the ID file: info only"))
    print(row("AttributionBench OOD", ood_y, ood_s, t_sup, "IN-SAMPLE: weights + threshold fitted here"))
    ex = [i for i, e in enumerate(wice_rows) if e.group != "partially_supported"]
    wy = [e.label for e in wice_rows]
    print(row("WiCE, partial excluded (headline)", [wy[i] for i in ex], [wice_s[i] for i in ex], t_sup, "held out"))
    print(row("WiCE, partial = negative", wy, wice_s, t_sup, "held out"))

    print("\nID by source dataset, at SUPPORT_THRESHOLD:\n")
    print("| source | n | threshold | macro-F1 | balanced acc | note |")
    print("|---|---:|---:|---:|---:|---|")
    for group in sorted({e.group for e in id_rows}):
        ix = [i for i, e in enumerate(id_rows) if e.group == group]
        print(row(group, [id_y[i] for i in ix], [id_s[i] for i in ix], t_sup))

    print("\nWiCE evidence location: best_evidence's span holds a gold supporting sentence (claims with gold):\n")
    print("| max_sentences | claims | hit rate |")
    print("|---:|---:|---:|")
    for width in (1, 2):
        hits = total = 0
        for e in wice_rows:
            if not e.gold_lines:
                continue
            ev = sup.best_evidence(e.claim, e.evidence, max_sentences=width)
            first = bisect.bisect_right(e.line_starts, ev.start) - 1
            last = bisect.bisect_right(e.line_starts, max(ev.start, ev.end - 1)) - 1
            hits += any(i in e.gold_lines for i in range(first, last + 1))
            total += 1
        print(f"| {width} | {total} | {100 * hits / total:.1f}% |")

    # Cost: the first pass above ran with a cold stem cache; a second pass is the steady state.
    warm = {
        name: score_all(rows_, sup.support_score)[1]
        for name, rows_ in (("id", id_rows), ("ood", ood_rows), ("wice", wice_rows))
    }
    pairs = [e for e in id_rows + ood_rows if 800 <= len(e.evidence) <= 1200]
    be_ms = []
    for e in pairs:
        t0 = time.perf_counter()
        sup.best_evidence(e.claim, e.evidence)
        be_ms.append((time.perf_counter() - t0) * 1000)
    print("\nCost per segment (one segment vs its cited evidence, pure Python, one core):\n")
    print("| call | evidence | n | mean chars | first pass mean / p99 ms | warm mean / p99 ms |")
    print("|---|---|---:|---:|---:|---:|")
    for name, key, rows_, ms in (
        ("AttributionBench ID", "id", id_rows, id_ms),
        ("AttributionBench OOD", "ood", ood_rows, ood_ms),
        ("WiCE (whole cited page)", "wice", wice_rows, wice_ms),
    ):
        chars = sum(len(e.evidence) for e in rows_) / len(rows_)
        w = warm[key]
        print(
            f"| support_score | {name} | {len(ms)} | {chars:.0f} | {sum(ms) / len(ms):.3f} / "
            f"{percentile(ms, 99):.3f} | {sum(w) / len(w):.3f} / {percentile(w, 99):.3f} |"
        )
    chars = sum(len(e.evidence) for e in pairs) / len(pairs)
    print(
        f"| best_evidence | ID+OOD passages of 800-1200 chars | {len(pairs)} | {chars:.0f} | - | "
        f"{sum(be_ms) / len(be_ms):.3f} / {percentile(be_ms, 99):.3f} |"
    )
    all_ms = warm["id"] + warm["ood"]
    return {
        "id_macro_f1": macro_f1(id_y, [s >= t_sup for s in id_s]),
        "id_balanced_accuracy": balanced_accuracy(id_y, [s >= t_sup for s in id_s]),
        "baseline_macro_f1": macro_f1(id_y, [s >= base_t for s in base_s]),
        "ms_mean": sum(all_ms) / len(all_ms),
    }


def evaluate_semantic(cache: Path | None = None, timed: int = 40) -> dict:
    """The scorer with and without the local model on ID (held out) and OOD (fitted), and its cost."""
    from calypso.embeddings import CachedEmbedder, MemoryVectorCache

    embedder = open_bench_embedder(cache or DEFAULT_CACHE)
    root = data_dir()
    id_rows = load_attributionbench(ID_FILE, root)
    ood_rows = load_attributionbench(OOD_FILE, root)
    t_sup = sup.SUPPORT_THRESHOLD
    out: dict = {}
    print(f"\nWith the embedding model {embedder.name} (semantic feature {', '.join(sup.semantic.FEATURE_NAMES)}):\n")
    print("| set | scorer | n | threshold | macro-F1 | balanced acc | note |")
    print("|---|---|---:|---:|---:|---:|---|")
    for set_name, rows_, note in (
        ("AttributionBench ID", id_rows, "held out"),
        ("AttributionBench OOD", ood_rows, "in-sample"),
    ):
        y = [e.label for e in rows_]
        for scorer_name, fn in (
            ("lexical", sup.support_score),
            ("+ semantic", lambda c, e: sup.support_score(c, e, embedder=embedder)),
        ):
            scores, _ = score_all(rows_, fn)
            print(row(f"{set_name} | {scorer_name}", y, scores, t_sup, note))
            out[(set_name, scorer_name)] = macro_f1(y, [s >= t_sup for s in scores])
            if set_name.endswith("ID"):
                _, oracle = best_threshold(y, scores)
                print(
                    row(
                        f"{set_name} | {scorer_name}, oracle cut",
                        y,
                        scores,
                        best_threshold(y, scores)[0],
                        "tuned ON ID: info only",
                    )
                )
                for group in sorted({e.group for e in rows_}):
                    ix = [i for i, e in enumerate(rows_) if e.group == group]
                    print(row(f"ID {group} | {scorer_name}", [y[i] for i in ix], [scores[i] for i in ix], t_sup))

    # Cost on fresh in-memory caches: `timed` rows of each file, the model loaded and warmed first.
    model = embedder.inner
    model.embed(["warm up the model"])
    print("\nCost per segment with the semantic feature (local model, in process):\n")
    print("| evidence | n | mean sentences | cold mean / p99 ms | sentences cached mean / p99 ms | lexical mean ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rows_ in (("AttributionBench ID", id_rows), ("AttributionBench OOD", ood_rows)):
        sample = [e for e in rows_ if e.claim and e.evidence.strip()][:: max(1, len(rows_) // timed)][:timed]
        cold_embedder = CachedEmbedder(model, MemoryVectorCache())
        cold = score_all(sample, lambda c, e, m=cold_embedder: sup.support_score(c, e, embedder=m))[1]
        warm_cache = MemoryVectorCache()
        warm_embedder = CachedEmbedder(model, warm_cache)
        sentences = [e.evidence[a:b] for e in sample for a, b in sup.split_sentences(e.evidence)]
        warm_embedder.embed(sentences)  # what a sentence-vector store would hold; the segments are not in it
        warm = score_all(sample, lambda c, e, m=warm_embedder: sup.support_score(c, e, embedder=m))[1]
        lexical = score_all(sample, sup.support_score)[1]
        n_sent = len(sentences) / len(sample)
        print(
            f"| {name} | {len(sample)} | {n_sent:.1f} | {sum(cold) / len(cold):.1f} / {percentile(cold, 99):.1f} "
            f"| {sum(warm) / len(warm):.1f} / {percentile(warm, 99):.1f} | {sum(lexical) / len(lexical):.2f} |"
        )
        out[name + " ms"] = (sum(cold) / len(cold), sum(warm) / len(warm))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of OOD, half of WiCE (ID always whole)")
    parser.add_argument("--semantic", action="store_true", help="also the scorer with the local embedding model")
    parser.add_argument("--semantic-only", action="store_true", help="only the --semantic tables")
    args = parser.parse_args(argv)
    if not args.semantic_only:
        evaluate(quick=args.quick)
    if args.semantic or args.semantic_only:
        evaluate_semantic()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
