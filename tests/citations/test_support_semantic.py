"""The support scorer's semantic feature with the real local model, on real AttributionBench rows."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_support import _data

from calypso.citations import semantic, support
from calypso.citations.support import SUPPORT_THRESHOLD, best_evidence, split_sentences, support_score
from calypso.embeddings import CachedEmbedder, MemoryVectorCache, local_onnx


def _rows(n: int, max_chars: int = 700) -> list[dict]:
    """The first ``n // 2`` attributable and ``n // 2`` not attributable OOD rows with short evidence."""
    out: dict[bool, list[dict]] = {True: [], False: []}
    with open(_data("attributionbench", "test_ood_all_subset_balanced.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            evidence = "\n\n".join(r["references"] or [])
            label = r["attribution_label"] == "attributable"
            if r["claim"] and evidence.strip() and len(evidence) <= max_chars and len(out[label]) < n // 2:
                out[label].append({"claim": r["claim"], "evidence": evidence, "label": label})
    return [r for pair in zip(out[True], out[False]) for r in pair]


def test_fitted_model_only() -> None:
    assert semantic.MODEL == local_onnx.MODEL_NAME
    assert support.SEMANTIC_FEATURE_NAMES == support.FEATURE_NAMES + semantic.FEATURE_NAMES
    assert len(support.SEMANTIC_WEIGHTS) == len(support.SEMANTIC_FEATURE_NAMES)
    assert not semantic.usable(None)
    # Another truncation is another vector space (another name): the lexical weights apply.
    assert not semantic.usable(local_onnx.LocalOnnxEmbedder(max_tokens=64))


def test_semantic_feature_on_real_rows(minilm: local_onnx.LocalOnnxEmbedder) -> None:
    rows = _rows(12)
    cache = MemoryVectorCache()
    embedder = CachedEmbedder(minilm, cache)
    own, other = [], []
    for i, r in enumerate(rows):
        f = support.features(r["claim"], r["evidence"], embedder=embedder)
        assert -1.0 <= f["cos_cent"] <= 1.0
        own.append(f["cos_cent"])
        shuffled = rows[(i + 5) % len(rows)]["evidence"]  # another row's evidence: another topic
        other.append(support.features(r["claim"], shuffled, embedder=embedder)["cos_cent"])
        # The score moves with the feature, stays in [0, 1], and the span is still chosen lexically.
        lexical = best_evidence(r["claim"], r["evidence"])
        with_model = best_evidence(r["claim"], r["evidence"], embedder=embedder)
        assert (with_model.start, with_model.end) == (lexical.start, lexical.end)
        assert 0.0 <= with_model.score <= 1.0 and with_model.score != lexical.score
        assert with_model.score == support_score(r["claim"], r["evidence"], embedder=embedder)
    # A claim is closer in meaning to the passage it cites than to an unrelated one.
    assert sum(a > b for a, b in zip(own, other)) >= 10
    assert float(np.mean(own)) > float(np.mean(other)) + 0.2
    # Passage sentences went through the cache: scoring again embeds nothing new.
    size = len(cache)
    assert size >= len(rows) + sum(len(split_sentences(r["evidence"])) for r in rows[:1])
    support_score(rows[0]["claim"], rows[0]["evidence"], embedder=embedder)
    assert len(cache) == size


def test_semantic_scores_separate_the_classes(minilm: local_onnx.LocalOnnxEmbedder) -> None:
    # Real rows of the file the weights were fitted on: the semantic scorer's decisions at the
    # shared SUPPORT_THRESHOLD must be mostly right (the bias was shifted to put its cut there).
    rows = _rows(24)
    embedder = CachedEmbedder(minilm, MemoryVectorCache())
    scores = [support_score(r["claim"], r["evidence"], embedder=embedder) for r in rows]
    right = sum((s >= SUPPORT_THRESHOLD) == r["label"] for s, r in zip(scores, rows))
    assert len(rows) == 24 and sum(r["label"] for r in rows) == 12
    assert right >= 0.7 * len(rows)


def test_without_a_model_the_lexical_scorer_is_unchanged() -> None:
    rows = _rows(30, max_chars=3000)
    for r in rows:
        a = support.Analysis(r["claim"], r["evidence"], support.SCORE_WINDOW)
        assert a.semantic is None
        z = support.BIAS + sum(w * a.features[n] for w, n in zip(support.WEIGHTS, support.FEATURE_NAMES))
        expected = 1 / (1 + np.exp(-z)) if a.spans and a.features["clen"] else 0.0
        if a.substituted:  # a number the evidence lacks halves the score (issue 39)
            expected *= support.SUBSTITUTION_FACTOR
        assert support_score(r["claim"], r["evidence"]) == pytest.approx(expected, abs=1e-12)
        assert support_score(r["claim"], r["evidence"], embedder=None) == support_score(r["claim"], r["evidence"])
        assert best_evidence(r["claim"], r["evidence"], embedder=None) == best_evidence(r["claim"], r["evidence"])
