"""Cosines of one model put on the scale of another, so cuts tuned on one hold for both.

The answerer's sentence cuts and the support scorer's semantic weights were fitted to all-MiniLM-L6-v2's
cosines. multilingual-e5-small places every pair closer (its cosines bunch between 0.78 and 0.93), so its raw
numbers would pass every cut. ``reference_scale`` maps a model's cosines through a monotone, piecewise-linear
map fitted by matching quantiles over the same pairs (``bench/cosine_calibration.py``: 300 SciFact train claims
against the sentences of their cited abstracts and of two others, 8,232 pairs; on the held-out half the mapped
e5 cosine and MiniLM's fall on the same side of 0.5 in 92.4% of pairs, of 0.55 in 93.3%). Ranks never change
within one language; a pair in two languages has its own map (``_KNOTS_ACROSS``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

REFERENCE_MODEL = "minilm-l6-v2-int8"

# model -> (its cosines, the reference model's cosines at the same quantiles)
_KNOTS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "multilingual-e5-small-int8": (
        (0.0, 0.7861, 0.7980, 0.8074, 0.8174, 0.8260, 0.8343, 0.8441, 0.8573, 0.8606, 0.8642,
         0.8685, 0.8735, 0.8786, 0.8837, 0.8904, 0.8992, 0.9125, 0.9224, 0.9325, 1.0),
        (0.0, 0.0, 0.0460, 0.0898, 0.1331, 0.1843, 0.2332, 0.3154, 0.4313, 0.4616, 0.4924,
         0.5217, 0.5512, 0.5819, 0.6132, 0.6500, 0.6985, 0.7683, 0.8080, 0.8384, 1.0),
    ),
}  # fmt: skip
# Across languages the same meaning sits lower (e5's median over XQuAD questions and paragraph sentences: 0.771
# against 0.824 in English), so the one-language map put 1% of such pairs above 0.5 where MiniLM reading both in
# English puts 24%. Its own map matches e5 reading a question in one language against sentences in another
# (Chinese questions x English sentences, English questions x German ones) to MiniLM reading the English
# question against the English sentences of the same paragraphs (300 XQuAD questions, 5,346 and 2,486 pairs).
_KNOTS_ACROSS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "multilingual-e5-small-int8": (
        (0.0, 0.7221, 0.7385, 0.7507, 0.7612, 0.7708, 0.7805, 0.7907, 0.8028, 0.8058, 0.8097,
         0.8128, 0.8162, 0.8208, 0.8254, 0.8314, 0.8396, 0.8532, 0.8655, 0.8740, 1.0),
        (0.0, 0.0230, 0.0872, 0.1749, 0.2511, 0.3163, 0.3866, 0.4558, 0.5331, 0.5479, 0.5677,
         0.5838, 0.6012, 0.6266, 0.6505, 0.6828, 0.7199, 0.7635, 0.7997, 0.8338, 1.0),
    ),
}  # fmt: skip


def calibrated(model: str) -> bool:
    """Whether ``model``'s cosines can be read on the reference scale (its own, or through a fitted map)."""
    return model == REFERENCE_MODEL or model in _KNOTS


def reference_scale(
    model: str, cosines: Sequence[float] | np.ndarray, across: Sequence[bool] | None = None
) -> np.ndarray:
    """``cosines`` of ``model`` on the reference model's scale (unchanged for the reference model or an
    uncalibrated one); ``across[i]``: the i-th pair's texts are in different languages."""
    values = np.asarray(cosines, dtype=np.float32)
    knots = _KNOTS.get(model)
    if knots is None:
        return values
    scaled = np.interp(values, knots[0], knots[1])
    other = _KNOTS_ACROSS.get(model)
    if across is not None and other is not None and any(across):
        scaled = np.where(np.asarray(across, dtype=bool), np.interp(values, other[0], other[1]), scaled)
    return scaled.astype(np.float32)


# Below its floor a query's cosine to a passage is no match by meaning (search drops it before fusion).
# MiniLM: "What do ducks eat?" on the demo scored 0.03-0.08, the demo's own questions 0.39-0.72. e5 places a
# query and its gold paragraph in another language as close as unrelated texts in one (XQuAD zh -> en gold:
# 0.725 at the 1st percentile, 0.795 at the median; the ducks on the demo 0.77), so its floor only drops what is
# far from everything.
QUERY_FLOORS = {REFERENCE_MODEL: 0.15, "multilingual-e5-small-int8": 0.70}
DEFAULT_QUERY_FLOOR = 0.15


def query_floor(model: str) -> float:
    """The cosine below which ``model``'s vector run drops a passage."""
    return QUERY_FLOORS.get(model, DEFAULT_QUERY_FLOOR)
