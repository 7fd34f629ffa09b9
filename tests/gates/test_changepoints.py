"""gates/changepoints.py: E-divisive means with a permutation test."""

from __future__ import annotations

import numpy as np

from retrieval_gate.gates.changepoints import _q_statistics, change_points


def test_a_level_shift_at_step_15_is_named_there() -> None:
    rng = np.random.default_rng(7)
    values = np.r_[rng.normal(0.70, 0.01, 15), rng.normal(0.66, 0.01, 15)]
    found = change_points(values)
    assert len(found) == 1
    assert abs(found[0].index - 15) <= 1
    assert -0.05 < found[0].shift < -0.03


def test_an_unchanged_history_has_no_change_point() -> None:
    assert change_points([0.7] * 30) == []


def test_the_statistic_by_hand() -> None:
    # x = 0, 0, 1, 1 split at 2 (two points each side, the minimum here): A, the mean
    # |x_i - x_j| across the split, is 1; B and C, within each side, are 0; so
    # Q = 2 * 2 / 4 * (2 * 1 - 0 - 0) = 2.
    q = _q_statistics(np.array([0.0, 0.0, 1.0, 1.0]), 2)
    assert q[2] == 2.0


def test_same_series_same_answer() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(0.5, 0.02, 25)
    assert change_points(values, seed=5) == change_points(values, seed=5)
