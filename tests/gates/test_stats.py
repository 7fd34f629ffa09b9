"""The paired sign-flip test and Holm's correction, against hand-enumerated flips."""

from __future__ import annotations

import itertools
import math
from math import comb

import pytest

from retrieval_gate.gates.stats import (
    DEFAULT_PERMUTATIONS,
    EXACT_LIMIT,
    MARGIN_EXACT_LIMIT,
    MarginTest,
    detectable_drop,
    fewest_worse,
    margin_test,
    paired_randomisation,
    smallest_margin_p,
)


def test_three_negative_differences_only_the_observed_flip_is_as_low() -> None:
    # diffs -1, -1, -1: of the 2^3 sign patterns only all-negative has a mean <= -1 -> p = 1/8.
    test = paired_randomisation([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert test.p_value == 1 / 8
    assert (test.n, test.mean_difference, test.improved, test.degraded) == (3, -1.0, 0, 3)


def test_zero_differences_are_not_flipped_but_count_in_the_mean() -> None:
    # diffs -1, -1, 0: n = 3, two non-zero -> 4 patterns with means -2/3, 0, 0, 2/3 -> p = 1/4.
    test = paired_randomisation([0.0, 0.0, 0.5], [1.0, 1.0, 0.5])
    assert test.p_value == 1 / 4
    assert test.mean_difference == pytest.approx(-2 / 3)
    assert (test.n, test.improved, test.degraded) == (3, 0, 2)


def test_mixed_differences_in_each_direction() -> None:
    # diffs -0.5, +0.25, n = 2. Flip means: (-0.5+0.25)/2 = -0.125 (observed), (0.5+0.25)/2 =
    # 0.375, (-0.5-0.25)/2 = -0.375, (0.5-0.25)/2 = 0.125.
    current, reference = [0.5, 0.75], [1.0, 0.5]
    less = paired_randomisation(current, reference)
    assert less.mean_difference == -0.125
    assert less.p_value == 2 / 4  # -0.125 and -0.375 are <= -0.125
    assert (less.improved, less.degraded) == (1, 1)
    # >= -0.125: -0.125, 0.375, 0.125.
    assert paired_randomisation(current, reference, alternative="greater").p_value == 3 / 4
    # |mean| >= 0.125: all four.
    assert paired_randomisation(current, reference, alternative="two-sided").p_value == 1.0


def test_greater_is_the_mirror_of_less() -> None:
    # diffs +1, +1, +1, +1: only all-positive reaches 1 -> p = 1/16 for "greater", 1 for "less".
    assert paired_randomisation([1.0] * 4, [0.0] * 4, alternative="greater").p_value == 1 / 16
    assert paired_randomisation([1.0] * 4, [0.0] * 4, alternative="less").p_value == 1.0
    # Two-sided counts both all-positive and all-negative: 2/16.
    assert paired_randomisation([1.0] * 4, [0.0] * 4, alternative="two-sided").p_value == 2 / 16


def test_observed_flip_counts_itself_despite_float_summation_order() -> None:
    # 0.3 - 0.4, 0.1 - 0.3 and 0.6 - 0.9 are not the decimal values they look like; the
    # all-negative pattern must still tie with the observed mean (p = 1/8, not 0).
    test = paired_randomisation([0.3, 0.1, 0.6], [0.4, 0.3, 0.9])
    assert test.p_value == 1 / 8


def test_identical_inputs_give_p_one() -> None:
    test = paired_randomisation([0.2, 0.7, 1.0], [0.2, 0.7, 1.0])
    assert (test.n, test.mean_difference, test.p_value, test.improved, test.degraded) == (
        3,
        0.0,
        1.0,
        0,
        0,
    )


def test_no_pairs_give_p_one() -> None:
    assert paired_randomisation([], []) == paired_randomisation([], [], alternative="greater")
    test = paired_randomisation([], [])
    assert (test.n, test.mean_difference, test.p_value) == (0, 0.0, 1.0)


def test_unequal_lengths_are_an_error() -> None:
    with pytest.raises(ValueError, match=r"differ in length: \(2,\) vs \(3,\)"):
        paired_randomisation([1.0, 0.0], [1.0, 0.0, 1.0])


def test_unknown_alternative_is_an_error() -> None:
    with pytest.raises(ValueError, match="alternative must be"):
        paired_randomisation([0.0], [1.0], alternative="lesser")


def test_exact_up_to_sixteen_non_zero_differences_then_sampled() -> None:
    assert EXACT_LIMIT == 16
    # 16 differences of -1: exact, only the observed pattern -> 2^-16.
    assert paired_randomisation([0.0] * 16, [1.0] * 16).p_value == 2**-16
    # 17: sampled. A sample all-negative has chance 2^-17, so none of 10,000 is, and the
    # observed labelling counted once gives (0 + 1) / (10,000 + 1).
    assert paired_randomisation([0.0] * 17, [1.0] * 17).p_value == 1 / (DEFAULT_PERMUTATIONS + 1)
    assert paired_randomisation([0.0] * 17, [1.0] * 17, permutations=99).p_value == 1 / 100


def test_zeros_do_not_push_a_suite_into_the_sampled_path() -> None:
    # 40 pairs, 16 of them different: still exact.
    test = paired_randomisation([0.0] * 16 + [1.0] * 24, [1.0] * 40)
    assert test.p_value == 2**-16
    assert test.mean_difference == -16 / 40


def _binomial_tail(n: int, at_most: int) -> float:
    return float(sum(comb(n, i) for i in range(at_most + 1))) / float(2**n)


def test_sampled_path_is_seeded_and_close_to_the_exact_value() -> None:
    # 20 differences of -1 and 10 of +1: the flipped sum is 2B - 30 with B ~ Binomial(30, 1/2)
    # the number of +1s, the observed sum is -10, so the exact p is P(B <= 10) = 0.0494.
    current = [0.0] * 20 + [1.0] * 10
    reference = [1.0] * 20 + [0.0] * 10
    exact = _binomial_tail(30, 10)
    assert exact == pytest.approx(0.049369, abs=1e-6)
    by_seed = [paired_randomisation(current, reference, seed=s).p_value for s in range(3)]
    # Same seed, same p, call after call.
    assert by_seed[0] == paired_randomisation(current, reference, seed=0).p_value
    # Other seeds move it by sampling error only: sd = sqrt(0.049 * 0.951 / 10,000) = 0.0022.
    for p in by_seed:
        assert abs(p - exact) < 0.01
    assert len(set(by_seed)) > 1
    # A p-value from 10,000 samples with the +1 correction is a multiple of 1/10,001.
    assert by_seed[0] * 10_001 == pytest.approx(round(by_seed[0] * 10_001))


def test_sampled_path_other_alternatives() -> None:
    current = [0.0] * 20 + [1.0] * 10
    reference = [1.0] * 20 + [0.0] * 10
    # P(B >= 10) for "greater" is 1 - P(B <= 9) = 0.979; two-sided is P(|2B - 30| >= 10) =
    # 2 * P(B <= 10) = 0.0987.
    greater = paired_randomisation(current, reference, alternative="greater").p_value
    assert greater == pytest.approx(1 - _binomial_tail(30, 9), abs=0.01)
    both = paired_randomisation(current, reference, alternative="two-sided").p_value
    assert both == pytest.approx(2 * _binomial_tail(30, 10), abs=0.015)


def test_large_suite_is_sampled_in_chunks_with_the_same_answer() -> None:
    # 2,000,000 // m samples per chunk: with m = 400,000 each chunk is 5 samples, so 30 samples
    # take 6 chunks. All differences -1: no sample reaches the observed mean -> (0 + 1) / (30 + 1).
    n = 400_000
    test = paired_randomisation([0.0] * n, [1.0] * n, permutations=30)
    assert test.p_value == 1 / 31
    assert test.degraded == n


# -- the margin test: x_i = (now_i - then_i) + tolerance -------------------------------------------


def test_margin_test_enumerates_the_eight_sign_patterns_of_three_queries() -> None:
    # d = [-0.5, 0, +0.1], tolerance 0.1: x = [-0.4, 0.1, 0.2], T = -0.1. Signs on (x1, x2, x3):
    # +++ -0.1 | ++- -0.5 | +-+ -0.3 | +-- -0.7 | -++ 0.7 | -+- 0.3 | --+ 0.5 | --- 0.1
    # sums <= -0.1: 4 of 8; sums >= -0.1: 5 of 8 (T itself counts on both sides).
    test = margin_test([0.5, 1.0, 0.3], [1.0, 1.0, 0.2], 0.1)
    assert (test.p_worse, test.p_within) == (4 / 8, 5 / 8)
    assert (test.n, test.improved, test.degraded, test.exact) == (3, 1, 1, True)
    assert test.mean_difference == pytest.approx(-0.4 / 3)


def test_margin_test_unchanged_queries_are_evidence_of_being_within_the_tolerance() -> None:
    # Nothing changed, tolerance 0.05: every x = +0.05, only the all-+ pattern reaches T: 2^-4.
    test = margin_test([0.5] * 4, [0.5] * 4, 0.05)
    assert (test.p_within, test.p_worse) == (1 / 16, 1.0)
    # Tolerance 0: every x is 0, no sign carries evidence either way.
    assert margin_test([0.5] * 4, [0.5] * 4, 0.0).p_within == 1.0
    assert margin_test([], [], 0.1) == MarginTest(0, 0.0, 1.0, 1.0, 0, 0, True)


def test_margin_test_beyond_the_exact_limit_is_the_normal_approximation() -> None:
    # 16 queries each 1 -> 0, tolerance 0: x = -1 sixteen times, z = -16 / sqrt(16) = -4.
    test = margin_test([0.0] * 16, [1.0] * 16, 0.0)
    assert test.exact is False
    assert test.p_worse == pytest.approx(0.5 * math.erfc(4 / math.sqrt(2)))  # Phi(-4) = 3.17e-5
    assert test.p_worse == pytest.approx(3.167e-5, rel=1e-3)
    assert test.p_within == pytest.approx(1 - 3.167e-5)
    # Deterministic: no seed, the same p every time.
    assert margin_test([0.0] * 16, [1.0] * 16, 0.0) == test


def test_margin_p_is_monotone_in_the_evidence_across_the_exact_limit() -> None:
    assert MARGIN_EXACT_LIMIT == 14
    # n all-worse queries: 2^-n exactly up to 14, Phi(-sqrt(n)) beyond; 2^-14 = 6.1e-5 >
    # Phi(-sqrt(15)) = 5.4e-5, so p never grows as a query is added.
    all_worse = [margin_test([0.0] * n, [1.0] * n, 0.0).p_worse for n in range(1, 41)]
    assert all(b < a for a, b in itertools.pairwise(all_worse))
    assert all_worse[13] == 2**-14
    assert all_worse[16] < all_worse[15]  # 17 worse queries give a smaller p than 16
    assert [smallest_margin_p(n) for n in range(1, 41)] == pytest.approx(all_worse)
    assert smallest_margin_p(0) == 1.0


def test_detectable_drop_by_hand() -> None:
    # Values 0, 1, 0, 1: sample sd sqrt(4 * 0.25 / 3) = 0.57735, sd of differences x sqrt(2) =
    # 0.816497; z_0.95 + z_0.8 = 1.644854 + 0.841621 = 2.486475; / sqrt(4) = 2:
    # 0.05 + 2.486475 * 0.816497 / 2 = 0.05 + 1.015099 = 1.065099.
    assert detectable_drop([0.0, 1.0, 0.0, 1.0], 0.05, 0.05) == pytest.approx(1.065099, abs=1e-6)
    assert detectable_drop([1.0] * 10, 0.02, 0.05) == 0.02  # no spread: the tolerance itself
    assert detectable_drop([1.0], 0.02, 0.05) is None


def test_fewest_worse_by_hand() -> None:
    # Twelve queries at 1, tolerance 0.05, level 0.05 / 3: m falling to 0 give x = -0.95 m times
    # and +0.05 otherwise; flipping one -0.95 moves the sum by 1.9, more than all the 0.05s can
    # (at most 1.1), so p = 2^-m: 2^-5 = 0.031 > 0.0167, 2^-6 = 0.0156 <= 0.0167.
    assert fewest_worse([1.0] * 12, 0.05, 0.05 / 3) == 6
    assert fewest_worse([1.0] * 3, 0.05, 0.05) is None  # 2^-3 = 0.125 at best
