"""Steps and slides in a history of metric values (docs/verdicts.md, "Steps and slides in a
history"): which merge changed a metric at once (a step: a change point at its commit), which
merges shared a steady slide (its slope per merge and where it began), and nothing for a history
that only wobbles.

The model: the series x_0..x_{n-1} is cut into segments, each either a **level** (a constant,
at least ``MIN_LEVEL`` points) or a **slide** (a straight line, at least ``MIN_SLIDE`` points),
fitted by least squares. Of every such segmentation the one chosen minimises

    C = RSS / sigma^2 + step_penalty * (segments - 1) + slope_penalty * (slides)

found exactly by dynamic programming over all of them (optimal partitioning: O(n^2) segment
fits, each O(1) from prefix sums). The penalties (``penalties``) are in units of sigma^2 and
grow slowly with n: named, a step must take more than its penalty off the squared residuals
(about 4 sigma, root-sum-square, over 10 to 1000 records), a slope more than its own (about
3.5 sigma).

``sigma``, the noise from one record to the next, is read from the series: first a robust guess
from its second differences (``noise``: they are 0 along any level or line, so neither a slide
nor a level moves the guess), then the residual standard deviation of the fit that guess
chooses, refitted until the fit repeats. It is never below ``floor``, the caller's: a quarter of
the metric's tolerance, so that a deterministic history, whose values repeat exactly between
changes, names no change much smaller than the tolerance, and reads a slide whose merges differ
a little as one slide. A sigma read from few values is loose, and the penalties carry a part
for it; a sigma that is the floor is not read, and they do not. Chosen so that a history of
independent noise, of any sigma, names a step or a slide in under 1 % of histories of 10 to
1000 records (``benchmarks/bench_changepoints.py`` measures it; docs/verdicts.md has the
figures).

A segmentation that fits as well with fewer parameters wins; at equal cost the earlier cut wins
(costs are compared rounded to ``_DIGITS`` digits in units of sigma^2), so that a level that
turns into a slide starts the slide at the level's last point. Nothing is random: the same
values and floor give the same steps and slides, in any process, on any run, under any seed.

What the segments say (``Shape``):

* a slide segment is a ``Slide``: its slope per record, its first and last index and its fitted
  values there;
* a boundary between two levels is a ``ChangePoint`` (a step) at the first index of the new
  level, with the levels before and after;
* a boundary into or out of a slide is a step too only when the fitted line jumps there by more
  than one more step of the slide would, beyond sqrt(step_penalty) standard errors of the two
  fitted values; otherwise the slide began (or ended) there, continuously, and only the slide
  says so.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The fewest points of a level, and of a slide (a line through three points is hardly a trend).
MIN_LEVEL = 3
MIN_SLIDE = 4
#: The least noise assumed, as a share of the metric's regression tolerance (the caller's floor).
NOISE_FLOOR = 0.25
#: The most fits sigma is refined over (``shape``).
ROUNDS = 8
#: The median absolute deviation of a normal sample times this is its standard deviation.
MAD_TO_SD = 1.4826
#: Costs are compared rounded to this many decimals (in units of sigma^2): fits equal but for
#: rounding are ties, broken by the rule above, not by the last bit of a prefix sum.
_DIGITS = 9


def penalties(n: int, *, known: bool = False) -> tuple[float, float]:
    """(step penalty, slope penalty) for a history of n points, in units of sigma^2: a cut costs
    the first, a slope the second. Each has a part for sigma read from the values, which few
    values read loosely (``60 / n``); ``known``: sigma is the floor, not read, and the part is
    dropped. Calibrated against independent noise so that at most 1 % of histories of 10 to
    1000 points name anything (benchmarks/bench_changepoints.py)."""
    log_n = math.log(max(n, 2))
    loose = 0.0 if known else 60.0 / n
    return 11.0 + 1.5 * log_n + loose, 7.5 + 0.75 * log_n + loose


@dataclass(frozen=True)
class ChangePoint:
    """A step: the first index of the new level, the fitted values just before and at it."""

    index: int
    before: float
    after: float

    @property
    def shift(self) -> float:
        return self.after - self.before


@dataclass(frozen=True)
class Slide:
    """A steady slide (or climb): from index ``start`` to ``end`` (inclusive), ``slope`` per
    record, the fitted line's values at both ends."""

    start: int
    end: int
    slope: float
    first: float
    last: float

    @property
    def steps(self) -> int:
        """The records it spans after its first: the merges that shared it."""
        return self.end - self.start


