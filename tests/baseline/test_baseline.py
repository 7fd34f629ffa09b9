"""Baseline files (read, write, version, corruption), query alignment and regression explanations."""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate import __version__
from retrieval_gate.baseline.align import align, metric_definitions
from retrieval_gate.baseline.head import (
    VERSION,
    Baseline,
    BaselineError,
    load_baseline,
    save_baseline,
)
from retrieval_gate.gates.compared import RegressionCheck
from retrieval_gate.gates.explain import explain
from retrieval_gate.gates.regressions import check_regressions, compare_with_baseline, family_size
from retrieval_gate.gates.resolution import block_level, queries_needed, t_quantile
from retrieval_gate.gates.rule import headline
from retrieval_gate.metrics import metric_versions
from retrieval_gate.records import QueryRecord, RegressionFigures, RunRecord, query_digest

FINGERPRINT = {
    "plugin_version": "0.1.0",
    "metric_definitions": 1,
    "suite_digest": "abc",
    "system": {"retriever": "app:search"},
    "k": [1, 3],
    "gain": "linear",
}


def query(
    qid: str,
    text: str = "",
    *,
    metrics: dict[str, float] | None = None,
    ranking: list[str] | None = None,
    relevant: dict[str, int] | None = None,
    category: str | None = None,
) -> QueryRecord:
    relevant = relevant if relevant is not None else {f"{qid}-doc": 1}
    ranking = ranking if ranking is not None else [f"{qid}-doc"]
    position = {doc: r for r, doc in enumerate(ranking, start=1)}
    return QueryRecord(
        id=qid,
        digest=query_digest(text or f"text of {qid}", relevant),
        category=category,
        difficulty=None,
        metrics=metrics if metrics is not None else {"P@1": 1.0},
        ranking=tuple(ranking),
        relevant_ranks={doc: position.get(doc) for doc in relevant},
        latency_ms=1.5,
    )


def record(
    queries: list[QueryRecord],
    suite: str = "s",
    cutoffs: tuple[int, ...] = (1, 3),
    **fp: Any,
) -> RunRecord:
    """A run record of system "sys"; ``fp`` overrides fingerprint entries."""
    return RunRecord(
        suite=suite,
        suite_path=f"{suite}.retrieval.yaml",
        system="sys",
        n=len(queries),
        k=cutoffs,
        fingerprint={**FINGERPRINT, **fp},
        metrics={"P@1": 1.0},
        categories={},
        difficulties={},
        latency_ms={"p50": 1.0},
        stats={},
        queries=tuple(queries),
    )


def figures(outcome: Any) -> RegressionFigures:
    assert outcome.regression is not None
    return outcome.regression  # type: ignore[no-any-return]


def base_of(rec: RunRecord) -> RunRecord:
    """``rec`` as the baseline file keeps it, read back."""
    return _round_trip(rec).runs["s::sys"]


def _round_trip(rec: RunRecord) -> Baseline:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "b.json"
        save_baseline(path, [rec], None)
        loaded = load_baseline(path)
    assert loaded is not None
    return loaded


# -- load_baseline ------------------------------------------------------------------------------


def test_missing_baseline_is_none(tmp_path: Path) -> None:
    assert load_baseline(tmp_path / "nope.json") is None


def test_corrupt_json_names_the_file_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "retrieval-baseline.json"
    path.write_text('{"version": 1, "runs": {', encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        f"{path}: corrupt baseline (invalid JSON at line 1, column 25: Expecting property name enclosed in double quotes)"
    )
    assert "--rg-save-baseline" in message


