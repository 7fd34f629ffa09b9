"""The JSON twin of the report: a versioned contract other tools read (docs/report.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval_gate import __version__
from retrieval_gate.baseline import query_digest

if TYPE_CHECKING:
    from retrieval_gate.evaluation import Evaluation
    from retrieval_gate.report import ReportData

VERSION = 1


def render(data: ReportData) -> dict[str, Any]:
    return {
        "version": VERSION,
        "generator": f"pytest-retrieval-gate {__version__}",
        "passed": data.passed,
        "runs": list(data.runs),
        "gates": list(data.gates),
        "errors": list(data.errors),
    }


def run_record(evaluation: Evaluation, suite_path: str) -> dict[str, Any]:
    """One suite x system: means per scope, latency, stats and every query's values and ranking."""
    run = evaluation.run
    suite = run.suite
    names = [m.name for m in evaluation.metrics]
    cut = max(suite.k)

    def means(scope: str) -> dict[str, float]:
        return {m.name: evaluation.value(m, scope) for m in evaluation.metrics}

    def groups(kind: str) -> dict[str, Any]:
        labels = suite.categories if kind == "category" else suite.difficulties
        return {
            label: {"n": evaluation.n(f"{kind}[{label}]"), "metrics": means(f"{kind}[{label}]")}
            for label in labels
        }

    queries = []
    for i, query in enumerate(suite.queries):
        queries.append(
            {
                "id": query.id,
                "digest": query_digest(query.text, query.relevant),
                "category": query.category,
                "difficulty": query.difficulty,
                "metrics": {name: float(evaluation.values[name][i]) for name in names},
                "ranking": list(run.rankings[i][:cut]),
                "relevant_ranks": evaluation.relevant_ranks(query.id),
                "latency_ms": run.latencies_ms[i],
            }
        )
    return {
        "suite": suite.name,
        "suite_path": suite_path,
        "system": run.system.name,
        "n": len(suite.queries),
        "k": list(suite.k),
        "fingerprint": dict(run.fingerprint),
        "metrics": means("suite"),
        "categories": groups("category"),
        "difficulties": groups("difficulty"),
        "latency_ms": dict(evaluation.latency),
        "stats": dict(run.stats),
        "queries": queries,
    }
