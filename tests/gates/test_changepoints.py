"""gates/changepoints.py: E-divisive means with a permutation test."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_gate.gates import changepoints
from retrieval_gate.gates.changepoints import ChangePoint, _q_statistics, change_points


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


def _reference_change_points(
    values: np.ndarray, *, level: float, permutations: int, seed: int, min_size: int = 3
) -> list[ChangePoint]:
    """The implementation before the permutation test stopped scoring decided splits: a loop
    over tau for every permutation. The current one must give exactly its answers."""

    def best_split(x: np.ndarray) -> tuple[int, float]:
        n = len(x)
        d = np.abs(x[:, None] - x[None, :])
        s = np.zeros((n + 1, n + 1))
        s[1:, 1:] = d.cumsum(0).cumsum(1)
        out = np.full(n + 1, -np.inf)
        for tau in range(min_size, n - min_size + 1):
            m = n - tau
            a = (s[tau, n] - s[tau, tau]) / (tau * m)
            b = s[tau, tau] / 2.0 / (tau * (tau - 1) / 2.0)
            c = (s[n, n] - s[tau, n] - s[n, tau] + s[tau, tau]) / 2.0 / (m * (m - 1) / 2.0)
            out[tau] = tau * m / n * (2.0 * a - b - c)
        best = int(np.argmax(out))
        return best, float(out[best])

    x = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    found: list[int] = []
    p_values: dict[int, float] = {}
    segments = [(0, len(x))]
    while segments:
        lo, hi = segments.pop()
        part = x[lo:hi]
        if len(part) < 2 * min_size or float(np.ptp(part)) == 0.0:
            continue
        tau, q = best_split(part)
        if q <= 0.0:
            continue
        exceed = sum(best_split(rng.permutation(part))[1] >= q - 1e-12 for _ in range(permutations))
        p = (1 + exceed) / (1 + permutations)
        if p > level:
            continue
        found.append(lo + tau)
        p_values[lo + tau] = p
        segments += [(lo, lo + tau), (lo + tau, hi)]
    found.sort()
    bounds = [0, *found, len(x)]
    return [
        ChangePoint(
            index,
            float(x[bounds[i] : index].mean()),
            float(x[index : bounds[i + 2]].mean()),
            p_values[index],
        )
        for i, index in enumerate(found)
    ]


def _seeded_histories() -> list[np.ndarray]:
    """Continuous noise, coarse metric values (many ties: P@1 over 4 or 10 queries), level
    shifts of each, constant series and runs of one value, short and longer histories."""
    out = []
    for i in range(24):
        rng = np.random.default_rng(500 + i)
        n = int(rng.integers(6, 48))
        if i % 3 == 0:
            values = rng.normal(0.7, 0.01, n)
        else:
            values = rng.integers(0, 4 if i % 3 == 1 else 10, n) / (4 if i % 3 == 1 else 10)
        if i % 2:
            values[n // 2 :] += 0.5
        out.append(values)
    out += [
        np.full(20, 0.7),
        np.r_[np.full(10, 0.5), np.full(10, 0.75)],
        np.r_[np.full(8, 1.0), np.full(8, 0.0), np.full(8, 1.0)],
        np.tile([0.0, 1.0], 12),
    ]
    return out


@pytest.mark.parametrize("quick_from", [changepoints.QUICK_FROM, 0])
@pytest.mark.parametrize(("level", "permutations"), [(0.01, 199), (0.05, 99), (0.2, 29)])
def test_the_same_change_points_and_p_values_as_scoring_every_permutation(
    level: float, permutations: int, quick_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # quick_from 0: every segment's permutations are scored in O(n log n), as long ones are.
    monkeypatch.setattr(changepoints, "QUICK_FROM", quick_from)
    for seed, values in enumerate(_seeded_histories()):
        expected = _reference_change_points(
            values, level=level, permutations=permutations, seed=seed
        )
        found = change_points(values, level=level, permutations=permutations, seed=seed)
        assert found == expected, (seed, values)


def test_a_long_history_has_the_same_change_points_and_p_values() -> None:
    # 160 points: its segments past QUICK_FROM score permutations in O(n log n), at the default.
    rng = np.random.default_rng(13)
    values = np.r_[rng.normal(0.7, 0.01, 100), rng.normal(0.68, 0.01, 60)]
    expected = _reference_change_points(values, level=0.01, permutations=199, seed=1)
    assert [c.index for c in expected] == [101]  # the shift at 100, as this noise places it
    assert change_points(values, seed=1) == expected


def test_a_rejected_split_stops_scoring_permutations_once_decided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An unchanged, noisy history: its first split is rejected (no change point). With
    # p = (1 + exceed) / 200 <= 0.01 needing exceed <= 1, scoring stops at the second permuted
    # series whose max Q reaches the observed one, not after all 199.
    monkeypatch.setattr(changepoints, "QUICK_FROM", 0)
    scored = []
    quick_max = changepoints._quick_max

    def counting(x: np.ndarray, size: int) -> float:
        scored.append(len(x))
        return quick_max(x, size)

    monkeypatch.setattr(changepoints, "_quick_max", counting)
    values = np.random.default_rng(10_000).normal(0.7, 0.01, 30)
    assert change_points(values, seed=0) == []
    assert 2 <= len(scored) < 199


def test_permutations_are_scored_in_o_n_log_n_and_decided_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A shift of 5 sd at step 40 of 80: the first split passes all 199 permutations, each
    # scored by _quick_max, far below the observed max Q; the n x n computation runs once per
    # segment searched (the observed series), not once per permutation.
    exact = []
    call = changepoints._SplitScores.__call__

    def counting(self: changepoints._SplitScores, x: np.ndarray) -> np.ndarray:
        exact.append(len(x))
        return call(self, x)

    monkeypatch.setattr(changepoints._SplitScores, "__call__", counting)
    monkeypatch.setattr(changepoints, "QUICK_FROM", 0)
    rng = np.random.default_rng(11)
    values = np.r_[rng.normal(0.70, 0.01, 40), rng.normal(0.65, 0.01, 40)]
    (found,) = change_points(values, seed=0)
    assert found.index == 40 and found.p_value == 1 / 200
    assert exact[0] == 80 and len(exact) <= 3  # the series, then (at most) its two sides


def test_the_quick_max_is_within_a_hundredth_of_its_rounding_bound() -> None:
    rng = np.random.default_rng(12)
    for trial in range(120):
        n = int(rng.integers(6, 300))
        values = [
            rng.normal(0.7, 0.01, n),
            rng.integers(0, 4, n) / 4,  # ties
            1e6 + rng.normal(0.0, 1.0, n),  # far from 0: the centring's case
            np.r_[rng.normal(0.7, 0.01, n // 2), rng.normal(0.5, 0.01, n - n // 2)],
        ][trial % 4]
        spread = float(np.ptp(values))
        if spread == 0.0:
            continue
        exact = float(np.max(changepoints._SplitScores(n, 3)(values)))
        quick = changepoints._quick_max(values, 3)
        assert abs(quick - exact) <= changepoints._rounding_bound(n, spread) / 100, (trial, n)


def test_the_n_x_n_computation_alone_gives_the_same_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An infinite bound sends every permutation to the n x n computation: the fallback path.
    monkeypatch.setattr(changepoints, "_rounding_bound", lambda n, spread: float("inf"))
    monkeypatch.setattr(changepoints, "QUICK_FROM", 0)
    for seed, values in enumerate(_seeded_histories()[:12]):
        expected = _reference_change_points(values, level=0.05, permutations=99, seed=seed)
        assert change_points(values, level=0.05, permutations=99, seed=seed) == expected
