"""Fusing a keyword run and an embedding run into one ranking with scores in [0, 1].

``fuse`` is the default: a convex combination of min-max-normalised scores. In each
run the best score maps to 1 and the last returned (the run's depth) to 0; a passage
absent from a run gets 0 there; the weighted sum is divided by the weights' total.
Chosen on SciFact train over reciprocal rank fusion (docs/benchmarks/retrieval.md, "Embedding
models (issue 12)"): test nDCG@10 0.7238 against RRF's best 0.7156, BM25 0.6789 and
dense 0.6468. Both runs should be cut at the same depth (100 in that measurement):
the depth sets what 0 means. With the server's default weights a third component may join them: the
exact-match signal of a query's rare identifiers (``retrieval.exact_match``), already in [0, 1], with the
weight it earns for that query; ``default_weights`` tells when the defaults apply.

``rrf`` (weighted reciprocal rank fusion, divided by its best possible value) is kept
for comparison and for runs whose scores mean nothing across queries.

``smooth_neighbours`` then mixes each fused passage's score with its best neighbour's in the same
document: the answer to a question usually sits in a stretch of related passages, while a lone passage
that shares a frequent word or two with the question (a table, an infobox) has no such support.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from operator import itemgetter
from typing import TypeVar

from calypso.models import RankingOptions

K = TypeVar("K", bound=Hashable)

DEFAULT_TEXT_WEIGHT = 0.6  # chosen on SciFact train (qrels/train.tsv), with the embedding weight
DEFAULT_EMBEDDING_WEIGHT = 0.4
# With multilingual-e5-small (the default model since issue 43) 0.6 / 0.4 and the exact signal as shipped are
# SciFact train's best too (0.7351; bench/hybrid_tuning.py, docs/benchmarks/hybrid.md "SciFact with the multilingual
# default"), so one pair serves both models.
DEFAULT_RRF_K = 10  # best RRF constant on SciFact train
# Neighbour smoothing after fusion (``smooth_neighbours``): chosen by two-fold cross-validation over the Alps
# questions (both folds pick 0.5 of 0/0.25/0.5/0.75/1), checked on the Alps HTML and WiCE; SciFact's one-passage
# documents are unaffected (docs/benchmarks/hybrid.md, "Neighbour smoothing: Alps 36/39").
NEIGHBOUR_WEIGHT = 0.5
NEIGHBOUR_POOL = 50  # fused passages whose positions are looked up: 30 already gave the Alps figure, 10 lost 2


def fusion_weights(ranking: RankingOptions | None) -> tuple[float, float]:
    """(text_weight, embedding_weight) from a request's ranking options, server defaults where unset."""
    text = DEFAULT_TEXT_WEIGHT if ranking is None or ranking.text_weight is None else ranking.text_weight
    dense = (
        DEFAULT_EMBEDDING_WEIGHT if ranking is None or ranking.embedding_weight is None else ranking.embedding_weight
    )
    if text < 0 or dense < 0 or text + dense <= 0:
        raise ValueError(f"hybrid weights must be >= 0 and not both 0 (text_weight={text}, embedding_weight={dense})")
    return text, dense


# A query in another language than the passages' (a multilingual model embeds both): keywords meet only in
# names and numbers, so the vectors lead and the keyword run cannot drown them. Chosen on XQuAD's English -> German
# and Chinese -> English pairs with multilingual-e5-small (bench/crosslingual_search.py --sweep; nDCG@10 0.9039 and
# 0.7492 with the exact signal, vectors alone 0.9009 and 0.7390; a text weight of 0.6 drops en -> de to 0.81).
CROSS_LINGUAL_TEXT_WEIGHT = 0.1
CROSS_LINGUAL_EMBEDDING_WEIGHT = 0.9


def default_weights(ranking: RankingOptions | None) -> bool:
    """Whether the request leaves both fusion weights to the server (query-dependent weighting applies only
    then: weights a request gives are used as given)."""
    return ranking is None or (ranking.text_weight is None and ranking.embedding_weight is None)


def _normalised(run: Sequence[tuple[K, float]]) -> dict[K, float]:
    if not run:
        return {}
    scores = [s for _, s in run]
    hi, lo = max(scores), min(scores)
    if hi <= lo:
        return dict.fromkeys((key for key, _ in run), 1.0)
    span = hi - lo
    return {key: (s - lo) / span for key, s in run}