def test_not_utf8_is_a_baseline_error(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(BaselineError, match=r"b\.json: corrupt baseline \(not UTF-8 text"):
        load_baseline(path)


def test_wrong_version_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"version": 99, "runs": {}}), encoding="utf-8")
    with pytest.raises(BaselineError, match=r"baseline version 99 is not supported \(expected 1\)"):
        load_baseline(path)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([], r"expected an object with 'runs'"),
        ({"version": 1}, r"expected an object with 'runs'"),
        ({"version": 1, "runs": {"s::sys": {}}}, r"\[s::sys\]: corrupt baseline: run has no"),
        (
            {"version": 1, "runs": {"s::sys": {"queries": {"q1": {"digest": "x"}}}}},
            r"\[s::sys query q1\]: corrupt baseline: query has no 'metrics' dict",
        ),
        (
            {
                "version": 1,
                "runs": {
                    "s::sys": {
                        "queries": {
                            "q1": {
                                "digest": "x",
                                "metrics": {"P@1": "high"},
                                "ranking": [],
                                "relevant_ranks": {},
                            }
                        }
                    }
                },
            },
            r"\[s::sys query q1\]: corrupt baseline: query metric values must be numbers",
        ),
        (
            {"version": 1, "runs": {"s::sys": {"queries": {}, "fingerprint": []}}},
            r"\[s::sys\]: corrupt baseline: run 'fingerprint' is not an object",
        ),
        (
            {"version": 1, "runs": {"s::sys": {"queries": {}, "metrics": {"P@1": float("nan")}}}},
            r"\[s::sys\]: corrupt baseline: P@1 is nan; metric values must be finite",
        ),
        (
            {
                "version": 1,
                "runs": {
                    "s::sys": {
                        "queries": {
                            "q1": {
                                "digest": "x",
                                "metrics": {},
                                "ranking": ["a", 7],
                                "relevant_ranks": {},
                            }
                        }
                    }
                },
            },
            r"\[s::sys query q1\]: corrupt baseline: 'ranking' must be a list of document ids",
        ),
    ],
)
def test_malformed_content_names_the_entry(tmp_path: Path, payload: Any, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    with pytest.raises(BaselineError, match=message):
        load_baseline(path)


# -- save_baseline ------------------------------------------------------------------------------


def test_save_keeps_what_the_comparison_needs_and_drops_latency(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    rec = record([query("q1", metrics={"P@1": 0.5}, ranking=["a", "q1-doc"])])
    save_baseline(path, [rec], None)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == VERSION
    assert data["generator"] == f"pytest-retrieval-gate {__version__}"
    assert list(data["runs"]) == ["s::sys"]
    run = data["runs"]["s::sys"]
    assert run["fingerprint"] == FINGERPRINT
    assert run["k"] == [1, 3]
    assert run["queries"] == {
        "q1": {
            "digest": query_digest("text of q1", {"q1-doc": 1}),
            "category": None,
            "difficulty": None,
            "metrics": {"P@1": 0.5},
            "ranking": ["a", "q1-doc"],
            "relevant_ranks": {"q1-doc": 2},
        }
    }
    # No timing: the same run saved twice writes the same baseline (the history keeps it).
    assert "latency_ms" not in run and "latency_ms" not in run["queries"]["q1"]
    # Nothing left behind by the atomic write.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_save_keeps_runs_this_session_did_not_run(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    save_baseline(path, [record([query("q1")], suite="a"), record([query("q1")], suite="c")], None)
    previous = load_baseline(path)
    assert previous is not None
    # This session ran only suite "c" (now with a second query) and a new suite "b".
    now = [record([query("q1"), query("q2")], suite="c"), record([query("x")], suite="b")]
    save_baseline(path, now, previous)
    runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
    assert list(runs) == ["a::sys", "b::sys", "c::sys"]  # sorted, whatever the session's order
    assert list(runs["a::sys"]["queries"]) == ["q1"]
    assert list(runs["c::sys"]["queries"]) == ["q1", "q2"]


def test_saved_output_is_deterministic(tmp_path: Path) -> None:
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    a = record([query("q1"), query("q2")], suite="a")
    b = record([query("q3")], suite="b")
    save_baseline(one, [a, b], None)
    save_baseline(two, [b, a], None)
    assert one.read_bytes() == two.read_bytes()
    assert one.read_bytes().endswith(b"}\n")


def test_failed_write_leaves_the_old_baseline(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    save_baseline(path, [record([query("q1")])], None)
    before = path.read_bytes()
    unserialisable = record([query("q1", metrics={"P@1": object()})])  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        save_baseline(path, [unserialisable], None)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


# -- align ----------------------------------------------------------------------------------------


def test_align_sorts_queries_into_shared_added_removed_edited() -> None:
    base = base_of(record([query("q1"), query("q2"), query("q3"), query("q4")]))
    now = record(
        [
            query("q1"),
            query("q2", "a reworded q2"),  # text edited
            query("q3", relevant={"q3-doc": 1, "other": 1}),  # judgments edited
            query("q5"),
        ]
    )
    got = align(now, base)
    assert got.shared == ("q1",)
    assert got.edited == ("q2", "q3")
    assert got.added == ("q5",)
    assert got.removed == ("q4",)
    assert got.not_comparable is None
    assert got.notes == ()


def test_a_grade_change_is_an_edit() -> None:
    base = base_of(record([query("q1", relevant={"d": 1})]))
    assert align(record([query("q1", relevant={"d": 2})]), base).edited == ("q1",)


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("gain", "exponential", "gain changed from 'linear' to 'exponential'"),
    ],
)
def test_defining_fingerprint_change_is_not_comparable(key: str, value: Any, reason: str) -> None:
    base = base_of(record([query("q1")]))
    got = align(record([query("q1")], **{key: value}), base)
    assert got.not_comparable == reason
    assert got.shared == ("q1",)  # still reported, just not compared


def test_a_redefined_metric_alone_is_not_compared() -> None:
    # P@1's definition moved on; R@3's did not: only P@1 is left out, with the reason.
    versions = {"P@1": "P/trec_eval-10/1", "R@3": "R/trec_eval-10/1"}
    metrics = {"P@1": 1.0, "R@3": 1.0}
    then = record([query(f"q{i}", metrics=metrics) for i in range(6)], metric_definitions=versions)
    now = record(
        [query(f"q{i}", metrics={"P@1": 0.0, "R@3": 0.0}) for i in range(6)],
        metric_definitions={**versions, "P@1": "P/trec_eval-10/2"},
    )
    now = dataclasses.replace(now, metrics=metrics)
    then = dataclasses.replace(then, metrics=metrics)
    base = base_of(then)
    got = align(now, base)
    assert got.not_comparable is None
    assert list(got.redefined) == ["P@1"]
    checks = [RegressionCheck("suite", "P@1", 0.01), RegressionCheck("suite", "R@3", 0.01)]
    p1, r3 = compare_with_baseline(
        now, base, checks, path="b.json", alpha=0.05, policy="margin", seed=0
    ).outcomes.values()
    assert figures(p1).not_compared == (
        "the definition of P@1 changed since the baseline (P/trec_eval-10/1 -> "
        "P/trec_eval-10/2); save a new baseline with --rg-save-baseline"
    )
    assert (r3.passed, r3.n, figures(r3).p_value) == (False, 6, 1 / 64)


def test_a_0_1_0_fingerprint_reads_as_version_1_of_every_metric() -> None:
    # 0.1.0 kept one string for all metrics; its trec families are still that definition.
    old = {"metric_definitions": "trec_eval-10/1"}
    assert metric_definitions(old, ["P@5", "R-Prec", "nDCG@10"]) == {
        "P@5": "P/trec_eval-10/1",
        "R-Prec": "R-Prec/trec_eval-10/1",
        "nDCG@10": "nDCG/trec_eval-10/1",
    }
    assert metric_definitions(old, ["P@5"]) == metric_versions(["P@5"])
    assert metric_definitions({}, ["P@5"]) == {}


def test_no_unchanged_query_is_not_comparable() -> None:
    base = base_of(record([query("q1"), query("q2")]))
    got = align(record([query("q1", "new"), query("q3")]), base)
    assert got.not_comparable == "no query is unchanged since the baseline"
    assert (got.edited, got.added, got.removed) == (("q1",), ("q3",), ("q2",))


def test_model_corpus_and_cutoff_changes_are_notes_not_blockers() -> None:
    base = base_of(record([query("q1")], model_identity="minilm@1", corpus_digest="c1"))
    now = record(
        [query("q1")],
        model_identity="minilm@2",
        corpus_digest="c2",
        k=[1, 3, 10],
        plugin_version="0.2.0",
        system={"retriever": "app:search2"},
    )
    got = align(now, base)
    assert got.not_comparable is None
    assert got.notes == (
        "system changed since the baseline: retriever 'app:search' -> 'app:search2'",
        "model_identity changed since the baseline: 'minilm@1' -> 'minilm@2'",
        "corpus_digest changed since the baseline: 'c1' -> 'c2'",
        "k changed since the baseline: [1, 3] -> [1, 3, 10]",
        "plugin_version changed since the baseline: '0.1.0' -> '0.2.0'",
    )


def test_identity_changes_name_each_changed_option_old_and_new() -> None:
    # A model identity string ("<tag> {json}") is read as its fields; a system's options as a
    # mapping; a digest shows its first 12 characters. What changed, not the whole identity.
    before = 'st-v2 {"model":"m2v","pca_dims":128,"revision":"a"}'
    now = 'st-v2 {"model":"m2v","pca_dims":64,"revision":"a"}'
    base = base_of(
        record(
            [query("q1")],
            model_identity=before,
            corpus_digest="a" * 64,
            system={"embedder": "model2vec", "pca_dims": 128, "index": {"m": 16}},
        )
    )
    now_record = record(
        [query("q1")],
        model_identity=now,
        corpus_digest="b" * 64,
        system={"embedder": "model2vec", "pca_dims": 64, "index": {"m": 32}},
    )
    got = align(now_record, base)
    assert got.changes == (
        "system: pca_dims 128 -> 64, index.m 16 -> 32",
        "model_identity: pca_dims 128 -> 64",
        "corpus_digest: 'aaaaaaaaaaaa' -> 'bbbbbbbbbbbb'",
    )


def test_suite_digest_change_alone_is_neither_note_nor_blocker() -> None:
    # Editing one query changes the suite digest; the per-query digests already say which.
    base = base_of(record([query("q1"), query("q2")]))
    got = align(record([query("q1"), query("q2", "edited")], suite_digest="other"), base)
    assert (got.not_comparable, got.notes, got.shared) == (None, (), ("q1",))


# -- explain ----------------------------------------------------------------------------------------


def test_explain_gives_ranks_before_after_and_who_took_the_places() -> None:
    # "Displaced by": ranked ahead of the document now, and not ahead of it before.
    then = query(
        "q1",
        metrics={"P@3": 1 / 3},
        ranking=["a", "r1", "b", "r2", "c"],
        relevant={"r1": 1, "r2": 1},
    )
    now = query(
        "q1",
        metrics={"P@3": 0.0},
        ranking=["x", "y", "a", "r1", "b"],
        relevant={"r1": 1, "r2": 1},
    )
    # r1 2 -> 4: ahead of it now x, y, a; before only a.
    # r2 4 -> gone: its old top 4 now holds x, y, a, r1; before a, r1, b were ahead of it.
    assert explain("q1", now, then, "P@3", "ranking") == (
        "q1: P@3 0.3333 -> 0; r1 2 -> 4 (displaced by x, y); r2 4 -> - (displaced by x, y)"
    )


def test_explain_shows_gains_and_skips_unmoved_documents() -> None:
    then = query("q1", metrics={"R@3": 0.5}, ranking=["r1", "z", "y"], relevant={"r1": 1, "r2": 1})
    now = query("q1", metrics={"R@3": 0.5}, ranking=["r1", "r2", "y"], relevant={"r1": 1, "r2": 1})
    assert explain("q1", now, then, "R@3", "ranking") == "q1: R@3 0.5 -> 0.5; r2 - -> 2"


def test_explain_lists_at_most_three_intruders() -> None:
    # r fell out of the top 5; its old place and those ahead of it are now p, q, s, t, u.
    then = query("q1", metrics={"MRR@5": 0.2}, ranking=["a", "b", "c", "d", "r"], relevant={"r": 1})
    now = query("q1", metrics={"MRR@5": 0.0}, ranking=["p", "q", "s", "t", "u"], relevant={"r": 1})
    assert explain("q1", now, then, "MRR@5", "ranking") == (
        "q1: MRR@5 0.2 -> 0; r 5 -> - (displaced by p, q, s and 2 more)"
    )


def test_explain_with_unchanged_ranks() -> None:
    same = query("q1", metrics={"P@1": 1.0}, ranking=["q1-doc"])
    assert explain("q1", same, same, "P@1", "ranking") == "q1: P@1 1 -> 1; relevant ranks unchanged"


# -- check_regressions over a baseline read back from disk ---------------------------------------


def test_an_unchanged_run_at_the_top_of_its_range_names_what_a_lost_answer_needs() -> None:
    # Every query at 1, nothing changed: neither today's drops nor the baseline have a spread,
    # but a lost answer drops by 1. The queries the tolerance needs are what whole queries
    # losing tolerance + tolerance = 0.02 need (q = 0.02: sd sqrt(0.0196), m3 0.0196 * 0.96),
    # the figure --rg-plan states for the same baseline (gates/plan.py).
    then = record([query(f"q{i}") for i in range(10)])
    base = base_of(then)
    [out] = check_regressions(
        then, base, align(then, base).shared, [RegressionCheck("suite", "P@1", 0.01)], alpha=0.05
    )
    assert out.passed
    # 1,039 for whole queries lost, against 195 for a pseudo-query's spread (docs/verdicts.md).
    assert queries_needed(math.sqrt(0.0196), 1.0, 0.01, 0.05, m3=0.0196 * 0.96) == 1039
    assert queries_needed(0.0, 1.0, 0.01, 0.05) == 195
    assert figures(out).queries_needed == 1039


def test_the_default_rule_fails_an_observed_drop_beyond_the_tolerance() -> None:
    # Five of ten queries drop P@1 from 1 to 0: mean 1 -> 0.5, a drop of 0.5 > 0.01, so it fails
    # (the margin rule needs p <= alpha; this rule reads the drop). Its resolution: drops d =
    # five 1s and five 0s, mean 0.5, SS = 10 * 0.25 = 2.5; one block of one metric: c =
    # t_{0.975, 9} = 2.2621572, pseudo-query weight w = c^2 / 4 = 1.2793388; epsilon =
    # c * sqrt((2.5 + w) / (9 + w)) / sqrt(10) = 0.4337586.
    then = record([query(f"q{i}") for i in range(10)])
    now = record(
        [query(f"q{i}", metrics={"P@1": 0.0}, ranking=["spam"]) for i in range(5)]
        + [query(f"q{i}") for i in range(5, 10)]
    )
    base = base_of(then)
    shared = align(now, base).shared
    [out] = check_regressions(
        now, base, shared, [RegressionCheck("suite", "P@1", 0.01)], alpha=0.05
    )
    assert not out.passed
    assert (out.value, figures(out).baseline, out.threshold, out.n) == (0.5, 1.0, 0.99, 10)
    assert (figures(out).verdict, figures(out).policy, figures(out).reliability) == (
        "regressed",
        "tolerance",
        0.95,
    )
    assert figures(out).resolution == pytest.approx(0.4337585970)
    assert (figures(out).p_value, figures(out).detectable_drop) == (None, None)
    assert out.detail[0] == (
        "regressed: P@1 dropped 0.5 > tolerance 0.01 (this run's resolution +-0.4338 at 95 %)"
    )
    assert out.detail[2] == (
        "this run's resolution +-0.4338 at 95 % reliability, shared over the session's 1 suite "
        "x system scope (c 2.262): a true drop above 0.4438 fails and a true gain above 0.4238 "
        "passes"
    )
    # The advice is the baseline's, not today's drops': its values (every P@1 at 1) have no
    # spread, so its resolution is the pseudo-query's, c sqrt(w / (9 + w)) / sqrt(10) =
    # 2.2621572 x sqrt(1.2793388 / 10.2793388) / sqrt(10) = 0.2523672, and its queries are
    # those whole lost answers need (1,039 at a loss of 0.02: test above).
    c = 2.2621572
    advice = c * math.sqrt(c * c / 4 / (9 + c * c / 4)) / math.sqrt(10)
    assert figures(out).planned_resolution == pytest.approx(advice, rel=1e-6)
    assert figures(out).planned_resolution == pytest.approx(0.2523672, abs=1e-6)
    assert figures(out).queries_needed == 1039
    assert out.detail[3] == (
        "coarse: changes with no real effect on P@1 will often fail over this suite; set a "
        "tolerance of at least 0.2524 (what the baseline's 10 queries resolve), or grow the "
        "suite to about 1,039 queries for 0.01"
    )
    assert out.detail[4] == "q0: P@1 1 -> 0; q0-doc 1 -> - (displaced by spam)"
    # The same drop within a tolerance of 0.5 (equal: not larger) passes; one of 0.49 fails.
    [equal] = check_regressions(
        now, base, shared, [RegressionCheck("suite", "P@1", 0.5)], alpha=0.05
    )
    assert (figures(equal).verdict, equal.passed) == ("ok", True)
    assert equal.detail[0].startswith(
        "ok: P@1 dropped 0.5 <= tolerance 0.5 (this run's resolution +-"
    )
    [over] = check_regressions(
        now, base, shared, [RegressionCheck("suite", "P@1", 0.49)], alpha=0.05
    )
    assert not over.passed
    # The other way round, an improvement passes; the baseline's own run changed nothing.
    [rose] = check_regressions(
        then, base_of(now), shared, [RegressionCheck("suite", "P@1", 0.0)], alpha=0.05
    )
    assert rose.passed
    assert rose.detail[0].startswith("ok: P@1 rose 0.5 (tolerance 0) (this run's resolution")
    [same] = check_regressions(
        then, base, shared, [RegressionCheck("suite", "P@1", 0.0)], alpha=0.05
    )
    assert same.passed
    assert same.detail[0] == (
        "ok: P@1: no compared query changed (tolerance 0) (this run's resolution +-0.2524 at 95 %)"
    )


def test_more_blocks_widen_the_resolution_and_change_no_decision() -> None:
    then = record([query(f"q{i}") for i in range(10)])
    now = record(
        [query(f"q{i}", metrics={"P@1": 0.0}, ranking=["spam"]) for i in range(2)]
        + [query(f"q{i}") for i in range(2, 10)]
    )
    base = base_of(then)
    shared = align(now, base).shared
    checks = [RegressionCheck("suite", "P@1", 0.1), RegressionCheck("suite", "P@1", 0.3)]
    alone = check_regressions(now, base, shared, checks, alpha=0.05, blocks=1)
    shared_out = check_regressions(now, base, shared, checks, alpha=0.05, blocks=6)
    for a, b in zip(alone, shared_out, strict=True):
        assert (a.passed, figures(a).verdict) == (b.passed, figures(b).verdict)
        # 6 blocks: each at 1 - 0.95^(1/6) = 0.008512, c = t_{1 - 0.004256, 9}. Drops: two 1s,
        # eight 0s, SS = 2 * 0.8^2 + 8 * 0.2^2 = 1.6, skewed: m3 = (2 * 0.8^3 - 8 * 0.2^3) / 10
        # = 0.096, and c grows by the skewness term (m3 / s^3) (2 c^2 + 1) / (6 sqrt(10)).
        for c, found in (
            (t_quantile(0.975, 9), figures(a)),
            (t_quantile(1 - block_level(0.05, 6) / 2, 9), figures(b)),
        ):
            w = c * c / 4
            sd = math.sqrt((1.6 + w) / (9 + w))
            k = 0.096 / sd**3 * (2 * c * c + 1) / (6 * math.sqrt(10))
            assert found.resolution == pytest.approx((c + k) * sd / math.sqrt(10))
        assert figures(b).resolution > figures(a).resolution  # type: ignore[operator]
    # Drop 0.2: over 0.1, within 0.3.
    assert [o.passed for o in alone] == [False, True]


def test_a_diagnostic_beyond_the_tolerance_is_reported_not_failed() -> None:
    then = record([query(f"q{i}") for i in range(4)])
    now = record(
        [query("q0", metrics={"P@1": 0.0}, ranking=["spam"])]
        + [query(f"q{i}") for i in range(1, 4)]
    )
    base = base_of(then)
    [out] = check_regressions(
        now,
        base,
        align(now, base).shared,
        [RegressionCheck("suite", "P@1", 0.01, gated=False)],
        alpha=0.05,
    )
    assert (figures(out).verdict, out.passed, figures(out).diagnostic) == ("regressed", True, True)
    assert "diagnostic: not a gated item (see regression_scopes)" in out.detail


def test_an_unknown_policy_is_refused() -> None:
    then = record([query("q0")])
    with pytest.raises(ValueError, match="policy must be one of tolerance, margin"):
        check_regressions(then, base_of(then), ("q0",), [], alpha=0.05, policy="vibes")


def test_regression_verdicts_on_the_tolerance_as_a_margin() -> None:
    # Five queries drop P@1 from 1 to 0, five stay: mean 1 -> 0.5. With tolerance 0.01 the shifted
    # differences x are five -0.99 and five +0.01, sum T = -4.9. Of the 2^10 sign patterns, those
    # with sum <= -4.9 keep all five -0.99 negative (-4.95) and any signs on the 0.01s (+-0.05):
    # 2^5 of 2^10, p(drop > tolerance) = 1/32. Sum >= -4.9 fails only when all five -0.99 are
    # negative and the 0.01s sum below +0.05 (31 of their 32 patterns): p(within) = 993/1024.
    then = record([query(f"q{i}") for i in range(10)])
    now = record(
        [query(f"q{i}", metrics={"P@1": 0.0}, ranking=["spam"]) for i in range(5)]
        + [query(f"q{i}") for i in range(5, 10)]
    )
    base = base_of(then)
    shared = align(now, base).shared
    checks = [RegressionCheck("suite", "P@1", 0.01)]
    [out] = check_regressions(now, base, shared, checks, alpha=0.05, policy="margin", seed=0)
    assert not out.passed
    assert (out.value, figures(out).baseline, out.threshold, out.n) == (0.5, 1.0, 0.99, 10)
    assert (figures(out).p_value, figures(out).p_within) == (1 / 32, 993 / 1024)
    assert figures(out).verdict == "regressed"
    assert out.worst == tuple((f"q{i}", -1.0) for i in range(5))
    assert out.detail[0] == (
        "regressed: the drop (0.5) is significantly larger than the tolerance (0.01)"
    )
    assert out.detail[1] == (
        "baseline 1 -> now 0.5 (drop 0.5, tolerance 0.01) over 10 shared queries; 5 worse, 0 better"
    )
    assert out.detail[2] == (
        "paired test of the drop against the tolerance (exact sign-flip): p(drop > tolerance) = "
        "0.03125, p(drop < tolerance) = 0.9697, each at level 0.05 (alpha 0.05 / 1 regression "
        "items)"
    )
    # Every baseline value is 1: no spread, so the detectable drop is the tolerance itself.
    assert out.detail[3] == "smallest detectable drop (80 % power): 0.01"
    # Four queries falling to 0 give T = -3.96 + 0.06 = -3.9: sums <= -3.9 need the four -0.99
    # negative, any signs on the six 0.01s: 2^6 / 2^10 = 1/16 > 0.05; five give 1/32 (above).
    assert out.detail[4] == "5 of 10 queries must fall to 0 to fail"
    assert figures(out).fewest_worse == 5
    assert out.detail[5] == "q0: P@1 1 -> 0; q0-doc 1 -> - (displaced by spam)"
    # Same drop, tolerance 0.5: x is five -0.5 and five +0.5, T = 0; sums <= 0 and sums >= 0 are
    # each (1024 + C(10, 5)) / 2 = 638 of 1024 patterns: neither shown, underpowered, passes.
    [lenient] = check_regressions(
        now,
        base,
        shared,
        [RegressionCheck("suite", "P@1", 0.5)],
        alpha=0.05,
        policy="margin",
        seed=0,
    )
    assert (figures(lenient).p_value, figures(lenient).p_within) == (638 / 1024, 638 / 1024)
    assert (figures(lenient).verdict, lenient.passed) == ("underpowered", True)
    [strict] = check_regressions(
        now,
        base,
        shared,
        [RegressionCheck("suite", "P@1", 0.5)],
        alpha=0.05,
        policy="margin",
        strict=True,
    )
    assert (figures(strict).verdict, strict.passed) == ("underpowered", False)
    assert headline(strict).startswith("P@1 regression over suite (s x sys): FAILED: underpowered")
    # The baseline's own run: no query changed, ok whatever the tolerance.
    [same] = check_regressions(then, base, shared, checks, alpha=0.05, policy="margin")
    assert (figures(same).verdict, same.passed, same.detail[0]) == (
        "ok",
        True,
        "ok: no compared query changed",
    )


def test_ok_needs_the_drop_shown_within_the_tolerance() -> None:
    # One of ten queries drops 1 -> 0.9 (d = -0.1), tolerance 0.2: x is +0.1 once and +0.2 nine
    # times, T = 1.9. A sum >= 1.9 needs every sign +: p(within) = 2^-10 = 1/1024, ok at 0.05.
    then = record([query(f"q{i}") for i in range(10)])
    now = record([query("q0", metrics={"P@1": 0.9})] + [query(f"q{i}") for i in range(1, 10)])
    base = base_of(then)
    [out] = check_regressions(
        now,
        base,
        align(now, base).shared,
        [RegressionCheck("suite", "P@1", 0.2)],
        alpha=0.05,
        policy="margin",
    )
    assert (figures(out).p_within, figures(out).p_value) == (1 / 1024, 1.0)
    assert (figures(out).verdict, out.passed) == ("ok", True)
    assert out.detail[0] == "ok: the drop (0.01) is shown to be within the tolerance (0.2)"


def test_family_divides_alpha_between_the_session_items() -> None:
    # The 1/32 of the regressed case above is over 0.05 / 3: underpowered, p x 3 = 3/32.
    then = record([query(f"q{i}") for i in range(10)])
    now = record(
        [query(f"q{i}", metrics={"P@1": 0.0}) for i in range(5)]
        + [query(f"q{i}") for i in range(5, 10)]
    )
    base = base_of(then)
    checks = [RegressionCheck("suite", "P@1", 0.01)]
    [out] = check_regressions(
        now, base, align(now, base).shared, checks, alpha=0.05, policy="margin", family=3
    )
    assert (figures(out).p_adjusted, figures(out).alpha, figures(out).family) == (
        3 / 32,
        0.05 / 3,
        3,
    )
    assert (figures(out).verdict, out.passed) == ("underpowered", True)


def test_family_size_leaves_out_items_that_cannot_reach_alpha_over_k() -> None:
    # Smallest p: 5 queries 2^-5 = 0.031, 10 queries 2^-10 = 0.00098, 40 queries Phi(-sqrt(40)).
    # K = 1: all three reach 0.05 (3 > 1); K = 2: 0.025 leaves the 5-query item out, 2 <= 2.
    assert family_size([5, 10, 40], 0.05) == 2
    assert family_size([], 0.05) == 1
    assert family_size([2, 3], 0.05) == 1  # 2^-2, 2^-3 > 0.05: nothing can reach it
    assert family_size([100] * 7, 0.05) == 7


def test_only_shared_queries_are_compared() -> None:
    # q1 edited (and worse), q2 unchanged, q3 added with 0: only q2 counts.
    then = record([query("q1"), query("q2")])
    now = record(
        [
            query("q1", "edited", metrics={"P@1": 0.0}),
            query("q2"),
            query("q3", metrics={"P@1": 0.0}),
        ]
    )
    base = base_of(then)
    shared = align(now, base).shared
    [out] = check_regressions(
        now,
        base,
        shared,
        [RegressionCheck("suite", "P@1", 0.01)],
        alpha=0.05,
        policy="margin",
        seed=0,
    )
    assert (out.passed, out.n, out.value, figures(out).baseline) == (True, 1, 1.0, 1.0)


def test_metric_missing_from_the_baseline_is_said_not_passed_silently() -> None:
    then = record([query("q1"), query("q2")])
    now = record(
        [query("q1", metrics={"P@1": 1.0, "P@10": 0.1}), query("q2", metrics={"P@1": 1.0})],
        cutoffs=(1, 10),
    )
    base = base_of(then)
    checks = [RegressionCheck("suite", "P@10", 0.01), RegressionCheck("suite", "P@1", 0.01)]
    missing, p1 = check_regressions(
        now, base, ("q1", "q2"), checks, alpha=0.05, policy="margin", seed=0
    )
    assert missing.detail == ("not compared: this run does not compute P@10 (cutoffs [1, 10])",)
    assert str(figures(missing).not_compared).startswith("this run does not compute P@10")
    assert missing.n == 0
    # Two queries are compared for P@1 and neither changed: ok, although no pair of two could
    # ever be significant (p >= 1/4).
    assert (p1.n, figures(p1).verdict, figures(p1).not_compared) == (2, "ok", None)
    assert p1.detail[-1] == (
        "even all 2 queries falling to 0 would not be significant (smallest possible p 0.25 > 0.05)"
    )
    second = dataclasses.replace(now.queries[1], metrics={"P@1": 1.0, "P@10": 0.1})
    now = dataclasses.replace(now, queries=(now.queries[0], second))
    missing, _ = check_regressions(
        now, base, ("q1", "q2"), checks, alpha=0.05, policy="margin", seed=0
    )
    assert figures(missing).not_compared == (
        "the baseline has no P@10 (saved with cutoffs [1, 3], now [1, 10]); "
        "save a new baseline with --rg-save-baseline"
    )


def test_explain_names_everyone_who_moved_ahead() -> None:
    # r 1 -> 3: both new documents ahead of it pushed it down, not only the one at rank 1.
    then = query("q1", metrics={"MRR@5": 1.0}, ranking=["r", "a", "b"], relevant={"r": 1})
    now = query("q1", metrics={"MRR@5": 1 / 3}, ranking=["x", "y", "r"], relevant={"r": 1})
    assert explain("q1", now, then, "MRR@5", "ranking") == (
        "q1: MRR@5 1 -> 0.3333; r 1 -> 3 (displaced by x, y)"
    )


def test_checks_that_compare_nothing_are_not_compared() -> None:
    # Category c has no query: its check compares nothing and is said so (its item skips).
    then = record([query(f"q{i}") for i in range(5)])
    now = record([query(f"q{i}", metrics={"P@1": 0.0}) for i in range(5)])
    base = base_of(then)
    checks = [RegressionCheck("suite", "P@1", 0.01), RegressionCheck("category:c", "P@1", 0.01)]
    suite, empty = check_regressions(
        now, base, align(now, base).shared, checks, alpha=0.05, policy="margin", seed=0
    )
    # x = five -0.99: only the all-negative pattern has sum <= T, p = 2^-5.
    assert (figures(suite).p_value, figures(suite).p_adjusted, suite.passed) == (
        1 / 32,
        1 / 32,
        False,
    )
    assert (empty.n, figures(empty).not_compared, empty.passed) == (
        0,
        "no query of category:c is shared with the baseline",
        True,
    )


# -- compare_with_baseline: the comparison the report shows and the outcomes items read ------------


def test_comparison_without_a_baseline_run_has_no_outcomes() -> None:
    got = compare_with_baseline(
        record([query("q1")]), None, [], path="b.json", alpha=0.05, policy="margin", seed=0
    )
    assert (got.comparison, dict(got.outcomes), got.reason) == (
        None,
        {},
        "no baseline for this suite and system",
    )


def test_not_comparable_keeps_the_reason_and_decides_nothing() -> None:
    base = base_of(record([query("q1")]))
    now = record([query("q1")], gain="exponential")
    got = compare_with_baseline(
        now,
        base,
        [RegressionCheck("suite", "P@1", 0.01)],
        path="b.json",
        alpha=0.05,
        policy="margin",
        seed=0,
    )
    assert got.reason == "gain changed from 'linear' to 'exponential'"
    assert dict(got.outcomes) == {}
    assert got.comparison is not None
    assert (got.comparison.comparable, got.comparison.rows, got.comparison.path) == (
        False,
        None,
        "b.json",
    )


def test_comparison_rows_are_keyed_by_scope_and_skip_what_compared_nothing() -> None:
    then = record([query(f"q{i}", category="a") for i in range(5)])
    now = record([query(f"q{i}", metrics={"P@1": 0.0}, category="a") for i in range(5)])
    checks = [
        RegressionCheck("suite", "P@1", 0.01),
        RegressionCheck("category:a", "P@1", 0.01),
        RegressionCheck("category:b", "P@1", 0.01),  # no query: nothing to show
    ]
    got = compare_with_baseline(
        now, base_of(then), checks, path="b.json", alpha=0.05, policy="margin", family=2
    )
    assert got.comparison is not None and got.comparison.rows is not None
    assert list(got.comparison.rows) == ["P@1", "category:a::P@1"]
    row = got.comparison.rows["P@1"]
    # Five of five drop: p = 2^-5 for both, times the family of 2.
    assert (row.baseline, row.current, row.p_value, row.p_adjusted, row.degraded) == (
        1.0,
        0.0,
        1 / 32,
        1 / 16,
        5,
    )
    assert (row.passed, row.verdict) == (True, "underpowered")  # 1/32 > 0.05 / 2
    assert got.comparison.means == {"P@1": 1.0}
    assert set(got.outcomes) == {("suite", "P@1"), ("category:a", "P@1"), ("category:b", "P@1")}


# -- files written by 0.1.0 -------------------------------------------------------------------------

BASELINE_0_1_0 = Path(__file__).parents[1] / "data" / "baseline-0.1.0.json"


def test_a_baseline_written_by_0_1_0_loads_and_saves_back_byte_for_byte(tmp_path: Path) -> None:
    # Saved by pytest-retrieval-gate 0.1.0 from examples/quickstart (MiniLM in chroma).
    loaded = load_baseline(BASELINE_0_1_0)
    assert loaded is not None
    run = loaded.get("sql-lineage", "minilm")
    assert run is not None
    assert (run.n, run.k, run.metrics["MRR@5"]) == (12, (1, 3, 5), 0.875)
    assert run.fingerprint["metric_definitions"] == "trec_eval-10/1"
    assert run.queries[0].id == "join_001"
    again = tmp_path / "b.json"
    save_baseline(again, [], loaded)
    assert again.read_bytes() == BASELINE_0_1_0.read_bytes()


def test_saving_keeps_every_key_of_what_it_does_not_replace(tmp_path: Path) -> None:
    # A newer version's keys, on a run this session does not run and on the file: re-encoded
    # by this version's codec, they were dropped from the file, and no copy was kept anywhere.
    path = tmp_path / "b.json"
    save_baseline(path, [record([query("q1")], suite="a"), record([query("q1")], suite="c")], None)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["runs"]["a::sys"]["rerank"] = {"depth": 50}
    data["runs"]["a::sys"]["queries"]["q1"]["judged"] = [1, 2]
    data["team"] = {"owner": "search"}
    path.write_text(json.dumps(data), encoding="utf-8")
    previous = load_baseline(path)
    assert previous is not None
    save_baseline(path, [record([query("q1"), query("q2")], suite="c")], previous)
    again = json.loads(path.read_text(encoding="utf-8"))
    assert again["runs"]["a::sys"] == data["runs"]["a::sys"]  # every key, as it was
    assert again["team"] == {"owner": "search"}
    assert list(again["runs"]["c::sys"]["queries"]) == ["q1", "q2"]  # replaced: this session's
    assert list(again)[:2] == ["version", "generator"]  # still recognised as the plugin's


_RUN = (
    '{"version": 1, "generator": "pytest-retrieval-gate 0.2.0", "runs": {"s::sys": {"queries": '
    '{}, "metrics": {"P@1": %s}}}}'
)


@pytest.fixture
def metric_bounds() -> Any:
    """The metric registry's bounds, as the plugin installs them in a session."""
    from retrieval_gate.baseline import entry
    from retrieval_gate.metrics.registry import bounds_by_name, format_bounds

    before = entry._bounds
    entry.use_metric_bounds(bounds_by_name, format_bounds)
    yield
    entry._bounds = before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(_RUN % "-0.5", r"P@1 .* is -0\.5, outside its bounds \[0, 1\]", id="negative"),
        pytest.param(_RUN % "Infinity", r"P@1 is inf; metric values must be finite", id="infinity"),
        pytest.param(_RUN % "1e400", r"P@1 is inf; metric values must be finite", id="1e400"),
        pytest.param(_RUN % "NaN", r"P@1 is nan; metric values must be finite", id="nan"),
        pytest.param(_RUN % ("9" * 5000), r"an integer has more than \d+ digits", id="5000-digits"),
        pytest.param(
            '{"version": 1, "runs": {"s::sys": {"queries": {}}, "s::sys": {"queries": {}}}}',
            r"key 's::sys' is given twice",
            id="duplicate-run",
        ),
        pytest.param("[" * 200_000, r"nested more than 100 levels deep", id="200000-deep"),
        pytest.param(
            '{"version": 1, "runs": {"s::sys": {"queries": {}, "k": [1e400]}}}',
            r"'k' must be a list of whole numbers >= 1",
            id="cutoff-1e400",
        ),
    ],
)
def test_a_hostile_baseline_is_one_line_naming_it(
    tmp_path: Path, text: str, message: str, metric_bounds: None
) -> None:
    path = tmp_path / "b.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BaselineError, match=message) as raised:
        load_baseline(path)
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 600
