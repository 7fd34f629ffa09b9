"""What a failing drift item says of the queries that slid: where each one's relevant document
ranks today and what ranks above it (gates/history.py, ``ranked_above_now``)."""

from __future__ import annotations

from retrieval_gate.gates.history import ranked_above_now
from retrieval_gate.records import QueryRecord, RunRecord


def _record(units: dict[str, tuple[tuple[str, ...], dict[str, int | None]]]) -> RunRecord:
    return RunRecord(
        suite="s",
        suite_path="s.retrieval.yaml",
        system="sys",
        n=len(units),
        k=(5,),
        fingerprint={},
        metrics={},
        categories={},
        difficulties={},
        latency_ms={},
        stats={},
        queries=tuple(
            QueryRecord(
                id=q, digest=q, category=None, difficulty=None, metrics={}, ranking=r,
                relevant_ranks=ranks, labels={"d9": "Nine"},
            )
            for q, (r, ranks) in units.items()
        ),
    )  # fmt: skip


def test_each_slid_query_names_what_ranks_above_its_best_relevant_document() -> None:
    record = _record(
        {
            "q1": (("d2", "d3", "d1"), {"d1": 3, "d4": None}),  # best relevant at 3
            "q2": (("d9", "d5", "d6", "d7", "d8"), {"d1": None}),  # none in the top 5
            "q3": (("d1", "d2"), {"d1": 1}),  # relevant first: nothing to say
            "q4": (("d1",), {}),  # no relevant documents ranked (a pair, an extraction doc)
        }
    )
    worst = [("q1", -0.67), ("q2", -1.0), ("q3", -0.5), ("q4", -0.5), ("gone", -1.0)]
    assert ranked_above_now(record, worst) == (
        "ranked above them now: q1: d1 at 3, below d2, d3; q2: no relevant document in its "
        "top 5, below d9 (Nine), d5, d6 and 2 more"
    )
    assert ranked_above_now(record, [("q3", -0.5), ("q4", -0.5)]) == ""
