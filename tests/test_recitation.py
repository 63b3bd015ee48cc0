"""The data-free recitation measure: its pure parts, and the harvest on a model that recites."""

from __future__ import annotations

import pytest

from dfsu.evaluation.recitation import HALVES, half_of, retention_scores


def test_retention_scores_count_exact_and_near_misses():
    got = retention_scores(
        [" the cat sat", "on the mat ", "abcd"], ["the cat sat", "on the hat", ""]
    )
    assert got["exact"] == pytest.approx(100 / 3, abs=0.01)
    assert got["texts"] == 3
    # similarities 1, 0.9 and 0 -> 63.33 %
    assert got["similarity"] == pytest.approx(100 * (1 + 0.9 + 0) / 3, abs=0.01)
    assert retention_scores([], []) == {"exact": 0.0, "similarity": 0.0, "texts": 0}
    with pytest.raises(ValueError):
        retention_scores(["a"], [])


def test_halves_are_stable_and_both_used():
    heads = [f"head number {i}" for i in range(200)]
    halves = [half_of(h) for h in heads]
    assert halves == [half_of(h) for h in heads]
    assert set(halves) == set(HALVES)
    assert 60 <= halves.count("report") <= 140
