"""What a failing drift item says of the queries that slid: where each one's relevant document
ranks today and what ranks above it (gates/history.py, ``ranked_above_now``)."""

from __future__ import annotations

from retrieval_gate.gates.history import ranked_above_now
from tests.ledger import ranked_run


def test_each_slid_query_names_what_ranks_above_its_best_relevant_document() -> None:
    record = ranked_run(
        {
            "q1": ("d2", "d3", "d1"),  # best relevant at 3
            "q2": ("d9", "d5", "d6", "d7", "d8"),  # none in the top 5
            "q3": ("d1", "d2"),  # relevant first: nothing to say
            "q4": ("d1",),  # no relevant documents ranked (a pair, an extraction document)
        },
        {"q1": {"d1": 3, "d4": None}, "q2": {"d1": None}, "q3": {"d1": 1}},
        labels={"d9": "Nine"},
    )
    worst = [("q1", -0.67), ("q2", -1.0), ("q3", -0.5), ("q4", -0.5), ("gone", -1.0)]
    assert ranked_above_now(record, worst) == (
        "ranked above them now: q1: d1 at 3, below d2, d3; q2: no relevant document in its "
        "top 5, below d9 (Nine), d5, d6 and 2 more"
    )
    assert ranked_above_now(record, [("q3", -0.5), ("q4", -0.5)]) == ""
