"""Does a passage in another language support an answer's sentence? (issue 43, item 3)

XQuAD's English and German paragraphs are translations of each other (``../shared/data/multilingual``:
``xquad-xling-zh-en``'s English corpus and ``xquad-xling-en-de``'s German one share their paragraph numbers).
Each sentence of a paragraph is a claim; its translation's paragraph supports it, and the next paragraph of the
same article (same topic, other facts) does not. Both directions: English sentences against German paragraphs
and German sentences against English ones.

Scored three ways:
- ``lexical``: the support scorer as it reads a pair in one language (``support_score`` without a model);
- ``cross-language``: what the scorer does now when the two languages differ (``support_score`` with the
  multilingual model: the sentence's best cosine to a passage sentence, on MiniLM's scale);
- the raw best cosine, for the cut: fitted on the even articles (balanced accuracy), reported on the odd.

    .venv/bin/python -m bench.crosslingual_support [--per-article 40]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.common.beir import data_root
from calypso.citations.support import SUPPORT_THRESHOLD, split_sentences, support_score

CHINESE_CLAIMS = Path(__file__).with_name("data") / "crosslingual" / "en_claims_zh_passages.jsonl"


def _paragraphs(name: str) -> dict[str, str]:
    rows = (json.loads(line) for line in (data_root() / "multilingual" / name / "corpus.jsonl").open(encoding="utf-8"))
    return {row["_id"].split(":", 1)[1]: row["text"] for row in rows}


def _pairs(per_article: int) -> list[tuple[str, str, bool, int]]:
    """(claim, passage, supported, article number)."""
    english, german = _paragraphs("xquad-xling-zh-en"), _paragraphs("xquad-xling-en-de")
    by_article: dict[int, list[str]] = defaultdict(list)
    for pid in sorted(set(english) & set(german)):
        by_article[int(pid.split(":")[0])].append(pid)
    pairs: list[tuple[str, str, bool, int]] = []
    for article, pids in sorted(by_article.items()):
        made = 0
        for n, pid in enumerate(pids):
            other = pids[(n + 1) % len(pids)]
            if other == pid:
                continue
            for claims, passages in ((english, german), (german, english)):
                text = claims[pid]
                for start, end in split_sentences(text):
                    sentence = text[start:end].strip()
                    if len(sentence) < 40 or made >= per_article:
                        continue
                    pairs.append((sentence, passages[pid], True, article))
                    pairs.append((sentence, passages[other], False, article))
                    made += 1
    return pairs


def _chinese_pairs() -> list[tuple[str, str, bool, int]]:
    """English claims written for 12 CMRC 2018 paragraphs (``data/crosslingual/en_claims_zh_passages.jsonl``):
    two each that the paragraph says, two it does not (other facts on its topic)."""
    rows = (json.loads(line) for line in (data_root() / "multilingual" / "cmrc2018-zh" / "corpus.jsonl").open())
    corpus = {row["_id"]: row["text"] for row in rows}
    claims = [json.loads(line) for line in CHINESE_CLAIMS.read_text(encoding="utf-8").splitlines() if line.strip()]
    order = list(dict.fromkeys(c["paragraph"] for c in claims))
    return [(c["claim"], corpus[c["paragraph"]], bool(c["supported"]), order.index(c["paragraph"])) for c in claims]


def _balanced(scores: np.ndarray, truth: np.ndarray, cut: float) -> float:
    said = scores >= cut
    return float(((said & truth).sum() / truth.sum() + (~said & ~truth).sum() / (~truth).sum()) / 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-article", type=int, default=40, help="claims per article and direction at most")
    args = parser.parse_args()

    from calypso.embeddings.multilingual_e5 import MultilingualE5Embedder

    model = MultilingualE5Embedder()
    for title, pairs in (
        ("English and German, XQuAD's translations", _pairs(args.per_article)),
        ("English claims, Chinese paragraphs (CMRC 2018, claims written for this)", _chinese_pairs()),
    ):
        _report(model, title, pairs)


def _report(model: object, title: str, pairs: list[tuple[str, str, bool, int]]) -> None:
    truth = np.array([supported for _, _, supported, _ in pairs])
    fit = np.array([article % 2 == 0 for *_, article in pairs])
    texts = sorted({t for claim, passage, _, _ in pairs for t in (claim, *_sentences(passage))})
    embedded = np.asarray(model.embed(texts), dtype=np.float32)  # type: ignore[attr-defined]
    vectors = dict(zip(texts, embedded, strict=True))
    best = np.array(
        [max(float(vectors[claim] @ vectors[s]) for s in _sentences(passage)) for claim, passage, _, _ in pairs]
    )
    lexical = np.array([support_score(claim, passage) for claim, passage, _, _ in pairs])
    across = np.array([support_score(claim, passage, across=model) for claim, passage, _, _ in pairs])  # type: ignore[arg-type]
    cuts = np.quantile(best[fit], np.linspace(0.05, 0.95, 181))
    cut = max(cuts, key=lambda c: _balanced(best[fit], truth[fit], c))
    held = ~fit
    print(
        f"\n{title}: {len(pairs)} pairs ({int(truth.sum())} supported), {int(held.sum())} in the odd (held-out) groups"
    )
    print(
        f"best cosine, supported: median {np.median(best[truth]):.4f} (min {best[truth].min():.4f}); "
        f"unsupported: median {np.median(best[~truth]):.4f} (max {best[~truth].max():.4f})"
    )
    print("| scorer | cut | balanced accuracy, held out | supported said supported | unsupported said not |")
    print("|---|---|---|---|---|")
    for name, scores, at in (
        ("lexical (one language's scorer)", lexical, SUPPORT_THRESHOLD),
        ("across languages (the scorer now)", across, SUPPORT_THRESHOLD),
        ("raw best cosine, cut fitted on the even groups", best, float(cut)),
    ):
        s, t = scores[held], truth[held]
        print(
            f"| {name} | {at:.4f} | {_balanced(s, t, at):.3f} | {(s[t] >= at).mean():.3f} | {(s[~t] < at).mean():.3f} |"
        )


def _sentences(passage: str) -> list[str]:
    return [passage[s:e] for s, e in split_sentences(passage)]


if __name__ == "__main__":
    main()
