"""Putting the multilingual model's cosines on the scale the answerer's cuts were tuned on (issue 43).

The extractive answerer's sentence cuts (``sentence_pick.SEMANTIC_ONLY_MIN``, ``answerability.MEANING_MIN``)
and the support scorer's semantic weights (``citations/semantic.py``) were fitted to all-MiniLM-L6-v2's
cosines. multilingual-e5-small places every pair of texts closer (its cosines bunch between 0.7 and 0.9), so
the same number means something else. This fits a monotone map from e5's cosine to MiniLM's by matching their
quantiles over the same (claim, sentence) pairs, as the answerer embeds them (both as passages): SciFact train
claims against every sentence of their cited abstracts and of two other abstracts each. The map is fitted on
half the claims and checked on the other half: how often the mapped e5 cosine and MiniLM's fall on the same side
of each cut, and the rank agreement (Spearman) of the two, raw and mapped (mapping cannot change ranks).

    .venv/bin/python -m bench.cosine_calibration [--claims 300]

It prints the knots to paste into ``calypso/embeddings/calibration.py``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random

import numpy as np

from bench.common import beir as be
from calypso.text.sentences import sentence_spans

CUTS = (0.3, 0.4, 0.5, 0.55, 0.6)


def _pairs(claims: int, seed: int) -> list[tuple[str, str, int]]:
    """(claim, sentence, claim number) for cited and other abstracts' sentences."""
    root = be.scifact_dir()
    sentences: dict[str, list[str]] = {}
    with gzip.open(root / "corpus_sentences.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            sentences[row["_id"]] = row["sentences"]
    queries = be.load_queries(root)
    cited: dict[str, list[str]] = {}
    for line in (root / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        cited.setdefault(qid, []).append(doc)
    rng = random.Random(seed)
    ids = sorted(q for q in cited if q in queries)
    rng.shuffle(ids)
    every_doc = sorted(sentences)
    out: list[tuple[str, str, int]] = []
    for n, qid in enumerate(ids[:claims]):
        docs = [d for d in cited[qid] if d in sentences] + rng.sample(every_doc, 2)
        out.extend((queries[qid], s, n) for d in docs for s in sentences[d])
    return out


def _xquad(name: str, file: str) -> dict[str, str]:
    rows = (json.loads(line) for line in (be.data_root() / "multilingual" / name / file).open(encoding="utf-8"))
    return {row["_id"]: row["text"] for row in rows}


def _across_pairs(limit: int) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """(e5's pairs, MiniLM's pairs) over the same questions and paragraphs: e5 reads a question in one language
    against sentences in the other (Chinese questions, English sentences; English questions, German sentences),
    MiniLM the English question against the English sentences of the same paragraphs."""
    english_q, chinese_q = _xquad("xquad-xling-en-de", "queries.jsonl"), _xquad("xquad-xling-zh-en", "queries.jsonl")
    english_p, german_p = _xquad("xquad-xling-zh-en", "corpus.jsonl"), _xquad("xquad-xling-en-de", "corpus.jsonl")
    gold = {}
    for line in (be.data_root() / "multilingual" / "xquad-xling-zh-en" / "answers.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        gold[row["query_id"]] = row["context_id"].split(":", 1)[1]
    ids = sorted(q for q in gold if q in english_q and q in chinese_q)[:limit]
    paragraphs = sorted(gold[q] for q in ids)
    across: list[tuple[str, str, int]] = []
    reference: list[tuple[str, str, int]] = []
    for n, qid in enumerate(ids):
        for pid in {gold[qid], paragraphs[(paragraphs.index(gold[qid]) + 7) % len(paragraphs)]}:
            en, de = english_p["xquad-en:" + pid], german_p["xquad-de:" + pid]
            en_sentences = [en[a:b] for a, b in sentence_spans(en)]
            de_sentences = [de[a:b] for a, b in sentence_spans(de)]
            reference += [(english_q[qid], sentence, n) for sentence in en_sentences]
            across += [(chinese_q[qid], sentence, n) for sentence in en_sentences]
            across += [(english_q[qid], sentence, n) for sentence in de_sentences]
    return across, reference


def _knots(values: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Denser at the top, where the cuts fall (MiniLM's 0.5 is its 86th percentile on SciFact).
    qs = np.concatenate([np.linspace(0.0, 0.8, 9), np.linspace(0.82, 0.98, 9), [0.99, 0.995, 1.0]])
    own, ref = np.quantile(values, qs), np.clip(np.quantile(reference, qs), 0.0, 1.0)
    own[0], own[-1] = min(own[0], 0.0), max(own[-1], 1.0)  # the ends pinned: every cosine maps into [0, 1]
    ref[0], ref[-1] = min(ref[0], 0.0), max(ref[-1], 1.0)
    return own, ref


def _cosines(model: object, pairs: list[tuple[str, str, int]]) -> np.ndarray:
    texts = sorted({t for claim, sentence, _ in pairs for t in (claim, sentence)})
    vectors = np.asarray(model.embed(texts), dtype=np.float32)  # type: ignore[attr-defined]
    row = {t: i for i, t in enumerate(texts)}
    return np.array([float(vectors[row[c]] @ vectors[row[s]]) for c, s, _ in pairs])


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--questions", type=int, default=300, help="XQuAD questions for the map across languages")
    args = parser.parse_args()

    from calypso.embeddings.local_onnx import LocalOnnxEmbedder
    from calypso.embeddings.multilingual_e5 import MultilingualE5Embedder

    pairs = _pairs(args.claims, args.seed)
    reference = _cosines(LocalOnnxEmbedder(), pairs)
    e5 = _cosines(MultilingualE5Embedder(), pairs)
    fit = np.array([n % 2 == 0 for _, _, n in pairs])
    e5_knots, ref_knots = _knots(e5[fit], reference[fit])
    mapped = np.interp(e5, e5_knots, ref_knots)
    held = ~fit
    print(f"pairs: {len(pairs)} ({int(fit.sum())} fitting, {int(held.sum())} held out) over {args.claims} claims")
    print(f"Spearman e5 vs MiniLM on the held-out half: {_spearman(e5[held], reference[held]):.3f}")
    print("cut | MiniLM above | e5 raw above | e5 mapped above | same side, raw | same side, mapped")
    for cut in CUTS:
        ref_above = reference[held] >= cut
        raw_above, map_above = e5[held] >= cut, mapped[held] >= cut
        print(
            f"{cut:.2f} | {ref_above.mean():.3f} | {raw_above.mean():.3f} | {map_above.mean():.3f} | "
            f"{(raw_above == ref_above).mean():.3f} | {(map_above == ref_above).mean():.3f}"
        )
    across_pairs, reference_pairs = _across_pairs(args.questions)
    across = _cosines(MultilingualE5Embedder(), across_pairs)
    across_reference = _cosines(LocalOnnxEmbedder(), reference_pairs)
    # Chinese questions x English sentences and English questions x German sentences sit apart (the same meaning
    # lower between scripts): a map for each, fitted against MiniLM reading the same English pairs.
    chinese = np.array([any("\u4e00" <= ch <= "\u9fff" for ch in q) for q, _, _ in across_pairs])
    for name, rows in (("CJK", chinese), ("SAME_FAMILY", ~chinese)):
        knots, ref = _knots(across[rows], across_reference)
        print(
            f"\nacross languages, {name}: {int(rows.sum())} e5 pairs against {len(reference_pairs)} MiniLM pairs "
            f"(English x English) over {args.questions} questions; e5 median {np.median(across[rows]):.4f} against "
            f"{np.median(e5):.4f} within English"
        )
        for cut in CUTS:
            print(
                f"{cut:.2f}: MiniLM above {(across_reference >= cut).mean():.3f}, e5 by the one-language map "
                f"{(np.interp(across[rows], e5_knots, ref_knots) >= cut).mean():.3f}, by its own "
                f"{(np.interp(across[rows], knots, ref) >= cut).mean():.3f}"
            )
        print(f"ACROSS_{name}_E5 = (" + ", ".join(f"{v:.4f}" for v in knots) + ")")
        print(f"ACROSS_{name}_REFERENCE = (" + ", ".join(f"{v:.4f}" for v in ref) + ")")
    print("knots (e5 cosine -> MiniLM-scale cosine):")
    print("E5_COSINES = (" + ", ".join(f"{v:.4f}" for v in e5_knots) + ")")
    print("REFERENCE_COSINES = (" + ", ".join(f"{v:.4f}" for v in ref_knots) + ")")


if __name__ == "__main__":
    main()
