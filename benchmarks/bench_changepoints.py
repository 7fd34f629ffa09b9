"""False alarms and detection of the trend reading (gates/changepoints.py): steps, slides, and
nothing for a history that only wobbles.

False alarms (A/A): histories of an unchanged system measured with noise, N(0.7, 0.01) from
record to record, of 10 to 1000 records, and coarse values (P@1 over 50 queries, Binomial(50,
0.8) / 50); a history naming any step or slide is a false alarm. No floor: sigma is read from
the values alone, so the figures hold for any noise level. With the keeper's floor and noise as
large as it, sigma is often the floor and its penalties the known ones: rows of their own.

Detection, in noise (N(0.7, 0.01), 30 records):

* a step of 2, 3 or 5 sd at record 15: detected when exactly one change point is named, within
  +-1 of 15, and no slide;
* a slide of 0.25, 0.5 or 1 sd per merge over the last 10 merges, after a level of 20 records:
  detected when exactly one slide is named, reaching today, starting within +-2 of record 19
  (the level's last), and no change point; "alike" when, in addition, the two runs before
  (the history one and two merges shorter) named one slide from the same record ("within +-1":
  from a record at most one away).

Detection without noise (values that repeat exactly, as a deterministic system gives; the
keeper's floor, a quarter of the tolerance 0.0333):

* the issue's slide: a level of 5 records, then ten merges each losing 0.6 x the tolerance
  +-50 % (uniform): one slide, from the level's last record (+-1), no step, at every run from
  the fourth merge of the slide on (the history growing by one merge a run); and of those, the
  histories whose seven runs all named the same record;
* a step of one tolerance at record 15 of 30: one change point, at 15.

    python benchmarks/bench_changepoints.py [--histories 1000]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from retrieval_gate.gates.changepoints import Shape, shape

SD = 0.01
TOLERANCE = 0.02 / 0.6
FLOOR = TOLERANCE / 4


def _false_alarms(
    histories: int, draw: Callable[[np.random.Generator], np.ndarray], floor: float = 0.0
) -> int:
    named = 0
    for i in range(histories):
        found = shape(draw(np.random.default_rng(10_000 + i)), floor=floor)
        named += bool(found.changes or found.slides)
    return named


def _normal(sd: float, length: int) -> Callable[[np.random.Generator], np.ndarray]:
    def draw(rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.7, sd, length)

    return draw


def _one_step(found: Shape, at: int) -> bool:
    return not found.slides and len(found.changes) == 1 and abs(found.changes[0].index - at) <= 1


def _one_slide(found: Shape, start: int, end: int, slack: int) -> bool:
    return (
        not found.changes
        and len(found.slides) == 1
        and found.slides[0].end == end
        and abs(found.slides[0].start - start) <= slack
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--histories", type=int, default=1000, help="per row (default 1000)")
    args = parser.parse_args()
    histories = args.histories
    print("| A/A history | records | histories | false alarms | rate |")
    print("|---|---:|---:|---:|---:|")
    for length in (10, 30, 100, 300, 1000):
        count = histories if length <= 100 else max(100, histories // (5 if length == 300 else 10))
        named = _false_alarms(count, _normal(SD, length))
        print(f"| N(0.7, 0.01) | {length} | {count} | {named} | {named / count:.2%} |")
    named = _false_alarms(histories, lambda rng: rng.binomial(50, 0.8, 30) / 50)
    print(f"| P@1 of 50 queries | 30 | {histories} | {named} | {named / histories:.2%} |")
    for length in (10, 30):
        # Noise as large as the floor: sigma is often the floor, its penalties the known ones.
        named = _false_alarms(histories, _normal(FLOOR, length), floor=FLOOR)
        rate = named / histories
        print(
            f"| N(0.7, floor), floor tolerance / 4 | {length} | {histories} | {named} | {rate:.2%} |"
        )

    print()
    print(
        "| in noise (sd 0.01, 30 records) | histories | named as such | and alike, 3 runs | "
        "within +-1, 3 runs |"
    )
    print("|---|---:|---:|---:|---:|")
    for size in (2, 3, 5):
        hits = 0
        for i in range(histories):
            values = np.random.default_rng(20_000 + i).normal(0.7, SD, 30)
            values[15:] -= size * SD
            hits += _one_step(shape(values), 15)
        print(f"| a step of {size} sd at record 15 | {histories} | {hits} | | |")
    for slope in (0.25, 0.5, 1.0):
        hits = alike = near = 0
        for i in range(histories):
            values = np.random.default_rng(30_000 + i).normal(0.7, SD, 30)
            values[20:] -= slope * SD * np.arange(1, 11)
            found = shape(values)
            hit = _one_slide(found, 19, 29, 2)
            hits += hit
            if hit:
                start = found.slides[0].start
                before = [shape(values[:n]) for n in (28, 29)]
                alike += all(
                    _one_slide(b, start, n - 1, 0) for b, n in zip(before, (28, 29), strict=True)
                )
                near += all(
                    _one_slide(b, start, n - 1, 1) for b, n in zip(before, (28, 29), strict=True)
                )
        print(
            f"| a slide of {slope:g} sd per merge over the last 10 merges | {histories} | "
            f"{hits} | {alike} | {near} |"
        )

    print()
    print("| without noise (floor: tolerance / 4) | histories | named as such | from one record |")
    print("|---|---:|---:|---:|")
    hits = same = 0
    for i in range(histories):
        rng = np.random.default_rng(40_000 + i)
        drops = 0.6 * TOLERANCE * rng.uniform(0.5, 1.5, 10)
        values = np.r_[np.full(5, 0.9), 0.9 - np.cumsum(drops)]
        runs = [shape(values[:n], floor=FLOOR) for n in range(9, 16)]
        if all(_one_slide(found, 4, n - 1, 1) for found, n in zip(runs, range(9, 16), strict=True)):
            hits += 1
            same += len({found.slides[0].start for found in runs}) == 1
    print(
        "| 10 merges of 0.6 x tolerance +-50 % after 5 level records, in each of the 7 runs "
        f"from the slide's 4th merge on | {histories} | {hits} | {same} |"
    )
    values = np.r_[np.full(15, 0.9), np.full(15, 0.9 - TOLERANCE)]
    found = shape(values, floor=FLOOR)
    step = not found.slides and [c.index for c in found.changes] == [15]
    print(f"| a step of one tolerance at record 15 of 30 | 1 | {int(step)} | |")


if __name__ == "__main__":
    main()
