"""Builders of the records a report is made of, shared by the report's tests."""

from __future__ import annotations

from retrieval_gate.records import Outcome, QueryRecord, RunRecord


def run_record(suite: str, system: str, p1: float, kind: str = "ranking") -> RunRecord:
    """A run of two queries over three documents whose P@1 is ``p1`` (other metrics 0.5)."""
    queries = tuple(
        QueryRecord(
            id=f"q{i}",
            digest=f"d{i}",
            category=None,
            difficulty=None,
            metrics={"P@1": float(i == 0), "nDCG@3": 0.5, "R@3": 0.5, "MRR@3": 0.5},
            ranking=("a", "b", "c"),
            relevant_ranks={"a": 1},
            latency_ms=1.0,
            text=f"query {i}",
        )
        for i in range(2)
    )
    return RunRecord(
        suite=suite, suite_path=f"{suite}.retrieval.yaml", system=system, n=2, k=(1, 3),
        fingerprint={}, metrics={"P@1": p1, "nDCG@3": 0.5, "R@3": 0.5, "MRR@3": 0.5},
        categories={}, difficulties={}, latency_ms={"p50": 1.0, "p95": 1.0, "p99": 1.0, "mean": 1.0},
        stats={}, queries=queries, kind=kind,
    )  # fmt: skip


def gate(nodeid: str, passed: bool, suite: str = "s", system: str = "x") -> Outcome:
    """A suite floor on P@1 (0.4) of ``suite`` x ``system``, passed (0.5) or failed (0.1)."""
    return Outcome(
        suite=suite, system=system, scope="suite", metric="P@1", value=0.5 if passed else 0.1,
        threshold=0.4, passed=passed, n=2, nodeid=nodeid,
    )  # fmt: skip
