"""Every example's rankings, figures and verdicts from this tree and from another checkout,
compared.

    python benchmarks/compare_examples.py --before /path/to/older/worktree \\
        [--work /tmp/rg-compare-examples] [--examples quickstart vaswani extraction pairs] \\
        [--workers 2]
    python benchmarks/compare_examples.py --xdist [--examples ...]
    python benchmarks/compare_examples.py --before ... --examples vaswani --system minilm-exact

Verdicts: each tree saves the example's baseline (``--rg-save-baseline`` to a file of its own in
``WORK``), then gates against it, and every item's outcome (node id, passed, verdict) of both runs
is compared: floors, expectations and the regression items against the baseline. ``--workers
N`` runs both trees under ``-n N``. The history each save appends in the example's folder is
removed after, where the example had none.

With ``--xdist`` this tree runs each example twice, serially and under ``-n 2``, each from an
empty cache of its own (so each builds its indexes and embeds everything itself), and the two
are compared the same way: the same inputs must give the same rankings and metrics however the
run is run (docs/performance.md, "Serial and -n 2").

Each example runs from its own tree's repository root (``pytest --retrieval-gate
examples/NAME``, ``PYTHONPATH`` at that tree's ``src``, the same interpreter and packages), this
tree first (it fills the example's cache, ``WORK/NAME-cache``), then the other tree on the same
cache. ``extraction`` runs all six systems of its settings over both suites; ``--system NAME``
(repeatable) runs only those systems of each example in both trees (``--rg-system``), for a
system too slow to build on the machine at hand (a reproducible chroma build adds one record per
call, docs/performance.md). The JSON reports
are compared run by run: every query's (document's) ranking and every metric. Exits 1 when
anything differs. The HPO example is compared by bench_examples.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXTRA = {
    "extraction": [
        f"--rg-system={name}"
        for name in (
            "default",
            "top-term-only",
            "default-best",
            "top-term-only-best",
            "default-windows",
            "top-term-only-windows",
        )
    ],
}


def _report(
    tree: Path,
    example: str,
    cache: Path,
    out: Path,
    extra: tuple[str, ...] = (),
    systems: tuple[str, ...] = (),
) -> dict[str, Any]:
    baseline = out.with_name(out.stem + "-baseline.json")
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"}
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--retrieval-gate",
        f"examples/{example}",
        *([f"--rg-system={name}" for name in systems] or EXTRA.get(example, [])),
        f"--rg-cache-dir={cache}",
        f"--rg-report={out}",
        *extra,
    ]
    history = tree / "examples" / example / ".retrieval-gate"
    kept = history.exists()
    verdicts: dict[str, Any] = {}
    try:
        for step in (["--rg-save-baseline"], []):
            done = subprocess.run(
                [*args, f"--rg-baseline={baseline}", *step],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode not in (0, 1) or " skipped" in done.stdout:
                raise SystemExit(f"{example} in {tree}:\n{done.stdout[-3000:]}")
            data = json.loads(out.with_suffix(".json").read_text())
            verdicts.update(
                {
                    f"{'saving' if step else 'gating'} {g['nodeid']}": (
                        g["passed"],
                        g.get("verdict", "ok" if g["passed"] else "failed"),
                    )
                    for g in data["gates"]
                }
            )
    finally:
        if not kept:
            import shutil

            shutil.rmtree(history, ignore_errors=True)
    return {
        f"{run['suite']} x {run['system']}": {
            "rankings": {q["id"]: q["ranking"] for q in run["queries"]},
            "metrics": run["metrics"],
        }
        for run in data["runs"]
    } | {"verdicts": verdicts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--before", type=Path, help="the other checkout to compare with")
    group.add_argument(
        "--xdist", action="store_true", help="compare this tree serial with this tree under -n 2"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/rg-compare-examples"))
    parser.add_argument("--workers", type=int, default=0, help="run both trees under -n N")
    parser.add_argument(
        "--examples", nargs="+", default=["quickstart", "vaswani", "extraction", "pairs"]
    )
    parser.add_argument(
        "--system",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this system of each example, in both trees; repeatable (default: the "
        "example's own selection)",
    )
    args = parser.parse_args()
    systems = tuple(args.system)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    differ = False
    for example in args.examples:
        began = time.perf_counter()
        cache = work / f"{example}-cache"
        if args.xdist:
            import shutil

            for folder in (cache, work / f"{example}-xdist-cache"):
                shutil.rmtree(folder, ignore_errors=True)
            this = _report(REPO, example, cache, work / f"{example}-serial.md", (), systems)
            before = _report(
                REPO,
                example,
                work / f"{example}-xdist-cache",
                work / f"{example}-xdist.md",
                ("-n", "2"),
                systems,
            )
        else:
            workers = ("-n", str(args.workers)) if args.workers else ()
            this = _report(REPO, example, cache, work / f"{example}-this.md", workers, systems)
            before = _report(
                args.before.resolve(),
                example,
                cache,
                work / f"{example}-before.md",
                workers,
                systems,
            )
        this_verdicts, before_verdicts = this.pop("verdicts"), before.pop("verdicts")
        queries = sum(len(v["rankings"]) for v in this.values())
        same_rankings = {k: v["rankings"] for k, v in this.items()} == {
            k: v["rankings"] for k, v in before.items()
        }
        same_metrics = {k: v["metrics"] for k, v in this.items()} == {
            k: v["metrics"] for k, v in before.items()
        }
        same_verdicts = this_verdicts == before_verdicts
        differ |= not (same_rankings and same_metrics and same_verdicts)
        print(
            f"{example}: {len(this)} runs, {queries} queries or documents; rankings identical: "
            f"{same_rankings}; metrics identical: {same_metrics}; "
            f"{len(this_verdicts)} verdicts identical: {same_verdicts}; "
            f"{time.perf_counter() - began:,.0f} s wall",
            flush=True,
        )
        if not same_verdicts:
            for key in sorted(set(this_verdicts) | set(before_verdicts)):
                if this_verdicts.get(key) != before_verdicts.get(key):
                    print(f"  {key}: {before_verdicts.get(key)} -> {this_verdicts.get(key)}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
