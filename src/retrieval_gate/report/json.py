"""The JSON twin of the report: a versioned contract other tools read (docs/report.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.display import redact_tree
from retrieval_gate.files.atomic import write_text_atomic
from retrieval_gate.files.outputs import JSON_OUTPUT
from retrieval_gate.report import Writer
from retrieval_gate.version import __version__

if TYPE_CHECKING:
    from retrieval_gate.report import ReportData, Targets

# 2: a category's or difficulty's scope and node id are written category:<label> (version 1
# wrote category[<label>], which pytest could not select: docs/suite-format.md, "Node ids").
# 3: a pair's metrics no longer hold a `pearson` and a `spearman` (they were the pair's cosine:
# one pair has no correlation), a pair's `latency_ms` is null (no pair is timed), and a pair or
# extraction run's `k` is [] (it listed default cutoffs those kinds never read).
VERSION = 3


def _as_reported(entry: dict[str, Any]) -> dict[str, Any]:
    """The run's JSON with each unit's ``metrics`` holding only values that are the unit's own:
    a family whose per-unit series is an input of its aggregation (a correlation's cosine,
    ``MetricFamily.per_unit``) is left out, so no pair shows its cosine under ``pearson``. A
    kind that takes no cutoffs (pairs, extraction) reports ``k`` as ``[]``, not the defaults it
    never read."""
    from retrieval_gate.errors import UnknownMetricError
    from retrieval_gate.metrics import parse_metric
    from retrieval_gate.records import DEFAULT_KIND
    from retrieval_gate.suites import kinds

    kind = kinds().get(entry.get("kind", DEFAULT_KIND))
    if kind is not None and not kind.takes_k:
        entry["k"] = []

    def own(name: str) -> bool:
        try:
            return parse_metric(name).spec.per_unit
        except UnknownMetricError:  # a plug-in's metric not installed here: kept as it came
            return True

    names = {name for query in entry["queries"] for name in query["metrics"]}
    hidden = {name for name in names if not own(name)}
    if hidden:
        for query in entry["queries"]:
            query["metrics"] = {k: v for k, v in query["metrics"].items() if k not in hidden}
    return entry


def render(data: ReportData) -> dict[str, Any]:
    runs = []
    for run in data.runs:
        entry = _as_reported(run.to_json())
        comparison = data.comparison(run)
        if comparison is not None:
            entry["baseline"] = comparison.to_json()
        runs.append(entry)
    return {
        "version": VERSION,
        "generator": f"pytest-retrieval-gate {__version__}",
        "passed": data.passed,
        "runs": runs,
        "gates": [g.to_json() for g in data.gates],
        "errors": [e.to_json() for e in data.errors],
        # Only when a selection (-k, -m, node ids) left gates out: the full report has no key.
        **({"partial": data.partial} if data.partial is not None else {}),
        **_decisions(data),
        **({"history": data.history.to_json()} if data.history is not None else {}),
        # What a pull request's baseline accepts, and what a baseline saved over failing items.
        **({"accepted": data.acceptance.to_json()} if data.acceptance is not None else {}),
        # Why no gate item ran (pytest's exit status 5): the report decided nothing.
        **({"nothing_ran": data.nothing_ran} if data.nothing_ran is not None else {}),
        # Why the session did not finish cleanly (complete is false then), each in one line.
        **({"unfinished": list(data.unfinished)} if data.unfinished else {}),
        # Last, written after every other writer, and true only when the session and every
        # writer finished cleanly: `python -m retrieval_gate.report.complete` checks it
        # (docs/ci.md).
        "complete": data.complete and not data.unfinished,
    }


def _decisions(data: ReportData) -> dict[str, Any]:
    """``decisions``: per suite, the systems ranked by the decision score with each term."""
    if data.decision is None:
        return {}
    out: list[dict[str, Any]] = []
    for suite in data.suites():
        found = data.decisions(suite)
        if isinstance(found, str):
            out.append({"suite": suite, "error": found})
        elif found is not None:
            out.append({"suite": suite, "ranking": [d.to_json() for d in found]})
    return {"decisions": out}


def write(data: ReportData, targets: Targets) -> list[Path]:
    # Redacted; control characters stay as they are, as JSON escapes them (ASCII out, so a lone
    # surrogate in an id is written as \ud800, not refused).
    write_text_atomic(targets.json, json.dumps(redact_tree(render(data)), indent=2) + "\n")
    return [targets.json]


WRITER = Writer(name="json", write=write, outputs=(JSON_OUTPUT,))
