"""What a pull request's baseline accepts against its target branch's (gates/accept.py): the
changes over the queries both hold unchanged, in hand arithmetic, and the words every output
uses."""

from __future__ import annotations

import dataclasses

from retrieval_gate.gates.accept import (
    AcceptanceReport,
    Change,
    Moved,
    SavedOver,
    change,
    compare,
    unrecorded,
)
from retrieval_gate.records import QueryRecord, RunRecord


def _run(values: dict[str, tuple[float, str]], metric: str = "P@1") -> RunRecord:
    """A run whose queries hold ``metric`` (id -> (value, digest)); its suite value the mean."""
    queries = tuple(
        QueryRecord(
            id=qid,
            digest=digest,
            category=None,
            difficulty=None,
            metrics={metric: value},
            ranking=(),
            relevant_ranks={},
        )
        for qid, (value, digest) in values.items()
    )
    mean = sum(v for v, _ in values.values()) / len(values)
    return RunRecord(
        suite="s",
        suite_path="s.retrieval.yaml",
        system="bm25",
        n=len(queries),
        k=(1,),
        fingerprint={},
        metrics={metric: mean},
        categories={},
        difficulties={},
        latency_ms={},
        stats={},
        queries=queries,
    )


def test_a_change_is_over_the_queries_both_hold_unchanged() -> None:
    # q3 was edited (another digest) and q4 added: only q1 and q2 are compared.
    then = _run({"q1": (1.0, "a"), "q2": (1.0, "b"), "q3": (0.0, "c")})
    now = _run({"q1": (0.0, "a"), "q2": (1.0, "b"), "q3": (1.0, "C"), "q4": (1.0, "d")})
    found = change("P@1", then, now)
    assert found is not None
    # (1 + 1) / 2 -> (0 + 1) / 2
    assert (found.before, found.after, found.n) == (1.0, 0.5, 2)
    assert found.moved == (Moved("q1", 1.0, 0.0),) and found.drop
    assert change("R@1", then, now) is None  # a metric neither side measured
    assert change("P@1", then, _run({"q9": (1.0, "z")})) is None  # no query in common


def test_the_queries_that_moved_most_come_first_and_are_five_at_most() -> None:
    then = _run({f"q{i}": (1.0, str(i)) for i in range(8)})
    now = _run({f"q{i}": (1.0 - 0.1 * i, str(i)) for i in range(8)})
    found = change("P@1", then, now)
    assert found is not None
    assert [m.id for m in found.moved] == ["q7", "q6", "q5", "q4", "q3"]


def test_compare_names_the_gated_metrics_that_moved() -> None:
    then = {"s::bm25": _run({"q1": (1.0, "a"), "q2": (0.5, "b")})}
    same = {"s::bm25": then["s::bm25"]}
    assert compare(then, same, {}) == []  # nothing moved: nothing accepted
    now = {"s::bm25": _run({"q1": (0.5, "a"), "q2": (0.5, "b")}), "s::new": then["s::bm25"]}
    (found,) = compare(then, now, {"s::bm25": ("P@1",)}, {("s", "bm25", "P@1"): 0.1})
    # 0.75 -> 0.5: a drop of 0.25, 2.5 x the tolerance 0.1
    assert (found.metric, found.before, found.after, found.tolerance) == ("P@1", 0.75, 0.5, 0.1)
    assert found.line() == (
        "P@1 of bm25 (s): 0.75 -> 0.5 (-0.2500, 2.5 x its tolerance 0.1) over 2 shared "
        "queries; moved most: q1 1 -> 0.5"
    )
    assert compare(then, now, {"s::bm25": ("R@1",)}) == []  # a gated metric neither measured


def test_the_words_of_what_is_accepted() -> None:
    drop = Change("s", "bm25", "MRR@10", 0.6351, 0.5385, 35)
    gain = dataclasses.replace(drop, metric="R@10", before=0.5, after=0.6)
    assert unrecorded([gain], "origin/main (1a2b3c4)", "origin/main") is None
    assert unrecorded([dataclasses.replace(drop, recorded=True)], "x", "x") is None
    assert unrecorded([drop, drop, drop, drop, drop], "origin/main (1a2b3c4)", "origin/main") == (
        "the baseline does not record its drop of MRR@10 of bm25 (s), MRR@10 of bm25 (s), MRR@10 "
        "of bm25 (s) and 2 more against origin/main (1a2b3c4) as accepted (saved without "
        "--rg-base, or against an older target): the slow-drift check will count it; save the "
        "baseline again with --rg-base origin/main"
    )
    drift = SavedOver(
        "s",
        "bm25",
        "MRR@10",
        "history-drift",
        0.6351,
        0.5385,
        "b46129c",
        "drift anchor now 87f8109",
    )
    assert drift.line() == (
        "accepted: MRR@10 of bm25 (s), 0.6351 -> 0.5385 since b46129c; drift anchor now 87f8109"
    )
    category = dataclasses.replace(drift, rule="regression", anchor=None, scope="category:joins")
    assert (
        category.line()
        == "accepted: MRR@10 over category:joins of bm25 (s), 0.6351 -> 0.5385 since b46129c"
    )
    merged = dataclasses.replace(drift, rule="pull request", since="origin/main (1a2b3c4)")
    assert merged.line() == (
        "accepted in its pull request: MRR@10 of bm25 (s), 0.6351 -> 0.5385 against origin/main "
        "(1a2b3c4); drift anchor now 87f8109"
    )
    report = AcceptanceReport(
        base="origin/main", given="GITHUB_BASE_REF=main", commit="1a2b3c4d" * 5, changes=(drop,)
    )
    assert (
        report.heading()
        == "accepted in this pull request (its baseline against origin/main (1a2b3c4)):"
    )
    assert report.properties() == [
        ("accepted_base", "origin/main (1a2b3c4)"),
        ("accepted:s::bm25::MRR@10", "0.6351 -> 0.5385"),
    ]
    assert AcceptanceReport().empty and not report.empty


def test_a_baseline_in_a_store_is_no_file_git_holds_and_says_so(tmp_path: object) -> None:
    from datetime import datetime
    from types import SimpleNamespace

    from retrieval_gate.baseline.log import History
    from retrieval_gate.config.history import HistorySettings
    from retrieval_gate.gates.accept import Acceptor

    keeper = SimpleNamespace(
        root=tmp_path,
        conf=HistorySettings(),
        pin=None,
        now=datetime.now().astimezone(),
        ledger=SimpleNamespace(location="s3://bucket/baseline.json"),
        store=None,
        history=History,
    )
    found = Acceptor(keeper, "origin/main", saving=False).base()
    assert found is not None and found.baseline is None
    assert found.problem == (
        "cannot read the baseline of origin/main (--rg-base origin/main): the baseline is kept in "
        "a store (s3://bucket/baseline.json), not a file git holds; what this baseline accepts "
        "against it is not named"
    )
    assert Acceptor(keeper, None, saving=False).base() is None  # no target branch named
