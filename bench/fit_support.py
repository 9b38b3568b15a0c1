"""Fit the logistic regression of calypso.citations.support; prints constants to paste there.

    .venv/bin/python bench/fit_support.py            # the shipped fit: OOD file only
    .venv/bin/python bench/fit_support.py --with-wice  # an alternative that was measured

Training data: AttributionBench ``test_ood_all_subset_balanced.jsonl`` (rows with a
non-empty ``references``), label attributable = 1. Features are standardised, the model
is an L2-regularised logistic regression fitted by Newton's method (numpy, deterministic),
and the weights are printed back in raw feature units. SUPPORT_THRESHOLD is the
macro-F1-best cut of the fitted scorer on the whole OOD file (empty-evidence rows score 0).
The ID file and WiCE are never read here (except with --with-wice, which adds WiCE's
supported / not_supported rows to the training set; not shipped).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attribution_quality as aq

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


def feature_matrix(examples: list[aq.Example], names: tuple[str, ...]) -> np.ndarray:
    rows = []
    for ex in examples:
        f = sup._features(ex.claim, ex.evidence, extras=True)
        rows.append([f[n] for n in names])
    return np.array(rows, dtype=float)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--with-wice", action="store_true", help="also train on WiCE supported/not_supported")
    parser.add_argument("--features", default=",".join(sup.FEATURE_NAMES), help="comma-separated subset")
    args = parser.parse_args(argv)
    names = tuple(args.features.split(","))

    ood = aq.load_attributionbench(aq.OOD_FILE)
    train = [e for e in ood if e.evidence.strip()]
    if args.with_wice:
        train += [e for e in aq.load_wice() if e.group != "partially_supported"]
    x = feature_matrix(train, names)
    y = np.array([e.label for e in train], dtype=float)
    weights, bias = fit_logistic(x, y, args.l2)

    # Threshold: macro-F1-best on the whole OOD file, scored exactly as support_score does.
    wtuple = tuple(float(round(v, 6)) for v in weights)
    bias = float(round(bias, 6))
    scores = []
    for e in ood:
        if not e.evidence.strip() or not e.claim:
            scores.append(0.0)
            continue
        analysis = sup._Analysis(e.claim, e.evidence, sup._SCORE_WINDOW, extras=True)
        z = bias + sum(w * analysis.features[n] for w, n in zip(wtuple, names))
        scores.append(0.0 if not analysis.spans or not analysis.features["clen"] else float(1 / (1 + np.exp(-z))))
    threshold, f1 = aq.best_threshold([e.label for e in ood], scores)
    threshold = float(np.floor(threshold * 1000) / 1000)  # round down: the cut stays below the best score

    print(
        f"# fitted on {len(train)} rows ({'OOD + WiCE' if args.with_wice else 'AttributionBench OOD'}), "
        f"l2={args.l2}; OOD macro-F1 at the threshold {100 * f1:.1f}"
    )
    print("FEATURE_NAMES: tuple[str, ...] = (")
    for n in names:
        print(f'    "{n}",')
    print(")")
    print("_WEIGHTS: tuple[float, ...] = (")
    for n, w in zip(names, wtuple):
        print(f"    {w!r},  # {n}")
    print(")")
    print(f"_BIAS: float = {bias!r}")
    print(f"SUPPORT_THRESHOLD: float = {threshold!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
