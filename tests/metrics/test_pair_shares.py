"""Each pair's share of a correlation's change against gold: the shares sum to the change."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_gate.metrics.pairs import correlation_shares, pearson, spearman


def test_shares_sum_to_the_change_of_pearson_and_spearman() -> None:
    gold = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.2])
    then = np.array([0.9, 0.8, 0.7, 0.5, 0.3, 0.1])
    now = np.array([0.95, 0.6, 0.72, 0.5, 0.35, 0.4])  # ties-free; two pairs move out of order
    for ranks, r in ((False, pearson), (True, spearman)):
        found = correlation_shares(then, now, gold, ranks=ranks)
        assert found is not None
        shares, _, _ = found
        assert float(shares.sum()) == pytest.approx(r(now, gold) - r(then, gold), abs=1e-12)


def test_a_spearman_share_is_the_change_of_a_pairs_rank_displacement() -> None:
    # Ranks 1..6 everywhere: population sd sqrt(35 / 12), so a pair displaced by d has
    # e^2 = 12 d^2 / 35 and its share is (e_then^2 - e_now^2) / 12 = (d_then^2 - d_now^2) / 35.
    gold = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.2])
    then = np.cos(np.radians([10, 20, 30, 40, 50, 60]))
    now = np.cos(np.radians([15, 25, 45, 35, 55, 65]))  # every cosine falls; pairs 2, 3 swap
    found = correlation_shares(then, now, gold, ranks=True)
    assert found is not None
    assert list(found[0]) == pytest.approx([0, 0, -1 / 35, -1 / 35, 0, 0], abs=1e-12)


def test_a_constant_series_has_no_shares() -> None:
    gold = np.array([1.0, 2.0, 3.0])
    assert correlation_shares(np.ones(3), np.array([0.1, 0.2, 0.3]), gold, ranks=False) is None
    assert correlation_shares(gold, gold, np.ones(3), ranks=True) is None