@dataclass(frozen=True)
class Segment:
    """A fitted piece: indices [start, end), a level or a slide, its fitted value at start and
    its slope (0 for a level)."""

    start: int
    end: int
    slide: bool
    intercept: float
    slope: float = 0.0

    def at(self, index: int) -> float:
        return self.intercept + self.slope * (index - self.start)


@dataclass(frozen=True)
class Shape:
    """A history's segments, and what they say: its steps and its slides; ``sigma`` the noise
    the fit assumed."""

    segments: tuple[Segment, ...]
    changes: tuple[ChangePoint, ...]
    slides: tuple[Slide, ...]
    sigma: float


def noise(values: Sequence[float] | np.ndarray) -> float:
    """A first, robust guess of sigma from the second differences d2 = x_{i+1} - 2 x_i +
    x_{i-1} (0 along any level or line, whatever its slope; a step makes two of them, the start
    of a slide one): 1.4826 median |d2| / sqrt(6) (d2 of independent noise has variance
    6 sigma^2); 0 for fewer than three points."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 3:
        return 0.0
    d2 = np.diff(x, 2)
    return float(MAD_TO_SD * np.median(np.abs(d2)) / math.sqrt(6.0))


def shape(values: Sequence[float] | np.ndarray, *, floor: float = 0.0) -> Shape:
    """The steps and slides of ``values`` (module docstring); ``floor``: the least noise assumed
    (0: the series' own, or a thousandth of its range when it has none, as a noiseless slide).

    sigma is the residual standard deviation of the fit it chooses (RSS / (n - coefficients)):
    from the robust guess (:func:`noise`), each fit's residuals give the next sigma, until the
    fit repeats (at most ``ROUNDS`` fits)."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    spread = float(np.ptp(x)) if n else 0.0
    if n < MIN_LEVEL or spread == 0.0:
        flat = (Segment(0, n, False, float(x[0])),) if n else ()
        return Shape(flat, (), (), 0.0)
    least = max(floor, 1e-3 * spread)
    sigma = max(noise(x), least)
    segments = _segments(x, sigma, sigma == least)
    for _ in range(ROUNDS - 1):
        following = max(_residual_sd(x, segments), least)
        again = _segments(x, following, following == least)
        sigma = following
        if again == segments:
            break
        segments = again
    steps, slides = _read(x, segments, sigma, penalties(n, known=sigma == least)[0])
    return Shape(segments, steps, slides, sigma)


def _residual_sd(x: np.ndarray, segments: Sequence[Segment]) -> float:
    fitted = np.concatenate([[s.at(i) for i in range(s.start, s.end)] for s in segments])
    coefficients = sum(2 if s.slide else 1 for s in segments)
    free = len(x) - coefficients
    if free <= 0:
        return 0.0
    return float(np.sqrt(np.sum((x - fitted) ** 2) / free))


def _segments(x: np.ndarray, sigma: float, known: bool) -> tuple[Segment, ...]:
    """The segmentation of least cost (module docstring), by optimal partitioning: best[j], the
    least cost of the first j points, is the least over the start i of the last segment of
    best[i] + a cut + that segment's cost, each segment's misfit from prefix sums in O(1), all
    starts at once. O(n^2): about 0.1 s at 1,000 records (docs/performance.md)."""
    n = len(x)
    step_penalty, slope_penalty = penalties(n, known=known)
    z = (x - float(np.median(x))) / sigma  # centred and scaled: small prefix sums, costs in sigma^2
    t = np.arange(n, dtype=np.float64)
    zero = np.zeros(1)
    s_z = np.concatenate((zero, np.cumsum(z)))
    s_zz = np.concatenate((zero, np.cumsum(z * z)))
    s_t = np.concatenate((zero, np.cumsum(t)))
    s_tt = np.concatenate((zero, np.cumsum(t * t)))
    s_tz = np.concatenate((zero, np.cumsum(t * z)))
    best = np.full(n + 1, np.inf)
    best[0] = -step_penalty  # the first segment is no cut
    choice: list[tuple[int, bool]] = [(0, False)] * (n + 1)  # (start of the last segment, slide)
    for j in range(MIN_LEVEL, n + 1):
        i = np.arange(0, j - MIN_LEVEL + 1)
        m = (j - i).astype(np.float64)
        sum_z = s_z[j] - s_z[i]
        syy = np.maximum((s_zz[j] - s_zz[i]) - sum_z * sum_z / m, 0.0)
        level = np.round(best[i] + step_penalty + syy, _DIGITS)
        line = np.full(len(i), np.inf)
        ok = m >= MIN_SLIDE
        if ok.any():
            mm, sz, sy = m[ok], sum_z[ok], syy[ok]
            sum_t = s_t[j] - s_t[i[ok]]
            stt = (s_tt[j] - s_tt[i[ok]]) - sum_t * sum_t / mm
            sty = (s_tz[j] - s_tz[i[ok]]) - sum_t * sz / mm
            rss = np.maximum(sy - sty * sty / stt, 0.0)
            line[ok] = np.round(best[i[ok]] + step_penalty + slope_penalty + rss, _DIGITS)
        # The cheaper of the two at each start; a level at a tie (fewer parameters), then the
        # earliest start (np.argmin's first minimum).
        slide = line < level
        cost = np.where(slide, line, level)
        k = int(np.argmin(cost))
        best[j] = cost[k]
        choice[j] = (int(i[k]), bool(slide[k]))
    bounds = []
    j = n
    while j > 0:
        start, slide = choice[j]
        bounds.append((start, j, slide))
        j = start
    out = []
    for start, end, slide in reversed(bounds):
        piece = x[start:end]
        if slide:
            slope, intercept = np.polyfit(np.arange(len(piece), dtype=np.float64), piece, 1)
            out.append(Segment(start, end, True, float(intercept), float(slope)))
        else:
            out.append(Segment(start, end, False, float(piece.mean())))
    return tuple(out)


def _read(
    x: np.ndarray, segments: Sequence[Segment], sigma: float, step_penalty: float
) -> tuple[tuple[ChangePoint, ...], tuple[Slide, ...]]:
    """What the segments say: the boundaries that are steps, and each slide from where it began
    to where it ended (module docstring)."""
    steps = []
    hinges: dict[int, int] = {}  # boundary (first index of the right segment) -> its hinge
    for left, right in itertools.pairwise(segments):
        s = right.start
        if left.slide or right.slide:
            rss, hinge = _join(x, left, right)
            apart = _rss(x, left) + _rss(x, right)
            if round((rss - apart) / sigma**2, _DIGITS) <= step_penalty:
                hinges[s] = hinge  # joined without a step as well as the cut pays for
                continue
        steps.append(ChangePoint(s, left.at(s - 1), right.at(s)))
    slides = []
    for k, segment in enumerate(segments):
        if not segment.slide:
            continue
        first = hinges.get(segment.start, segment.start)
        after = segments[k + 1].start if k + 1 < len(segments) else None
        last = hinges.get(after, segment.end - 1) if after is not None else segment.end - 1
        slides.append(Slide(first, last, segment.slope, segment.at(first), segment.at(last)))
    return tuple(steps), tuple(slides)


def _rss(x: np.ndarray, segment: Segment) -> float:
    fitted = [segment.at(i) for i in range(segment.start, segment.end)]
    return float(np.sum((x[segment.start : segment.end] - fitted) ** 2))


def _join(x: np.ndarray, left: Segment, right: Segment) -> tuple[float, int]:
    """The best continuous fit of two neighbours, one of them a slide: a level and a line, a
    line and a level, or two lines, meeting at a hinge h (the level's last point, the point where
    the slope changes), each side keeping its fewest points. Its RSS and h (the earliest at a
    tie)."""
    lo, hi = left.start, right.end
    t = np.arange(lo, hi, dtype=np.float64)
    y = x[lo:hi]
    best, where = math.inf, right.start
    first = lo + (MIN_SLIDE if left.slide else MIN_LEVEL) - 1
    last = hi - (MIN_SLIDE if right.slide else MIN_LEVEL)
    for h in range(first, last + 1):
        columns = [np.ones_like(t)]
        if left.slide:
            columns.append(np.minimum(t - h, 0.0))
        if right.slide:
            columns.append(np.maximum(t - h, 0.0))
        design = np.column_stack(columns)
        coefficients = np.linalg.lstsq(design, y, rcond=None)[0]
        rss = float(np.sum((y - design @ coefficients) ** 2))
        if rss < best:
            best, where = rss, h
    return best, where
