"""Speed of the trend reading (gates/changepoints.py, ``shape``: steps and slides) against
another commit's change-point search (``change_points``: E-divisive means, as at 4da15ff), on
the same histories, as a ratio: the two are run alternately, REPEATS times each, and the
medians compared. The methods differ, so their answers are not compared; each one's
count of what it named is shown.

Histories: per length, an unchanged system measured with noise (N(0.7, 0.01) from run to run),
the same with two level shifts of 3 sd, at a third and two thirds of it, and the same with a
slide of 0.5 sd per record over its last third.

    python benchmarks/bench_changepoints_speed.py --against 4da15ff --lengths 30 200 1000
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from retrieval_gate.gates.changepoints import shape

ROOT = Path(__file__).resolve().parent.parent
MODULE = "src/retrieval_gate/gates/changepoints.py"


def load_at(commit: str) -> ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:{MODULE}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "changepoints_then.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("changepoints_then", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def histories(length: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(length)
    same = rng.normal(0.7, 0.01, length)
    shifted = same.copy()
    shifted[length // 3 :] -= 0.03
    shifted[2 * length // 3 :] += 0.03
    slide = same.copy()
    tail = length - 2 * length // 3
    slide[2 * length // 3 :] -= 0.005 * np.arange(1, tail + 1)
    return {"unchanged": same, "two shifts": shifted, "a slide": slide}


def seconds(find: Callable[[np.ndarray], object], values: np.ndarray) -> float:
    start = time.perf_counter()
    find(values)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", default="4da15ff", help="the commit to compare with")
    parser.add_argument("--lengths", type=int, nargs="+", default=[30, 200, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    module = load_at(args.against)

    def then(values: np.ndarray) -> object:
        return module.change_points(values, seed=0)

    def now(values: np.ndarray) -> object:
        return shape(values)

    print(
        f"| records | history | {args.against}: change points | this: steps, slides | "
        f"{args.against} s | this s | {args.against} / this |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    for length in args.lengths:
        for name, values in histories(length).items():
            named = len(module.change_points(values, seed=0))
            found = shape(values)
            before, after = [], []
            for _ in range(args.repeats):
                before.append(seconds(then, values))
                after.append(seconds(now, values))
            b, a = statistics.median(before), statistics.median(after)
            print(
                f"| {length} | {name} | {named} | {len(found.changes)}, {len(found.slides)} | "
                f"{b:.3f} | {a:.3f} | {b / a:.1f}x |"
            )


if __name__ == "__main__":
    main()
