"""The exact-match signal: passages that hold a query's rare identifiers, and the weight that signal earns.

A query such as "Command Code BMFOL BMF Return Form 1041 Display" names one exhibit of the 400-page IRS
manual by its form number. The embedding sees only that the table of contents (page 4 lists 38 exhibit
titles "Command Code BMFOL … Display") looks like the query, and the keyword run likes its passage (pp. 4-5)
too: it repeats the query's common words ("command", "code", "display") a dozen times and "BMF" five. What
picks the exhibit is "1041": it stands on 10 of 398 passages. So fusion gets a third component beside the two runs:

- ``rare_terms``: the query's identifier terms (``retrieval.identifiers``, analysed as the index analyses
  them) whose idf is at least ``EXACT_RARITY`` of the highest idf possible in the index (a term on one
  passage). "1041" (idf 3.64 of 5.58) counts; "BMFOL", on 372 of 398 passages, does not.
- ``exact_matches``: each passage holding one of them gets the idf-weighted share of them it holds, in
  [0, 1]: presence, not a term frequency, since a list that names a code four times does not name it more.
- ``exact_weight``: the signal's weight beside the text run's 0.6 and the embedding run's 0.4 is
  ``EXACT_WEIGHT`` times the rare identifiers' share of the query's idf (``BM25Index.max_score``): the
  query "TC902" is all identifier (weight 1.5), the claim "In the UK, drowning affects boys and girls
  equally" is mostly words ("UK" is 15% of its idf: weight 0.22).

Explicit ``ranking_options`` weights are used as given, without this signal (``retrieval.hybrid``), and a
keyword-only search does not use it.

Designs compared (``bench/exact_tokens.py --designs --train``; docs/benchmarks/hybrid.md, "Exact tokens win
(issue 42)"), each smoothed with neighbours as shipped: 13 identifier queries on the IRS manual and 5 on the
Federal Register's two airworthiness directives (the gold page first), SciFact nDCG@10 (test / train):

| design | IRS first | Federal Register | SciFact test / train |
|---|---|---|---|
| plain fusion 0.6 / 0.4 (before) | 6 / 13 | 5 / 5 | 0.7294 / 0.7269 |
| query-dependent weights: text 0.75 when a rare identifier is matched | 7 / 13 | 5 / 5 | 0.7278 / 0.7253 |
| the same, text 0.9 | 8 / 13 | 5 / 5 | 0.7251 / 0.7212 |
| third run: BM25 of the rare identifier terms, weight 2 | 9 / 13 | 5 / 5 | 0.6826 / 0.6767 |
| presence signal, fixed weight 1 | 10 / 13 | 5 / 5 | 0.7175 / 0.7114 |
| presence signal, weight 1.0 x idf share | 9 / 13 | 5 / 5 | 0.7309 / 0.7321 |
| **presence signal, weight 1.5 x idf share (shipped)** | **10 / 13** | **5 / 5** | **0.7298 / 0.7312** |
| presence signal, weight 2.0 x idf share | 10 / 13 | 5 / 5 | 0.7288 / 0.7310 |

Raising the text weight cannot win where the keyword run itself ranks the table of contents first (it does
for the Form 1041 query), and a BM25 run of the identifiers repeats that error (the contents passage holds "BMF"
5 times) and costs SciFact most. Presence ties the exhibit with the contents page on the code, and the
neighbour smoothing then prefers the exhibit, whose neighbours hold the code too. A fixed weight costs
SciFact (claims whose acronym, "CVD", "UK", "CSF", the relevant abstract spells out); scaled by the
identifiers' share of the query it gains on train. 1.5 is the smallest scale that puts the Form 1041 exhibit
first (1.0 leaves it second); the floor 0.5 keeps "BMF" (46 of 398 passages, 0.38) out (0.4 and 0.6 gave the
same IRS figures offline, SciFact train 0.7312 / 0.7313). The Alps questions name no rare identifier: 36 of
39 before and after. The three IRS queries still missed ask for a form whose number the contents pages list
two to four times (Form 990T, 706GS(T), 8743); keyword search alone misses them too.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping
from typing import TypeVar

from calypso.retrieval.bm25 import BM25Index
from calypso.retrieval.identifiers import identifiers
from calypso.text.tokenize import DEFAULT_ANALYZER

K = TypeVar("K", bound=Hashable)

EXACT_WEIGHT = 1.5  # times the rare identifiers' share of the query's idf
EXACT_RARITY = 0.5  # a term counts when its idf is at least this share of the idf of a term on one passage


def highest_idf(passages: int) -> float:
    """The idf of a term on one passage of ``passages`` (Lucene's BM25 idf, as ``retrieval.bm25``)."""
    return math.log1p((passages - 1 + 0.5) / 1.5) if passages > 0 else 0.0


def rare_terms(idfs: Mapping[str, float], passages: int, floor: float = EXACT_RARITY) -> dict[str, float]:
    """The terms among ``idfs`` (term -> idf in the index, 0 when absent) rare enough to count."""
    top = highest_idf(passages)
    if top <= 0:
        return {}
    return {term: idf for term, idf in idfs.items() if idf > 0 and idf >= floor * top}


def exact_matches(holders: Mapping[str, tuple[float, Collection[K]]]) -> dict[K, float]:
    """Each passage's idf-weighted share of the rare terms it holds: ``holders`` maps a term to its idf and
    the passages holding it. In [0, 1]; a passage holding none is absent."""
    total = sum(idf for idf, _ in holders.values())
    found: dict[K, float] = {}
    if total <= 0:
        return found
    for idf, keys in holders.values():
        for key in keys:
            found[key] = found.get(key, 0.0) + idf / total
    return found


def exact_weight(rare: Mapping[str, float], query_idf: float) -> float:
    """The signal's fusion weight: ``EXACT_WEIGHT`` times the rare terms' share of the query's idf."""
    if not rare or query_idf <= 0:
        return 0.0
    return EXACT_WEIGHT * min(1.0, sum(rare.values()) / query_idf)


def exact_signal(
    index: BM25Index, query: str, keywords: str, depth: int, doc_keys: Collection[int] | None = None
) -> tuple[dict[int, float], float]:
    """``query``'s exact-match signal in ``index`` and its weight; ({}, 0.0) when it names no rare identifier.

    ``keywords`` is the query as the keyword run searched it (its idf is the whole the identifiers' share
    is taken of). Each rare term's holders are its top ``depth`` passages (only ``doc_keys``' when given):
    one more index lookup per identifier term, of a term that is rare."""
    language = index.query_language()
    idfs: dict[str, float] = {}
    for identifier in identifiers(query):
        # Analysed as the index analyses a query (``BM25Index``): "§ 1983" is the term "1983".
        for term in DEFAULT_ANALYZER.tokenize(identifier, language):
            if term not in idfs:
                idfs[term] = index.max_score(term)
    rare = rare_terms(idfs, len(index))
    weight = exact_weight(rare, index.max_score(keywords)) if rare else 0.0
    if weight <= 0:
        return {}, 0.0
    holders = {
        term: (idf, [key for key, _ in index.search(term, k=depth, doc_keys=doc_keys)]) for term, idf in rare.items()
    }
    return exact_matches(holders), weight
