"""The history at scale: what a gate run and a ``--rg-record`` cost with 20 to 1,000,000 records
of one suite x system in the history, against the same project with a 20-record history, and
against the release before the ledger (``--before``: a checkout of 65934fb, the same
interpreter and packages), which read the history whole and compacted it by rewriting it.

The project is tests/data/ledger-65934fb's (four queries, one retriever). Its history is written
as each tree keeps one grown by a team recording every merge: for this tree, sealed segments of
4 MiB with an index (``JsonLinesLog.reindex``), the newest ``keep_values`` (200) records with
their per-query values and the older ones compacted; for the release before, one file of
version-1 records, the newest 200 with their values (what its own compaction left). Each
measurement is a fresh ``pytest --retrieval-gate`` process on a fresh copy of the project, its
wall time and peak resident memory read by ``/usr/bin/time``; the two trees alternate, and the
medians of ``--repeat`` rounds are reported.

    python benchmarks/bench_history.py --before /path/to/65934fb [--sizes 20 1000 10000 100000 \\
        1000000] [--before-max 100000] [--repeat 3] [--work /tmp/rg-bench-history]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "ledger-65934fb"
SETTINGS = """[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate.system.keyword]
retriever = "search_app:retrieve"
"""
KEEP_VALUES = 200
SEGMENT_RECORDS = 4000  # about 4 MiB of compacted records of this project


def _metrics(i: int) -> dict[str, float]:
    wobble = (i % 7) / 700.0
    names = ("Hit@1", "Hit@3", "MAP@1", "MAP@3", "MRR@1", "MRR@3", "P@1", "P@3", "R-Prec")
    return {m: round(0.75 - wobble, 6) for m in names}


def _values(i: int) -> dict[str, dict[str, Any]]:
    queries = ("join_orders", "customer_names", "refunds", "payments")
    return {
        q: {"digest": f"{j:016x}", "category": None, "difficulty": None, "metrics": _metrics(i + j)}
        for j, q in enumerate(queries)
    }


def _v2_line(i: int, values: bool) -> bytes:
    from retrieval_gate.baseline.entry import _canonical, line_digest

    run: dict[str, Any] = {"k": [1, 3], "metrics": _metrics(i)}
    if values:
        run["queries"] = _values(i)
    else:
        run["n"] = 4
    body: dict[str, Any] = {
        "v": 2,
        "suite": "lineage",
        "system": "keyword",
        "commit": f"{i:040x}",
        "time": f"2020-01-01T00:00:{i % 60:02d}Z",
        "source": "record",
        "decided": False,
        "session": f"s{i}",
        "suite_digest": "bench",
        "identity": "bench",
        "tolerance": {"P@1": 0.5},
        "run": run,
        **({} if values else {"compacted": True}),
    }
    body["digest"] = line_digest(body)
    return (_canonical(body) + "\n").encode()


def _v1_line(i: int, values: bool) -> bytes:
    from retrieval_gate.baseline.entry import _canonical, line_digest

    per_query = _values(i) if values else {}
    names = sorted(_metrics(i))
    body: dict[str, Any] = {
        "v": 1,
        "suite": "lineage",
        "system": "keyword",
        "commit": f"{i:040x}",
        "time": f"2020-01-01T00:00:{i % 60:02d}Z",
        "suite_digest": "bench",
        "identity": "bench",
        "source": "record",
        "decided": False,
        "session": f"s{i}",
        "n": 4,
        "metrics": _metrics(i),
        "tolerance": {"P@1": 0.5},
        "queries": list(per_query),
        "digests": [q["digest"] for q in per_query.values()],
        "values": {m: [q["metrics"][m] for q in per_query.values()] for m in names}
        if values
        else {},
        **({} if values else {"compacted": True}),
    }
    body["digest"] = line_digest(body)
    return (_canonical(body) + "\n").encode()


def _project(root: Path, n: int, layout: str) -> None:
    """The project with a history of ``n`` records in ``layout`` (``segments`` or ``v1``)."""
    from retrieval_gate.baseline.log import JsonLinesLog

    root.mkdir(parents=True)
    for name in ("lineage.retrieval.yaml", "search_app.py"):
        shutil.copy(DATA / name, root / name)
    (root / "pyproject.toml").write_text(SETTINGS)
    history = root / ".retrieval-gate" / "history"
    history.mkdir(parents=True)
    old = max(0, n - KEEP_VALUES)
    if layout == "v1":
        with open(history / "lineage.jsonl", "wb") as out:
            for i in range(n):
                out.write(_v1_line(i, values=i >= old))
        return
    folder = history / "lineage.d"
    folder.mkdir()
    sealed = (old // SEGMENT_RECORDS) * SEGMENT_RECORDS  # whole segments, all compacted
    for start in range(0, sealed, SEGMENT_RECORDS):
        with open(folder / f"{start // SEGMENT_RECORDS + 1:06d}.jsonl", "wb") as out:
            for i in range(start, start + SEGMENT_RECORDS):
                out.write(_v2_line(i, values=False))
    with open(history / "lineage.jsonl", "wb") as out:
        for i in range(sealed, n):
            out.write(_v2_line(i, values=i >= old))
    log = JsonLinesLog(history, keep_values=KEEP_VALUES)
    log.reindex("lineage")
    index = json.loads((folder / "index.json").read_text())
    compacted = [dict(s, compacted=True) for s in index["segments"]]
    (folder / "index.json").write_text(json.dumps({**index, "segments": compacted}))


def _measure(tree: Path, project: Path, args: list[str], commit: int) -> tuple[float, float]:
    """(seconds, peak MiB) of one gate run in ``project`` with ``tree``'s plugin."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{project}",
        "GITHUB_SHA": f"{commit:040x}",
        "HF_HUB_OFFLINE": "1",
    }
    command = ["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "pytest", "--retrieval-gate"]
    found = subprocess.run(
        [*command, "-q", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise SystemExit(f"gate run failed in {project} ({tree}):\n{found.stdout}\n{found.stderr}")
    seconds, kib = found.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kib) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the release before the ledger")
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 1000, 10_000, 100_000])
    parser.add_argument("--before-max", type=int, default=100_000, help="largest size run before")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rg-bench-history"))
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    shutil.rmtree(args.work, ignore_errors=True)
    trees = [("after", REPO, "segments")]
    if args.before is not None:
        trees.insert(0, ("before", args.before.resolve(), "v1"))
    rows: list[dict[str, Any]] = []
    for n in args.sizes:
        templates = {}
        for label, _, layout in trees:
            if label == "before" and n > args.before_max:
                continue
            templates[label] = args.work / f"{label}-{n}"
            _project(templates[label], n, layout)
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for round_ in range(args.repeat):
            for label, tree, _ in trees:
                if label not in templates:
                    continue
                for kind, extra in (("run", []), ("record", ["--rg-record"])):
                    project = args.work / f"run-{label}-{n}"
                    shutil.rmtree(project, ignore_errors=True)
                    shutil.copytree(templates[label], project)
                    found = _measure(tree, project, extra, 10**9 + round_)
                    runs.setdefault((label, kind), []).append(found)
                    shutil.rmtree(project)
        for (label, kind), found in sorted(runs.items()):
            row = {
                "records": n,
                "tree": label,
                "step": kind,
                "seconds": statistics.median(s for s, _ in found),
                "peak_mib": statistics.median(m for _, m in found),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        for label in templates:
            shutil.rmtree(templates[label])
    base = {(r["tree"], r["step"]): r for r in rows if r["records"] == min(args.sizes)}
    print()
    print("| records | tree | step | median s | x smallest | peak MiB |")
    print("|---:|---|---|---:|---:|---:|")
    for r in rows:
        ratio = r["seconds"] / base[(r["tree"], r["step"])]["seconds"]
        print(
            f"| {r['records']:,} | {r['tree']} | {r['step']} | {r['seconds']:.2f} | "
            f"{ratio:.2f} | {r['peak_mib']:.0f} |"
        )


if __name__ == "__main__":
    main()