def _ranked(acc: dict[K, float]) -> list[tuple[K, float]]:
    # Clamped: float rounding must not let a client see 1.0000000002. Stable, so ties keep their order.
    clamped = [(key, 1.0 if s > 1.0 else 0.0 if s < 0.0 else s) for key, s in acc.items()]
    clamped.sort(key=itemgetter(1), reverse=True)
    return clamped


def fuse(
    text: Sequence[tuple[K, float]],
    dense: Sequence[tuple[K, float]],
    *,
    text_weight: float = DEFAULT_TEXT_WEIGHT,
    embedding_weight: float = DEFAULT_EMBEDDING_WEIGHT,
    exact: Mapping[K, float] | None = None,
    exact_weight: float = 0.0,
) -> list[tuple[K, float]]:
    """Convex fusion of two ``(key, score)`` runs, best first; every score in [0, 1].

    ``exact`` (key -> a score in [0, 1], taken as it is) joins them with ``exact_weight``."""
    total = text_weight + embedding_weight + (exact_weight if exact else 0.0)
    acc: dict[K, float] = {}
    get = acc.get
    for scores, weight in ((_normalised(text), text_weight), (_normalised(dense), embedding_weight)):
        if weight == 0:
            continue
        for key, s in scores.items():
            acc[key] = get(key, 0.0) + weight * s / total
    if exact and exact_weight > 0:
        for key, s in exact.items():
            acc[key] = get(key, 0.0) + exact_weight * s / total
    return _ranked(acc)


def rrf(
    text: Sequence[K],
    dense: Sequence[K],
    *,
    text_weight: float = DEFAULT_TEXT_WEIGHT,
    embedding_weight: float = DEFAULT_EMBEDDING_WEIGHT,
    k: int = DEFAULT_RRF_K,
) -> list[tuple[K, float]]:
    """Weighted reciprocal rank fusion of two rankings, divided by its best possible value (so in [0, 1])."""
    best = (text_weight + embedding_weight) / (k + 1)
    acc: dict[K, float] = {}
    for run, weight in ((text, text_weight), (dense, embedding_weight)):
        for rank, key in enumerate(run):
            acc[key] = acc.get(key, 0.0) + weight / (k + rank + 1) / best
    return _ranked(acc)


def smooth_neighbours(
    ranked: Sequence[tuple[K, float]],
    positions: Mapping[K, tuple[Hashable, int]],
    weight: float,
    lone: Collection[K] = (),
) -> list[tuple[K, float]]:
    """Each passage's score mixed with its best neighbour's: ``(s + weight * max(prev, next)) / (1 + weight)``.

    ``positions`` gives each key's (document, chunk index); a neighbour is the chunk before or after it in the
    same document, scored by ``ranked`` (absent: 0). A passage inside a relevant stretch of a document beats a
    lone one that matched a word or two by chance. A passage in ``lone`` is its document's only one: it is its
    own stretch and keeps its score (else a knowledge base of short documents would rank every two-passage
    one above the one-passage ones: XQuAD zh -> en lost 0.055 nDCG@10 so). The result is then rescaled so that its best score equals
    the best score given: scores keep their scale for ``score_threshold``, and a run with no neighbours at all
    (one-passage documents) comes back unchanged. Scores stay in [0, 1].
    """
    if weight <= 0 or not ranked:
        return list(ranked)
    scores = dict(ranked)
    at = {pos: key for key, pos in positions.items()}
    acc: dict[K, float] = {}
    for key, score in ranked:
        if key in lone:
            acc[key] = score
            continue
        best = 0.0
        pos = positions.get(key)
        if pos is not None:
            doc, index = pos
            for near in (at.get((doc, index - 1)), at.get((doc, index + 1))):
                if near is not None:
                    best = max(best, scores.get(near, 0.0))
        acc[key] = (score + weight * best) / (1 + weight)
    top_before, top_after = max(scores.values()), max(acc.values())
    if top_after > 0:
        acc = {key: s * top_before / top_after for key, s in acc.items()}
    return _ranked(acc)
