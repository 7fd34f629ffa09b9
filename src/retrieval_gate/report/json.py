"""The JSON twin of the report: a versioned contract other tools read (docs/report.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval_gate import __version__

if TYPE_CHECKING:
    from retrieval_gate.report import ReportData

VERSION = 1


def render(data: ReportData) -> dict[str, Any]:
    runs = []
    for run in data.runs:
        entry = run.to_json()
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
        **_decisions(data),
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
