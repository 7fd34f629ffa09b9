"""Floors, ceilings and expectations decided on a run record (gate.py), by hand."""

from __future__ import annotations

import dataclasses

from retrieval_gate.gates.expect import check_query
from retrieval_gate.gates.floors import check_gate
from retrieval_gate.gates.rule import words
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import GroupRecord, QueryRecord, RunRecord
from retrieval_gate.suites.suite import Gate
from retrieval_gate.suites.units import Expectation, Query


def _query(qid: str, p1: float, latency: float, text: str = "") -> QueryRecord:
    return QueryRecord(
        id=qid,
        digest=qid,
        category="c" if qid != "q3" else None,
        difficulty=None,
        metrics={"P@1": p1},
        ranking=("d1", "d2", "d3", "d4", "d5", "d6"),
        relevant_ranks={"d2": 2} if p1 == 0 else {"d1": 1},
        latency_ms=latency,
        text=text or f"text of {qid}",
    )


RECORD = RunRecord(
    suite="s",
    suite_path="s.retrieval.yaml",
    system="sys",
    n=3,
    k=(1,),
    fingerprint={},
    metrics={"P@1": 2 / 3},
    categories={"c": GroupRecord(n=2, metrics={"P@1": 0.5})},
    difficulties={},
    latency_ms={"p50": 2.0, "p95": 2.9, "p99": 2.98, "mean": 2.0},
    stats={},
    queries=(_query("q1", 1.0, 1.0), _query("q2", 0.0, 3.0), _query("q3", 1.0, 2.0)),
)


def test_floor_lists_only_imperfect_queries_with_their_text() -> None:
    out = check_gate(Gate("suite", parse_metric("P@1"), 0.9), RECORD)
    # Mean (1 + 0 + 1) / 3 = 0.6667 under 0.9; q1 and q3 are perfect and not "worst".
    assert (out.passed, out.value, out.n) == (False, 2 / 3, 3)
    assert out.worst == (("q2", 0.0),)
    assert words(out)[1] == 'worst queries: q2 "text of q2" (0)'


def test_scoped_floor_reads_the_group() -> None:
    out = check_gate(Gate("category:c", parse_metric("P@1"), 0.5), RECORD)
    assert (out.passed, out.value, out.n, out.worst) == (True, 0.5, 2, (("q2", 0.0),))


def test_latency_ceiling_lists_the_slowest_with_the_unit() -> None:
    out = check_gate(Gate("suite", parse_metric("latency_p95_ms"), 2.5), RECORD)
    assert (out.passed, out.value, out.ceiling) == (False, 2.9, True)
    assert out.worst == (("q2", 3.0), ("q3", 2.0), ("q1", 1.0))
    assert words(out)[1].startswith('slowest queries: q2 "text of q2" (3 ms), q3')


def test_expectation_names_the_query_and_its_text() -> None:
    query = Query(
        id="q2",
        text="text of q2",
        relevant={"d2": 1},
        expect=(Expectation("found_within", 1.0),),
    )
    out = check_query(query, RECORD)
    assert not out.passed
    assert words(out)[:2] == [
        'expect on query[q2] "text of q2" (s x sys): FAILED',
        "found_within 1: first relevant at rank 2",
    ]


def test_measured_and_needed_read_in_their_own_units() -> None:
    floor = check_gate(Gate("suite", parse_metric("P@1"), 0.9), RECORD)
    assert (floor.measured, floor.needed) == ("0.6667", ">= 0.9")
    ceiling = check_gate(Gate("suite", parse_metric("latency_p95_ms"), 2.5), RECORD)
    assert (ceiling.measured, ceiling.needed) == ("2.9 ms", "<= 2.5 ms")
    query = Query(id="q2", text="t", relevant={"d2": 1}, expect=(Expectation("found_within", 1.0),))
    found = check_query(query, RECORD)
    assert (found.measured, found.needed) == ("rank 2", "<= rank 1")
    lost = dataclasses.replace(RECORD.queries[1], relevant_ranks={"zz": None})
    record = dataclasses.replace(RECORD, queries=(RECORD.queries[0], lost, RECORD.queries[2]))
    missing = check_query(query, record)
    assert (missing.value, missing.measured) == (-1.0, "not retrieved")
