"""Hybrid fusion: scores in [0, 1], weights from ranking options."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calypso.models import RankingOptions
from calypso.retrieval.hybrid import (
    DEFAULT_EMBEDDING_WEIGHT,
    DEFAULT_TEXT_WEIGHT,
    fuse,
    fusion_weights,
    rrf,
    smooth_neighbours,
)

TEXT = [(1, 12.0), (2, 8.0), (3, 2.0)]
DENSE = [(2, 0.81), (4, 0.79), (1, 0.40)]


def test_convex_fusion() -> None:
    fused = dict(fuse(TEXT, DENSE, text_weight=0.5, embedding_weight=0.5))
    assert fused[2] == pytest.approx(0.5 * 0.6 + 0.5 * 1.0)  # text (8-2)/(12-2), dense top
    assert fused[1] == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)  # dense's last returned maps to 0
    assert fused[3] == pytest.approx(0.0) and fused[4] == pytest.approx(0.5 * (0.39 / 0.41))
    assert [k for k, _ in fuse(TEXT, DENSE, text_weight=0.5, embedding_weight=0.5)][:2] == [2, 1]


def test_a_zero_weight_leaves_the_other_ranking() -> None:
    assert [k for k, _ in fuse(TEXT, DENSE, text_weight=1, embedding_weight=0)] == [1, 2, 3]
    assert [k for k, _ in fuse(TEXT, DENSE, text_weight=0, embedding_weight=1)] == [2, 4, 1]


def test_degenerate_runs() -> None:
    assert fuse([], []) == []
    assert fuse([(7, 3.0)], []) == [(7, pytest.approx(DEFAULT_TEXT_WEIGHT))]
    assert dict(fuse([(1, 2.0), (2, 2.0)], [(1, 0.5)]))[1] == pytest.approx(1.0)


def test_rrf_is_normalised() -> None:
    fused = dict(rrf([1, 2, 3], [1, 4]))
    assert fused[1] == pytest.approx(1.0)
    assert 0 < fused[4] < fused[2] < 1 or 0 < fused[2] < fused[4] < 1


def test_weights_from_ranking_options() -> None:
    assert fusion_weights(None) == (DEFAULT_TEXT_WEIGHT, DEFAULT_EMBEDDING_WEIGHT)
    assert fusion_weights(RankingOptions(text_weight=1.0, embedding_weight=3.0)) == (1.0, 3.0)
    assert fusion_weights(RankingOptions(embedding_weight=0.0)) == (DEFAULT_TEXT_WEIGHT, 0.0)
    with pytest.raises(ValueError):
        fusion_weights(RankingOptions(text_weight=0.0, embedding_weight=0.0))
    with pytest.raises(ValueError):
        fusion_weights(RankingOptions(text_weight=-1.0))


def test_a_passage_among_relevant_neighbours_overtakes_a_lone_one() -> None:
    # 1 is alone in its document; 5 sits between 4 and 6 of another, 4 scoring well.
    ranked = [(1, 0.9), (5, 0.8), (4, 0.7), (9, 0.1)]
    positions = {1: ("a", 0), 5: ("b", 3), 4: ("b", 2), 9: ("b", 7)}
    smoothed = smooth_neighbours(ranked, positions, 0.5)
    assert [k for k, _ in smoothed] == [5, 4, 1, 9]  # the pair now leads the lone passage
    scores = dict(smoothed)
    assert scores[5] == pytest.approx(0.9)  # the best score keeps the run's scale
    mixed = {5: 0.8 + 0.5 * 0.7, 4: 0.7 + 0.5 * 0.8, 1: 0.9 + 0.5 * 0.0}  # 1's neighbours are absent: 0
    assert scores[4] / scores[5] == pytest.approx(mixed[4] / mixed[5])
    assert scores[1] / scores[5] == pytest.approx(mixed[1] / mixed[5])


def test_smoothing_leaves_one_passage_documents_as_they_were() -> None:
    ranked = [(3, 0.9), (1, 0.5), (2, 0.2)]
    positions = {key: (f"doc{key}", 0) for key, _ in ranked}
    assert smooth_neighbours(ranked, positions, 0.5) == [(k, pytest.approx(s)) for k, s in ranked]
    assert smooth_neighbours(ranked, positions, 0.0) == ranked
    # Chunks of one document that are not adjacent do not lift each other either.
    apart = {3: ("d", 0), 1: ("d", 2), 2: ("d", 4)}
    assert smooth_neighbours(ranked, apart, 1.0) == [(k, pytest.approx(s)) for k, s in ranked]


runs = st.lists(
    st.tuples(st.integers(0, 30), st.floats(-1e6, 1e6, allow_nan=False)), max_size=20, unique_by=lambda x: x[0]
)
weights = st.floats(0, 100, allow_nan=False).filter(lambda w: w > 1e-9)


@given(runs, runs, weights, weights)
def test_scores_stay_in_unit_interval(text: list, dense: list, tw: float, dw: float) -> None:
    for fused in (
        fuse(text, dense, text_weight=tw, embedding_weight=dw),
        rrf([k for k, _ in text], [k for k, _ in dense]),
    ):
        assert all(0.0 <= s <= 1.0 for _, s in fused)
        assert [s for _, s in fused] == sorted((s for _, s in fused), reverse=True)
        assert {k for k, _ in fused} == {k for k, _ in text} | {k for k, _ in dense}


@given(runs, weights)
def test_smoothed_scores_stay_in_unit_interval(run: list, weight: float) -> None:
    ranked = fuse(run, [])  # scores in [0, 1], as smoothing receives them
    positions = {key: (key % 3, key // 3) for key, _ in ranked}
    smoothed = smooth_neighbours(ranked, positions, weight)
    assert all(0.0 <= s <= 1.0 for _, s in smoothed)
    assert [s for _, s in smoothed] == sorted((s for _, s in smoothed), reverse=True)
    assert {k for k, _ in smoothed} == {k for k, _ in ranked}
