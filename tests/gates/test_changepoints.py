"""gates/changepoints.py: a history's steps and slides, from a piecewise model of levels and
lines chosen by a penalised least-squares criterion; deterministic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval_gate.gates.changepoints import noise, penalties, shape

#: The history project's tolerance (tests/integration/history_project.py): 0.02 / 0.6.
TOLERANCE = 0.02 / 0.6
FLOOR = TOLERANCE / 4  # the least noise the keeper assumes


def test_a_steady_slide_of_ten_merges_is_one_slide_since_its_first_record() -> None:
    # Ten merges each losing 0.6 x the tolerance (0.02): the first record and ten more.
    values = [1.0 - 0.02 * k for k in range(11)]
    found = shape(values, floor=FLOOR)
    assert found.changes == ()
    (slide,) = found.slides
    assert (slide.start, slide.end, slide.steps) == (0, 10, 10)
    assert slide.slope == pytest.approx(-0.02)
    assert (slide.first, slide.last) == pytest.approx((1.0, 0.8))


def test_an_uneven_slide_is_still_one_slide_with_its_mean_slope() -> None:
    # Each merge loses 0.6 x the tolerance give or take 40 % (0.012 to 0.028), as real merges do.
    drops = [0.020, 0.012, 0.028, 0.016, 0.024, 0.020, 0.028, 0.012, 0.020, 0.020]
    values = np.r_[0.9, 0.9 - np.cumsum(drops)]
    found = shape(values, floor=FLOOR)
    assert found.changes == ()
    (slide,) = found.slides
    assert (slide.start, slide.end) == (0, 10)
    # The least-squares slope: sum (t - 5)(x_t - mean) / sum (t - 5)^2, near the mean drop 0.02.
    t = np.arange(11)
    expected = float(np.sum((t - 5) * (values - values.mean())) / np.sum((t - 5) ** 2))
    assert slide.slope == pytest.approx(expected)
    assert -0.022 < slide.slope < -0.018


def test_a_slide_is_named_alike_at_every_length_of_its_history() -> None:
    # Each run of the gate sees the history one merge longer: from the fourth merge on, each
    # names the same slide, from the same first record, at the same slope.
    values = [1.0 - 0.02 * k for k in range(11)]
    for length in range(5, 12):
        (slide,) = shape(values[:length], floor=FLOOR).slides
        assert (slide.start, slide.end) == (0, length - 1), length
        assert slide.slope == pytest.approx(-0.02), length


def test_the_same_values_give_the_same_shape_whatever_ran_before() -> None:
    # Nothing is drawn at random: no seed to pass, and numpy's global state does not matter.
    rng = np.random.default_rng(3)
    values = np.r_[rng.normal(0.7, 0.01, 12), 0.7 - 0.01 * np.arange(1, 13)]
    first = shape(values, floor=FLOOR)
    np.random.seed(99)
    np.random.random(1000)
    assert shape(values.copy(), floor=FLOOR) == first
    assert shape(list(values), floor=FLOOR) == first


def test_a_level_then_a_slide_starts_the_slide_at_the_levels_last_record() -> None:
    # Five merges at 0.9, then ten each losing 0.02: the slide began after index 4, where the
    # level's last value is the line's first.
    values = [0.9] * 5 + [0.9 - 0.02 * k for k in range(1, 11)]
    found = shape(values, floor=FLOOR)
    assert found.changes == ()
    (slide,) = found.slides
    assert (slide.start, slide.end, slide.steps) == (4, 14, 10)
    assert slide.first == pytest.approx(0.9)


def test_a_slide_that_ended_runs_into_the_level_it_reached() -> None:
    # 0.9 for six records, eight merges losing 0.02 each, then 0.74 for six: the slide's last
    # drop lands on index 13, the first record of the new level.
    values = [0.9] * 6 + [0.9 - 0.02 * k for k in range(1, 9)] + [0.74] * 6
    found = shape(values, floor=FLOOR)
    assert found.changes == ()
    (slide,) = found.slides
    assert (slide.start, slide.end) == (5, 13)
    assert (slide.first, slide.last) == pytest.approx((0.9, 0.74))


def test_a_one_step_drop_is_one_change_point_at_its_commit() -> None:
    # Eight records at 0.9, then seven at 0.8: one step, at index 8, no slide.
    found = shape([0.9] * 8 + [0.8] * 7, floor=FLOOR)
    assert found.slides == ()
    (change,) = found.changes
    assert change.index == 8
    assert (change.before, change.after) == pytest.approx((0.9, 0.8))


def test_a_step_in_a_wobbling_history_is_one_change_point() -> None:
    # 0.9 then 0.8 from index 15, with a wobble of +-0.01 (the history tests' pattern).
    wobble = [0.01, -0.01, 0.0] * 10
    values = [(0.9 if i < 15 else 0.8) + wobble[i] for i in range(30)]
    found = shape(values, floor=FLOOR)
    assert found.slides == ()
    (change,) = found.changes
    assert change.index == 15
    assert change.shift == pytest.approx(-0.1, abs=0.005)


def test_a_step_of_one_tolerance_in_a_history_without_noise_is_named() -> None:
    found = shape([0.9] * 8 + [0.9 - TOLERANCE] * 7, floor=FLOOR)
    assert [c.index for c in found.changes] == [8] and found.slides == ()


def test_a_step_inside_a_slide_is_a_step_between_two_slides() -> None:
    values = [0.9 - 0.01 * k for k in range(10)] + [0.8 - 0.01 * k for k in range(10, 20)]
    found = shape(values, floor=FLOOR)
    (change,) = found.changes
    assert change.index == 10
    # Beyond the slide's own 0.01 per record, the step is 0.1: 0.81 -> 0.70.
    assert (change.before, change.after) == pytest.approx((0.81, 0.70))
    assert [(s.start, s.end) for s in found.slides] == [(0, 9), (10, 19)]
    assert all(s.slope == pytest.approx(-0.01) for s in found.slides)


@pytest.mark.parametrize("seed", range(10))
def test_a_flat_noisy_history_names_nothing(seed: int) -> None:
    values = np.random.default_rng(10_000 + seed).normal(0.7, 0.01, 30)
    found = shape(values, floor=FLOOR)
    assert (found.changes, found.slides) == ((), ())


def test_a_flat_history_of_coarse_values_names_nothing() -> None:
    # P@1 over 50 queries of an unchanged nondeterministic system: 40 to 42 right, in steps of 0.02.
    values = np.random.default_rng(4).binomial(50, 0.82, 30) / 50
    found = shape(values, floor=FLOOR)
    assert (found.changes, found.slides) == ((), ())


def test_identical_values_name_nothing() -> None:
    found = shape([0.7] * 30, floor=FLOOR)
    assert (found.changes, found.slides, found.sigma) == ((), (), 0.0)
    assert shape([0.7, 0.6, 0.5]).slides == ()  # three points: no slide has room


def test_a_slide_is_named_once_its_fit_beats_a_level_by_the_slope_penalty() -> None:
    # Ten records on a line of slope b with no noise, sigma = the floor 1 (known: the penalties
    # without their part for a sigma read from the values). A level leaves RSS = b^2 * sum
    # (t - 4.5)^2 = 82.5 b^2; a line leaves 0 and costs the slope penalty 7.5 + 0.75 ln 10 =
    # 9.227; two levels of five leave 2 * 10 b^2 and cost a cut, 11 + 1.5 ln 10 = 14.454, more
    # than the line at every b. So a slide from b^2 > 9.227 / 82.5, b > 0.3344.
    step_penalty, slope_penalty = penalties(10, known=True)
    assert step_penalty == pytest.approx(11 + 1.5 * math.log(10))
    assert slope_penalty == pytest.approx(7.5 + 0.75 * math.log(10))
    assert math.sqrt(slope_penalty / 82.5) == pytest.approx(0.3344, abs=1e-4)
    below = shape([0.33 * t for t in range(10)], floor=1.0)
    above = shape([0.34 * t for t in range(10)], floor=1.0)
    assert (below.changes, below.slides, below.sigma) == ((), (), 1.0)
    assert above.changes == () and [s.slope for s in above.slides] == [pytest.approx(0.34)]
    # Read from the values, sigma is loose: each penalty carries 60 / n more.
    assert penalties(10) == pytest.approx((step_penalty + 6, slope_penalty + 6))


def test_the_first_guess_of_the_noise_by_hand() -> None:
    # Second differences of 0, 1, 2, 4: 0 and 1; their median 0.5; 1.4826 * 0.5 / sqrt(6).
    assert noise([0.0, 1.0, 2.0, 4.0]) == pytest.approx(1.4826 * 0.5 / math.sqrt(6))
    # A level turning into a slide is no noise: its second differences are 0 but one.
    assert noise([0.9, 0.9, 0.9, 0.9, 0.88, 0.86, 0.84]) == pytest.approx(0.0, abs=1e-12)


def test_sigma_is_the_residual_sd_of_the_fit_it_chose() -> None:
    # Independent noise, nothing named: sigma is the sample standard deviation (n - 1).
    values = np.random.default_rng(10_001).normal(0.7, 0.01, 30)
    found = shape(values)
    assert (found.changes, found.slides) == ((), ())
    assert found.sigma == pytest.approx(float(np.std(values, ddof=1)))


def test_the_floor_holds_small_changes_of_a_noiseless_history_back() -> None:
    # A step of 0.2 x the tolerance in values that repeat exactly: sigma is the floor (a
    # quarter of the tolerance), and 0.2 tolerance over 8 and 7 records does not pay its cut:
    # (0.2 / 0.25)^2 * 8 * 7 / 15 = 2.39 < 11 + 3 ln 15 + 2 = 21.1.
    found = shape([0.9] * 8 + [0.9 - 0.2 * TOLERANCE] * 7, floor=FLOOR)
    assert (found.changes, found.slides) == ((), ())
    assert found.sigma == pytest.approx(FLOOR)
