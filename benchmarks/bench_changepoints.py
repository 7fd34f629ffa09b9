"""False alarms and detection of the change-point method (gates/changepoints.py).

A/A: 200 histories of 30 values of an unchanged system measured with noise (a metric near 0.7
with sd 0.01 from run to run, as a system with a nondeterministic index shows); a history with
any change point named is a false alarm. Shift: the same with a level shift of 3 sd at step 15;
detected when a change point is named within +-1 of it.

    python benchmarks/bench_changepoints.py
"""

from __future__ import annotations

import numpy as np

from retrieval_gate.gates.changepoints import DEFAULT_LEVEL, change_points

HISTORIES = 200
LENGTH = 30
SD = 0.01


def main() -> None:
    false_alarms = 0
    detected = 0
    for i in range(HISTORIES):
        rng = np.random.default_rng(10_000 + i)
        same = rng.normal(0.7, SD, LENGTH)
        false_alarms += bool(change_points(same, seed=i))
        shifted = same.copy()
        shifted[15:] -= 3 * SD
        detected += any(abs(c.index - 15) <= 1 for c in change_points(shifted, seed=i))
    print(f"level {DEFAULT_LEVEL}: false alarms in {false_alarms} of {HISTORIES} A/A histories")
    print(f"a 3 sd shift at step 15 named within +-1 in {detected} of {HISTORIES}")


if __name__ == "__main__":
    main()
