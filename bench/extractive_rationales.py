"""Which sentence the extractive answerer quotes, against SciFact's gold rationale sentences (issue 12).

Each SciFact claim with rationale annotations is "asked" of its gold abstract(s), each abstract one
passage (its sentences joined by spaces), and ``pick_sentences`` chooses as the extractive answerer
does. A picked sentence hits when it overlaps a gold rationale sentence of its abstract. Reported:

* top1: the first (best) picked sentence is a rationale sentence;
* any: some picked sentence is;
* precision: the share of picked sentences that are rationale sentences (padding lowers it);
* none: nothing picked (no sentence shares a content word with the claim, and no semantic pick);
* sentences per answer.

Claims are split as BEIR splits them: the claims of ``qrels/train.tsv`` tune the semantic weights
(``--grid``), those of ``qrels/test.tsv`` report. The embedding model embeds each claim and its
sentences once per run (a content-hash cache in memory), so a grid costs one embedding pass.

    .venv/bin/python -m bench.extractive_rationales [--split train|test] [--grid]
        [--weight W] [--floor F] [--only-min M]
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bench.common.paths import data_dir
from calypso.embeddings import CachedEmbedder, MemoryVectorCache
from calypso.embeddings.local_onnx import LocalOnnxEmbedder
from calypso.generation import sentence_pick
from calypso.generation.sentence_pick import SentenceSimilarity, pick_sentences
from calypso.generation.similarity import EmbeddingSimilarity
from calypso.models import Chunk, Document, Passage


@dataclass
class Claim:
    text: str
    passages: list[Passage]
    gold: list[list[tuple[int, int]]]  # per passage, the spans of its rationale sentences


def load(split: str) -> list[Claim]:
    root = data_dir() / "beir-scifact"
    ids = {line.split("\t")[0] for line in (root / "qrels" / f"{split}.tsv").read_text().splitlines()[1:] if line}
    with gzip.open(root / "corpus_sentences.jsonl.gz", "rt", encoding="utf-8") as f:
        corpus = {row["_id"]: row["sentences"] for row in map(json.loads, f)}
    claims = []
    for line in (root / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["_id"] not in ids or not row["metadata"]:
            continue
        passages, gold = [], []
        for doc_id, evidence in row["metadata"].items():
            sentences = [s.strip() for s in corpus[doc_id]]
            spans, offset = [], 0
            for sentence in sentences:
                spans.append((offset, offset + len(sentence)))
                offset += len(sentence) + 1
            text = " ".join(sentences)
            document = Document(doc_id, doc_id, "default", "scifact", f"{doc_id}.txt", "text/plain", 0, "", 0, 1, 1)
            passages.append(Passage(document, Chunk(0, text, 0, len(text), 1, 1, ("1",)), 1.0))
            wanted = {i for e in evidence for i in e["sentences"]}
            gold.append([spans[i] for i in sorted(wanted)])
        claims.append(Claim(row["text"], passages, gold))
    return claims


class Recorded:
    """One embedding pass per (claim, sentences), then replayed for every grid point."""

    def __init__(self, inner: SentenceSimilarity) -> None:
        self.inner = inner
        self.seen: dict[tuple[str, tuple[str, ...]], object] = {}
        self.seconds = 0.0

    def __call__(self, question: str, sentences: Sequence[str]) -> object:
        key = (question, tuple(sentences))
        if key not in self.seen:
            t0 = time.perf_counter()
            self.seen[key] = self.inner(question, sentences)
            self.seconds += time.perf_counter() - t0
        return self.seen[key]


def evaluate(claims: list[Claim], similarity: SentenceSimilarity | None, **options: float) -> dict[str, float]:
    top1 = anyhit = none = sentences = good = 0
    for claim in claims:
        picked = pick_sentences(claim.text, claim.passages, similarity=similarity, **options)  # type: ignore[arg-type]
        sentences += len(picked)
        if not picked:
            none += 1
            continue
        hits = [any(c.start < b and a < c.end for a, b in claim.gold[c.number - 1]) for c in picked]
        top1 += hits[0]
        anyhit += any(hits)
        good += sum(hits)
    n = len(claims)
    return {
        "top1": top1 / n,
        "any": anyhit / n,
        "precision": good / max(1, sentences),
        "none": none / n,
        "sentences": sentences / n,
    }


def line(name: str, r: dict[str, float]) -> str:
    return f"{name:<40} {r['top1']:6.1%} {r['any']:6.1%} {r['precision']:6.1%} {r['none']:6.1%} {r['sentences']:6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("train", "test"), default="test")
    parser.add_argument(
        "--grid", action="store_true", help="try weight x floor x semantic-only minimum (tune on train)"
    )
    parser.add_argument("--weight", type=float, default=sentence_pick.SEMANTIC_WEIGHT)
    parser.add_argument("--only-min", type=float, default=sentence_pick.SEMANTIC_ONLY_MIN)
    parser.add_argument("--floor", type=float, default=sentence_pick.SEMANTIC_FLOOR)
    args = parser.parse_args()
    claims = load(args.split)
    model = Recorded(EmbeddingSimilarity(CachedEmbedder(LocalOnnxEmbedder(), MemoryVectorCache())))
    print(
        f"{len(claims)} claims ({args.split}); {'setting':<25} {'top1':>6} {'any':>6} {'prec.':>6} {'none':>6} {'sent.':>6}"
    )
    print(line("lexical only", evaluate(claims, None)))
    if args.grid:
        for floor in (0.6, 0.65, 0.7, 0.75):
            for weight in (0.15, 0.25, 0.35, 0.5, 0.7, 1.0):
                for only_min in (0.4, 0.5, 2.0):
                    name = f"floor={floor} w={weight} only>={only_min if only_min <= 1 else 'never'}"
                    options = {"semantic_weight": weight, "semantic_only_min": only_min, "semantic_floor": floor}
                    print(line(name, evaluate(claims, model, **options)))
    else:
        options = {"semantic_weight": args.weight, "semantic_only_min": args.only_min, "semantic_floor": args.floor}
        name = f"floor={args.floor} w={args.weight} only>={args.only_min}"
        print(line(name, evaluate(claims, model, **options)))
    print(f"(embedding {sum(1 for v in model.seen.values() if v is not None)} answers: {model.seconds:.1f}s)")


if __name__ == "__main__":
    main()
