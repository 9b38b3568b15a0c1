"""Cosines of one model put on the scale of another, so cuts tuned on one hold for both.

The answerer's sentence cuts and the support scorer's semantic weights were fitted to all-MiniLM-L6-v2's
cosines. multilingual-e5-small places every pair closer (its cosines bunch between 0.78 and 0.93), so its raw
numbers would pass every cut. ``reference_scale`` maps a model's cosines through a monotone, piecewise-linear
map fitted by matching quantiles over the same pairs (``bench/cosine_calibration.py``: 300 SciFact train claims
against the sentences of their cited abstracts and of two others, 8,232 pairs; on the held-out half the mapped
e5 cosine and MiniLM's fall on the same side of 0.5 in 92.4% of pairs, of 0.55 in 93.3%). Ranks never change
within one language; a pair in two languages has its own maps (``_KNOTS_ACROSS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

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
# Across languages the same meaning sits lower, and lower still between scripts (e5's median over XQuAD questions
# and paragraph sentences: 0.824 in English, 0.783 for English questions against German sentences, 0.757 for
# Chinese questions against English ones), so the one-language map put 0-2% of such pairs above 0.5 where MiniLM
# reading both in English puts 24%. Each has its own map, matching e5 reading a question in one language against
# sentences in another to MiniLM reading the English question against the English sentences of the same paragraphs
# (300 XQuAD questions: 2,486 Chinese x English and 2,860 English x German pairs against 2,486 English ones):
# one for two languages of one script family, one for Chinese, Japanese or Korean against the others.
_REFERENCE_ACROSS = (0.0, 0.0230, 0.0872, 0.1749, 0.2511, 0.3163, 0.3866, 0.4558, 0.5331, 0.5479, 0.5677,
                     0.5838, 0.6012, 0.6266, 0.6505, 0.6828, 0.7199, 0.7635, 0.7997, 0.8338, 1.0)  # fmt: skip
_KNOTS_ACROSS: dict[str, dict[bool, tuple[tuple[float, ...], tuple[float, ...]]]] = {
    "multilingual-e5-small-int8": {
        False: (
            (0.0, 0.7353, 0.7527, 0.7641, 0.7739, 0.7833, 0.7922, 0.8019, 0.8145, 0.8174, 0.8209,
             0.8245, 0.8274, 0.8319, 0.8359, 0.8436, 0.8520, 0.8647, 0.8726, 0.8820, 1.0),
            _REFERENCE_ACROSS,
        ),
        True: (
            (0.0, 0.7128, 0.7271, 0.7391, 0.7483, 0.7572, 0.7656, 0.7750, 0.7860, 0.7886, 0.7918,
             0.7950, 0.7984, 0.8024, 0.8052, 0.8102, 0.8165, 0.8258, 0.8329, 0.8388, 1.0),
            _REFERENCE_ACROSS,
        ),
    },
}  # fmt: skip

Pairing = Literal["same", "across", "across_cjk"]


def calibrated(model: str) -> bool:
    """Whether ``model``'s cosines can be read on the reference scale (its own, or through a fitted map)."""
    return model == REFERENCE_MODEL or model in _KNOTS


def reference_scale(
    model: str, cosines: Sequence[float] | np.ndarray, pairings: Sequence[Pairing] | None = None
) -> np.ndarray:
    """``cosines`` of ``model`` on the reference model's scale (unchanged for the reference model or an
    uncalibrated one); ``pairings[i]``: whether the i-th pair's texts are in one language, in two, or in two
    where one is Chinese, Japanese or Korean and the other not."""
    values = np.asarray(cosines, dtype=np.float32)
    knots = _KNOTS.get(model)
    if knots is None:
        return values
    scaled = np.interp(values, knots[0], knots[1])
    maps = _KNOTS_ACROSS.get(model)
    if pairings is not None and maps is not None:
        for cjk, (own, reference) in maps.items():
            rows = np.asarray([p == ("across_cjk" if cjk else "across") for p in pairings], dtype=bool)
            if rows.any():
                scaled = np.where(rows, np.interp(values, own, reference), scaled)
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
