"""The resolution of a regression decision (gates/resolution.py): hand arithmetic and the
textbook values of Student's t."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval_gate.gates.resolution import (
    ItemSpread,
    block_level,
    block_resolution,
    correlation,
    joint_quantile,
    loss_spread,
    normal_joint_quantile,
    planned_epsilon,
    planned_queries,
    pseudo_weight,
    queries_needed,
    t_cdf,
    t_quantile,
)


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        # Student's t quantiles as the tables (and scipy.stats.t.ppf) give them.
        (0.975, 1, 12.706204736),
        (0.975, 3, 3.182446305),
        (0.975, 10, 2.228138852),
        (0.975, 34, 2.032244509),
        (0.995, 34, 2.728394367),
        (0.975, 159, 1.974996213),
    ],
)
def test_t_quantile_matches_the_tables(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-8)
    assert t_cdf(expected, df) == pytest.approx(p, abs=1e-10)
    assert t_quantile(1 - p, df) == pytest.approx(-expected, abs=1e-8)


def test_t_quantile_far_out_is_the_normal_one_and_refuses_nonsense() -> None:
    assert t_quantile(0.975, 10**7) == pytest.approx(1.959963985, abs=1e-8)
    with pytest.raises(ValueError, match="p must be within"):
        t_quantile(1.0, 5)


def test_block_level_shares_delta_by_sidak() -> None:
    assert block_level(0.05, 1) == pytest.approx(0.05)
    assert block_level(0.05, 0) == pytest.approx(0.05)
    # 1 - 0.95^(1/3)
    assert block_level(0.05, 3) == pytest.approx(0.0169524275, abs=1e-10)
    # Three blocks at that level: the session keeps 0.95.
    assert (1 - block_level(0.05, 3)) ** 3 == pytest.approx(0.95)


def test_correlation_truncates_toward_independence() -> None:
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    # y = x plus a little: correlation 0.985 -> 0.95; minus x: -1 -> -1; a constant: independent.
    y = x + np.array([0.3, -0.3, 0.3, -0.3, 0.3, -0.3])
    found = correlation(np.column_stack([x, y, -x, np.ones(6)]))
    assert np.corrcoef(x, y)[0, 1] == pytest.approx(0.9847, abs=1e-4)
    assert found.tolist() == [
        [1.0, 0.95, -1.0, 0.0],
        [0.95, 1.0, -0.95, 0.0],
        [-1.0, -0.95, 1.0, 0.0],
        [0.0, 0.0, 0.0, 1.0],
    ]
    # Two queries tell nothing of a correlation.
    assert correlation(np.array([[0.0, 1.0], [1.0, 0.0]])).tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_joint_quantile_between_one_metric_and_independent_ones() -> None:
    level, df = 0.05, 34
    one = t_quantile(0.975, df)
    assert joint_quantile(np.eye(1), level, df) == one
    # Independent: Sidak exactly, 1 - 0.95^(1/3) per metric.
    sidak = t_quantile(1 - block_level(level, 3) / 2, df)
    assert joint_quantile(np.eye(3), level, df) == pytest.approx(sidak, rel=1e-12)
    # Perfectly correlated: the max is one |T|.
    assert joint_quantile(np.ones((3, 3)), level, df) == pytest.approx(one, rel=1e-12)
    # In between, and the same value on every call (seeded Monte Carlo).
    corr = np.array([[1.0, 0.8, 0.6], [0.8, 1.0, 0.7], [0.6, 0.7, 1.0]])
    found = joint_quantile(corr, level, df)
    assert one < found < sidak
    assert found == joint_quantile(corr.copy(), level, df)
    # The normal max quantile it is scaled from: two metrics at correlation 0.5, level 0.05,
    # is 2.2121 in the tables of the bivariate normal (Dunnett's two-sided constant for rho 0.5).
    assert normal_joint_quantile(np.array([[1.0, 0.5], [0.5, 1.0]]), 0.05) == pytest.approx(
        2.2121, abs=0.01
    )


def test_a_mean_metric_spread_by_hand() -> None:
    # Drops 1, 0, 0, 0 over 4 queries, R = 1: mean 0.25, SS = 0.75^2 + 3 * 0.25^2 = 0.75;
    # standard error sqrt(0.75 + 1) / 4 = 0.3307189.
    spread = ItemSpread(4, 1.0, drops=np.array([1.0, 0.0, 0.0, 0.0]))
    assert spread.standard_error() == pytest.approx(math.sqrt(1.75) / 4)
    block = block_resolution({"MRR@10": spread}, 0.05)
    # One metric, one block: c = t_{0.975, 3} = 3.1824463; the pseudo-query weighs c^2 / 4 =
    # 2.5319911: s = sqrt((0.75 + 2.5319911) / (3 + 2.5319911)) = 0.7702433 and c s / sqrt(4) =
    # 1.2256291. The drops are skewed: m3 = (0.75^3 - 3 * 0.25^3) / 4 = 0.09375, g = m3 / s^3 =
    # 0.2051575, skewness term g (2 c^2 + 1) / (6 sqrt(4)) = 0.3634011; epsilon
    # (c + 0.3634011) s / 2 = 1.3655827.
    assert block.c == pytest.approx(3.1824463053)
    assert block.df == 3
    assert pseudo_weight(block.c) == pytest.approx(2.5319911215)
    assert spread.standard_error(2.5319911215) == pytest.approx(
        math.sqrt(3.2819911215 / 5.5319911215) / 2
    )
    assert spread.skew_term(block.c, 2.5319911215) == pytest.approx(0.3634011, abs=1e-7)
    assert block.epsilon["MRR@10"] == pytest.approx(1.3655827, abs=1e-7)


def test_symmetric_drops_add_no_skewness_term() -> None:
    # Drops 1, -1, 1, -1, 0: m3 = 0, so epsilon is c times the standard error alone.
    spread = ItemSpread(5, 1.0, drops=np.array([1.0, -1.0, 1.0, -1.0, 0.0]))
    block = block_resolution({"P@1": spread}, 0.05)
    assert spread.skew_term(block.c, pseudo_weight(block.c)) == 0.0
    assert block.epsilon["P@1"] == pytest.approx(
        block.c * spread.standard_error(pseudo_weight(block.c))
    )


def test_nothing_changed_still_has_a_resolution() -> None:
    # 35 queries, no drop anywhere: the small-sample part alone. c = t_{0.975, 34} = 2.0322445,
    # w = c^2 / 4 = 1.0325044: c * sqrt(w / (34 + w)) / sqrt(35) = 0.0589729.
    block = block_resolution({"nDCG@10": ItemSpread(35, 1.0, drops=np.zeros(35))}, 0.05)
    assert block.epsilon["nDCG@10"] == pytest.approx(0.0589728759)


def test_an_aggregate_that_is_not_a_mean_reads_its_bootstrap_sd() -> None:
    # sqrt(0.05^2 + w (1 / 20)^2), times c = t_{0.975, 19} = 2.0930241, w = c^2 / 4 = 1.0951874:
    # 2.0930241 * sqrt(0.0025 + 0.0027380) = 0.1514801.
    spread = ItemSpread(20, 1.0, bootstrap_sd=0.05)
    assert spread.standard_error() == pytest.approx(math.sqrt(0.0025 + 0.0025))
    block = block_resolution({"F1_micro": spread}, 0.05)
    assert block.epsilon["F1_micro"] == pytest.approx(0.1514801279)


def test_a_block_of_correlated_metrics_shares_one_c() -> None:
    drops = np.array([1.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0])
    items = {
        "MRR@10": ItemSpread(8, 1.0, drops=drops),
        "R@10": ItemSpread(8, 1.0, drops=drops),  # the same drops: correlation 1
        "nDCG@10": ItemSpread(8, 1.0, drops=drops[::-1].copy()),
    }
    block = block_resolution(items, 0.05)
    # MRR and R move together; nDCG's drops are the reverse order (correlation -0.33 -> -0.30):
    # c is above one metric's t_{0.975, 7} and below three independent metrics'.
    assert t_quantile(0.975, 7) < block.c < t_quantile(1 - block_level(0.05, 3) / 2, 7)
    assert block.epsilon["MRR@10"] == block.epsilon["R@10"]
    # Fewer than 2 units: no resolution.
    assert block_resolution({"P@1": ItemSpread(1, 1.0, drops=np.zeros(1))}, 0.05).epsilon == {}


def test_planned_epsilon_and_queries_needed_by_hand() -> None:
    # sd 0.2, R 1, 35 queries, c = t_{0.975, 34}, w = 1.0325044:
    # c * sqrt((34 * 0.04 + w) / (34 + w)) / sqrt(35) = 0.0897703.
    assert planned_epsilon(0.2, 35, 1.0, 2.0322445093) == pytest.approx(0.0897703089)
    needed = queries_needed(0.2, 1.0, 0.05, 0.05)
    assert needed is not None

    def eps(n: int) -> float:
        return planned_epsilon(0.2, n, 1.0, t_quantile(0.975, n - 1))

    # The fewest: it reaches the target and one query fewer does not. 82: c = t_{0.975, 81} =
    # 1.98969, w = 0.98971, c * sqrt((81 * 0.04 + w) / (81 + w)) / sqrt(82) = 0.049906; 81:
    # 1.99006 ... = 0.050294.
    assert eps(needed) <= 0.05 < eps(needed - 1)
    assert needed == 82
    assert queries_needed(0.2, 1.0, 0.0, 0.05) is None
    assert queries_needed(0.2, 1.0, 1e-9, 0.05, limit=1000) is None


def test_an_all_or_nothing_loss_has_the_spread_and_skew_of_its_drops() -> None:
    # Every query at 1 losing its answer with probability q = 0.02 (a true drop of 0.02): the
    # drops are 0 or 1, variance q (1 - q) = 0.0196, third central moment q (1 - q) (1 - 2q).
    sd, m3 = loss_spread(np.ones(12), 0.02) or (0.0, 0.0)
    assert sd == pytest.approx(math.sqrt(0.02 * 0.98))
    assert m3 == pytest.approx(0.02 * 0.98 * 0.96)
    # Values 0.5 and 1: mu_1 0.75, mu_2 0.625, mu_3 0.5625; a drop of 0.15 is q = 0.2:
    # variance 0.2 * 0.625 - 0.15^2 = 0.1025, m3 0.2 * 0.5625 - 3 * 0.04 * 0.75 * 0.625
    # + 2 * 0.15^3 = 0.063.
    sd, m3 = loss_spread(np.array([0.5, 1.0]), 0.15) or (0.0, 0.0)
    assert sd == pytest.approx(math.sqrt(0.1025))
    assert m3 == pytest.approx(0.063)
    # No such loss: the mean is not above the drop, or losing a negative value is a gain.
    assert loss_spread(np.array([0.01, 0.01]), 0.02) is None
    assert loss_spread(np.array([-0.5, 1.0]), 0.02) is None


def test_planned_epsilon_with_skewed_drops_adds_edgeworths_term() -> None:
    # sd 0.14, m3 0.018816, 100 queries, c = 2 (w = 1): s = sqrt((99 * 0.0196 + 1) / 100) =
    # 0.1714759, g = 0.018816 / s^3 = 3.731794, k = g * 9 / (6 * 10) = 0.5597691,
    # epsilon = (2 + k) * s / 10 = 0.0438939.
    s = math.sqrt((99 * 0.0196 + 1) / 100)
    k = 0.018816 / s**3 * 9 / 60
    assert planned_epsilon(0.14, 100, 1.0, 2.0, 0.018816) == pytest.approx((2 + k) * s / 10)
    assert planned_epsilon(0.14, 100, 1.0, 2.0, 0.018816) == pytest.approx(0.0438939, abs=1e-7)
    # The item's epsilon for drops with these moments is the same figure: the plan's formula
    # at the baseline's n is the item's.
    drops = np.array([1.0] * 2 + [0.0] * 98)  # q = 0.02: sd 0.1407, m3 0.0188
    item = ItemSpread(100, 1.0, drops=drops)
    sd, m3 = float(drops.std(ddof=1)), item.third_moment()
    assert planned_epsilon(sd, 100, 1.0, 2.0, m3) == pytest.approx(
        (2.0 + item.skew_term(2.0, 1.0)) * item.standard_error(1.0)
    )


def test_the_queries_planned_are_the_larger_of_a_change_of_spread_and_a_loss() -> None:
    # A baseline at the top of its range (every query at 1) has no spread: alone it would plan
    # for the pseudo-query only, yet losing answers worth tolerance + target = 0.02 has drops
    # of sd 0.14 and skew 6.9. The plan is what that loss needs.
    ones = np.ones(12)
    spread_only = queries_needed(0.0, 1.0, 0.01, 0.05)
    loss = queries_needed(math.sqrt(0.02 * 0.98), 1.0, 0.01, 0.05, m3=0.02 * 0.98 * 0.96)
    assert spread_only is not None and loss is not None and spread_only < loss
    assert planned_queries(ones, 0.0, 1.0, 0.01, 0.05, tolerance=0.01) == loss
    # A baseline of wide spread (half at 1, half at 0; sd 0.5222) needs more for a change of
    # that spread than for the loss (q = 0.04: sd 0.1960, m3 0.0161): the larger stands.
    half = np.array([1.0, 0.0] * 6)
    sd = float(half.std(ddof=1))
    assert planned_queries(half, sd, 1.0, 0.01, 0.05, tolerance=0.01) == queries_needed(
        sd, 1.0, 0.01, 0.05
    )
    # An aggregate that is not a mean (no values): the spread alone.
    assert planned_queries(None, 0.0, 1.0, 0.01, 0.05, tolerance=0.01) == spread_only
