"""Scores a client sees, in [0, 1], from the raw values retrieval computes.

OpenAI documents file-search scores as numbers from 0 to 1 and clients check it (the Vercel xAI
provider rejects others), while BM25 is unbounded and its scale moves with the query and the
collection. ``keyword_score`` divides a raw BM25 score by the query's ceiling
(``BM25Index.max_score``: the sum of the query terms' idf). Why that one:

- within a query the ceiling is a constant, so the order of passages is BM25's exactly;
- across queries it means the same thing: the idf-weighted share of the query a passage matches,
  each term counted with BM25's saturation ``tf / (tf + k1 * norm)``. A passage of average length
  holding every query term once scores about 1 / (1 + k1) = 0.45, twice 0.63; one holding only the
  rarer half of the query, about half of that. So a ``score_threshold`` cuts at "how much of the
  question is here", whatever the query's length or the knowledge base's size. Dividing by the top
  hit's score instead would give every query a 1.0, however poor its best match.

Hybrid fusion puts its fused score on the same [0, 1] scale and clamps with :func:`unit`.
"""

from __future__ import annotations

import math


def unit(value: float) -> float:
    """``value`` clamped to [0, 1] (NaN is 0)."""
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def keyword_score(raw: float, ceiling: float) -> float:
    """A raw BM25 score as a score in [0, 1]: its share of the query's ceiling (``BM25Index.max_score``).

    Clamped, as the ceiling may come from a slightly newer index state than the score did.
    """
    if ceiling <= 0.0:
        return 0.0
    return unit(raw / ceiling)
