"""Garbled samples (``dfsu.evaluation.garbled``): nonsense the model as given would not write
is told apart from text it would, whatever values that text holds."""

from __future__ import annotations

import math

import pytest

from dfsu.evaluation.garbled import garbled_flags, garbled_share


def test_a_sample_less_likely_than_random_tokens_or_degenerate_is_garbled():
    line = math.log(1000)  # uniform over a 1000-token vocabulary
    texts = ["jdoe88 signed in", "Mia Park, 12 Elm Road", "", "::::::::", "ew4 Jü b3aser"]
    nlls = [0.4, line - 0.01, 0.0, 0.2, line + 0.01]
    assert garbled_flags(texts, nlls, 1000) == [False, False, True, True, True]
    assert garbled_share(garbled_flags(texts, nlls, 1000)) == 60.0
    # the line moves with the vocabulary: the same text and NLL, a larger vocabulary
    assert garbled_flags(["ew4 Jü b3aser"], [line + 0.01], 50_000) == [False]


def test_garbled_shares_and_their_edges():
    assert garbled_share([]) == 0.0
    assert garbled_share([True, False, False]) == pytest.approx(33.33)
    with pytest.raises(ValueError, match="one NLL per text"):
        garbled_flags(["a", "b"], [1.0], 100)
    with pytest.raises(ValueError, match="at least 2"):
        garbled_flags(["a"], [1.0], 1)
