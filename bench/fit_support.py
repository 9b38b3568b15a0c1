"""Fit the logistic regression of calypso.citations.support; prints constants to paste there.

    .venv/bin/python -m bench.fit_support            # the shipped fit: OOD file only
    .venv/bin/python -m bench.fit_support --with-wice  # an alternative that was measured
    .venv/bin/python -m bench.fit_support --semantic   # the weights used with the local embedding model
    .venv/bin/python -m bench.fit_support --semantic --cv --features rec_win,...,cos_max  # compare candidates

Training data: AttributionBench ``test_ood_all_subset_balanced.jsonl`` (rows with a
non-empty ``references``), label attributable = 1. Features are standardised, the model
is an L2-regularised logistic regression fitted by Newton's method (numpy, deterministic),
and the weights are printed back in raw feature units. SUPPORT_THRESHOLD is the
macro-F1-best cut of the fitted scorer on the whole OOD file (empty-evidence rows score 0).
The ID file and WiCE are never read here (except with --with-wice, which adds WiCE's
supported / not_supported rows to the training set; not shipped).

``--semantic`` adds calypso.citations.semantic's feature, computed with the local model
(``minilm-l6-v2-int8``) through a content-hash cache (``--cache``, default in the temp
directory: the first run embeds ~23,000 sentences, minutes on 2 cores; later runs read them).
The printed bias is shifted so that the semantic model's own macro-F1-best OOD cut sits at
SUPPORT_THRESHOLD. ``--cv`` prints the 5-fold cross-validated OOD macro-F1 of the feature set
(each fold's threshold chosen on its training part): how the semantic feature was chosen.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import attribution as aq
from bench.common.attribution import DEFAULT_CACHE, open_bench_embedder
from calypso.citations import support as sup


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iterations: int = 100) -> tuple[np.ndarray, float]:
    """Newton's method on standardised features; returns raw-unit weights and bias."""
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    reg = l2 * np.r_[np.ones(z.shape[1] - 1), 0.0]
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + reg * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(reg)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-12:
            break
    raw = w[:-1] / sd
    bias = w[-1] - float((mu * w[:-1] / sd).sum())
    return raw, bias


def feature_matrix(examples: list[aq.Example], names: tuple[str, ...], embedder: Any = None) -> np.ndarray:
    rows = []
    for ex in examples:
        f = sup.features(ex.claim, ex.evidence, embedder=embedder) | aq.candidate_features(ex.claim, ex.evidence)
        rows.append([f.get(n, 0.0) for n in names])  # no semantic value (no content words): 0, never scored
    return np.array(rows, dtype=float)


def cross_validated_f1(x: np.ndarray, y: np.ndarray, l2: float, folds: int = 5) -> float:
    """Mean held-out macro-F1 over ``folds`` seeded folds; each fold's cut is chosen on its training part."""
    order = np.random.default_rng(0).permutation(len(y))
    f1s = []
    for k in range(folds):
        test = order[k::folds]
        train = np.setdiff1d(order, test)
        w, b = fit_logistic(x[train], y[train], l2)
        cut, _ = aq.best_threshold(list(y[train].astype(int)), list(1 / (1 + np.exp(-(x[train] @ w + b)))))
        f1s.append(aq.macro_f1(list(y[test].astype(int)), list(1 / (1 + np.exp(-(x[test] @ w + b))) >= cut)))
    return float(np.mean(f1s))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--with-wice", action="store_true", help="also train on WiCE supported/not_supported")
    parser.add_argument("--features", default=None, help="comma-separated subset")
    parser.add_argument("--semantic", action="store_true", help="with the local embedding model's feature")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="embedding cache file (--semantic)")
    parser.add_argument("--cv", action="store_true", help="also print the OOD 5-fold CV macro-F1")
    args = parser.parse_args(argv)
    default = sup.SEMANTIC_FEATURE_NAMES if args.semantic else sup.FEATURE_NAMES
    names = tuple(args.features.split(",")) if args.features else default
    embedder = open_bench_embedder(args.cache) if args.semantic else None

    ood = aq.load_attributionbench(aq.OOD_FILE)
    train = [e for e in ood if e.evidence.strip()]
    if args.with_wice:
        train += [e for e in aq.load_wice() if e.group != "partially_supported"]
    x = feature_matrix(train, names, embedder)
    y = np.array([e.label for e in train], dtype=float)
    weights, bias = fit_logistic(x, y, args.l2)
    if args.cv:
        print(f"# OOD 5-fold CV macro-F1 {100 * cross_validated_f1(x, y, args.l2):.2f} with {','.join(names)}")

    # Threshold: macro-F1-best on the whole OOD file, scored exactly as support_score does.
    wtuple = tuple(float(round(v, 6)) for v in weights)
    bias = float(round(bias, 6))
    scores = []
    for e in ood:
        if not e.evidence.strip() or not e.claim:
            scores.append(0.0)
            continue
        analysis = sup.Analysis(e.claim, e.evidence, sup.SCORE_WINDOW, embedder=embedder)
        features = analysis.features | aq.candidate_features(e.claim, e.evidence)
        z = bias + sum(w * features.get(n, 0.0) for w, n in zip(wtuple, names))
        scores.append(0.0 if not analysis.spans or not analysis.features["clen"] else float(1 / (1 + np.exp(-z))))
    threshold, f1 = aq.best_threshold([e.label for e in ood], scores)
    threshold = float(np.floor(threshold * 1000) / 1000)  # round down: the cut stays below the best score
    if args.semantic:  # shift the bias so that this model's cut falls at the lexical SUPPORT_THRESHOLD
        logit = lambda p: math.log(p / (1 - p))  # noqa: E731
        bias = float(round(bias - logit(threshold) + logit(sup.SUPPORT_THRESHOLD), 6))
        print(f"# semantic model's own cut {threshold:.3f}, moved to SUPPORT_THRESHOLD by the bias")
        threshold = sup.SUPPORT_THRESHOLD

    print(
        f"# fitted on {len(train)} rows ({'OOD + WiCE' if args.with_wice else 'AttributionBench OOD'}), "
        f"l2={args.l2}; OOD macro-F1 at the threshold {100 * f1:.1f}"
    )
    names_var, weights_var, bias_var = (
        ("SEMANTIC_FEATURE_NAMES", "SEMANTIC_WEIGHTS", "SEMANTIC_BIAS")
        if args.semantic
        else ("FEATURE_NAMES", "WEIGHTS", "BIAS")
    )
    print(f"{names_var}: tuple[str, ...] = (")
    for n in names:
        print(f'    "{n}",')
    print(")")
    print(f"{weights_var}: tuple[float, ...] = (")
    for n, w in zip(names, wtuple):
        print(f"    {w!r},  # {n}")
    print(")")
    print(f"{bias_var}: float = {bias!r}")
    print(f"SUPPORT_THRESHOLD: float = {threshold!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
