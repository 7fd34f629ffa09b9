"""Speed of the change-point search (gates/changepoints.py) against another commit's
implementation of it, on the same histories, as a ratio: the two are run alternately, REPEATS
times each, and the medians compared. Before timing, the script checks that both name the same
change points with the same p-values and levels.

Histories: per length, an unchanged system measured with noise (N(0.7, 0.01) from run to run:
no change point) and the same with two level shifts of 3 sd, at a third and two thirds of it.

    python benchmarks/bench_changepoints_speed.py --against 8f5f288 --lengths 200 1000
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
from dataclasses import astuple
from pathlib import Path
from types import ModuleType

import numpy as np

from retrieval_gate.gates.changepoints import change_points

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
    return {"unchanged": same, "two shifts": shifted}


def seconds(find: Callable[..., object], values: np.ndarray) -> float:
    start = time.perf_counter()
    find(values, seed=0)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", default="HEAD~1", help="the commit to compare with")
    parser.add_argument("--lengths", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    then = load_at(args.against).change_points
    print(f"| records | history | change points | {args.against} s | this s | ratio |")
    print("|---:|---|---:|---:|---:|---:|")
    for length in args.lengths:
        for name, values in histories(length).items():
            found = change_points(values, seed=0)
            if [astuple(c) for c in found] != [astuple(c) for c in then(values, seed=0)]:
                sys.exit(f"{name} ({length}): the implementations disagree")
            before, after = [], []
            for _ in range(args.repeats):
                before.append(seconds(then, values))
                after.append(seconds(change_points, values))
            b, a = statistics.median(before), statistics.median(after)
            print(f"| {length} | {name} | {len(found)} | {b:.3f} | {a:.3f} | {b / a:.1f}x |")


if __name__ == "__main__":
    main()
