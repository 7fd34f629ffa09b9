"""The run record: one suite x system's results as plain JSON-ready data.

Built once from an :class:`~retrieval_gate.evaluation.Evaluation`; the baseline stores it, the
regression gates compare two of them, and the report renders it (its JSON twin carries it as is,
see docs/report.md). It travels between xdist workers and the controller as JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from retrieval_gate.evaluation import Evaluation
from retrieval_gate.suite import scope_name


def query_digest(text: str, relevant: Mapping[str, int]) -> str:
    blob = json.dumps([text, sorted(relevant.items())], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


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
            label: {
                "n": evaluation.n(scope_name(kind, label)),
                "metrics": means(scope_name(kind, label)),
            }
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
