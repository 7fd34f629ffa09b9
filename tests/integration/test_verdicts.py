"""The margin rule (``verdicts = "margin"``) end to end: regressed, ok, underpowered (strict or
not), the detectable drop, category regressions as diagnostics, and the session-wide family under
xdist. The default rule has its own tests in test_tolerance_rule.py."""

from __future__ import annotations

import json

import pytest

from .conftest import write_suite
from .test_rg_baseline import (
    RETRIEVER,
    SETTINGS,
    damage,
    regression_gates,
    report,
    save,
    suite_text,
    write,
)

SCOPES = 'regression_scopes = ["suite", "category"]'


def settings(extra: str = "") -> str:
    # The margin rule; otherwise the defaults: only suite-level regressions are items.
    return SETTINGS.format(extra=f'verdicts = "margin"\n{extra}').replace(SCOPES, "")


@pytest.fixture
def proj(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=settings())
    pytester.makepyfile(gen_app=RETRIEVER)
    pytester.syspathinsert()
    return pytester


def test_regressed_fails_and_says_so(proj: pytest.Pytester) -> None:
    write(proj, suite_text(40))
    save(proj)
    damage(proj, {i: 2 for i in range(10)})
    result = proj.runpytest("--retrieval-gate")
    # The three floors pass; the one suite-level regression item fails; categories are diagnostics.
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAILED topics.retrieval.yaml::gen::regression::MRR@10: regressed: the drop (0.1667) "
            "is significantly larger than the tolerance (0.01)*"
        ]
    )
    gates = regression_gates(proj)
    assert list(gates) == ["MRR@10"]
    assert (gates["MRR@10"]["verdict"], gates["MRR@10"]["family"]) == ("regressed", 1)
    assert gates["MRR@10"]["detectable_drop"] == 0.01
    rows = report(proj)["runs"][0]["baseline"]["metrics"]
    # The category comparisons are still in the report, marked as diagnostics.
    assert rows["category:alpha::MRR@10"]["diagnostic"] is True
    assert rows["category:alpha::MRR@10"]["verdict"] == "regressed"
    assert rows["MRR@10"]["diagnostic"] is False
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "| regressed (diagnostic) |" in markdown
    assert "**REGRESSED**" in markdown


def test_ok_when_the_drop_is_shown_within_the_tolerance(proj: pytest.Pytester) -> None:
    write(proj, suite_text(40, header="tolerance: {MRR@10: 0.3}"))
    save(proj)
    # Ten queries to rank 2: drop 0.125; x = ten -0.2, thirty +0.3: p(within) = Phi(-3.976).
    damage(proj, {i: 1 for i in range(10)})
    proj.runpytest("--retrieval-gate").assert_outcomes(passed=4)
    gate = regression_gates(proj)["MRR@10"]
    assert (gate["verdict"], gate["passed"]) == ("ok", True)
    assert gate["p_within"] == pytest.approx(3.5e-5, rel=0.02)


def test_underpowered_passes_with_a_warning_everywhere_and_fails_under_strict_verdicts(
    proj: pytest.Pytester,
) -> None:
    """One saved baseline and one damage for both settings: ``strict_verdicts`` changes the
    verdict's outcome only, not what is saved or measured."""
    write(proj, suite_text(160))
    save(proj)
    # Three of 160 queries lose their document: x = three -0.99, 157 +0.01, z = -0.8143.
    damage(proj, {3: 12, 50: 12, 77: 12})
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ["*UNDERPOWERED (passed) topics.retrieval.yaml::gen::regression::MRR@10: underpowered:*"]
    )
    gate = regression_gates(proj)["MRR@10"]
    assert (gate["verdict"], gate["passed"]) == ("underpowered", True)
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "**warning**: MRR@10 is underpowered" in markdown

    # Strict: the same underpowered verdict fails.
    proj.makefile(".toml", pyproject=settings("strict_verdicts = true"))
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["MRR@10 regression over suite (topics x gen): FAILED: underpowered: *"]
    )


def test_detectable_drop_and_fewest_worse_by_hand(proj: pytest.Pytester) -> None:
    write(proj, suite_text(12))
    # The baseline has spread: six queries at rank 1 (MRR 1), six at rank 2 (MRR 0.5).
    damage(proj, {i: 1 for i in range(6, 12)})
    save(proj)
    proj.runpytest("--retrieval-gate").assert_outcomes(passed=4)
    gate = regression_gates(proj)["MRR@10"]
    # Sample sd of six 1s and six 0.5s: sqrt(12 * 0.25^2 / 11) = 0.261116; x sqrt(2) = 0.369274;
    # (z_0.95 + z_0.8) / sqrt(12) = 2.486475 / 3.464102 = 0.717783; 0.01 + 0.265059 = 0.275059.
    assert gate["detectable_drop"] == pytest.approx(0.275059, abs=1e-6)
    # Each of the six 1s falling to 0 gives -0.99 against +0.01s that move a sum by at most
    # 0.22: p = 2^-m, 2^-5 = 0.031 <= 0.05 (family 1), 2^-4 = 0.0625 is not.
    assert gate["fewest_worse"] == 5
    assert gate["verdict"] == "ok"  # nothing changed
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert (
        "**warning**: MRR@10: the smallest drop caught 80 % of the time is 0.2751, more than "
        "twice the tolerance 0.01"
    ) in markdown


def test_family_spans_the_session_and_is_the_same_under_xdist(proj: pytest.Pytester) -> None:
    """Most of its CPU is the two xdist workers: two, so that the three suites' items are split
    between processes and the family must still span the session."""
    pytest.importorskip("xdist")
    write(proj, suite_text(40))
    write(proj, suite_text(12, name="other"), name="other.retrieval.yaml")
    write(proj, suite_text(3, name="tiny"), name="tiny.retrieval.yaml")
    save(proj)
    damage(proj, {i: 2 for i in range(10)})
    proj.runpytest("--retrieval-gate")
    serial = {g["nodeid"]: g for g in report(proj)["gates"] if "verdict" in g and "family" in g}
    proj.runpytest("--retrieval-gate", "-n", "2", "-p", "no:benchmark")
    parallel = {g["nodeid"]: g for g in report(proj)["gates"] if "verdict" in g and "family" in g}
    # Three regression items; tiny's 3 queries can never reach 0.05 / K (2^-3 = 0.125): K = 2.
    assert {g["family"] for g in serial.values()} == {2}
    assert serial["tiny.retrieval.yaml::gen::regression::MRR@10"]["verdict"] == "underpowered"
    assert serial["topics.retrieval.yaml::gen::regression::MRR@10"]["verdict"] == "regressed"
    strip = {"nodeid"}
    assert json.dumps(
        {k: {f: v for f, v in g.items() if f not in strip} for k, g in sorted(serial.items())}
    ) == json.dumps(
        {k: {f: v for f, v in g.items() if f not in strip} for k, g in sorted(parallel.items())}
    )


def test_ties_at_the_cutoff_reach_the_report(project: pytest.Pytester) -> None:
    # Word overlap: sql/orders.sql and sql/payments.sql both share "join" and "orders" (score 2);
    # trec_eval's order puts payments (larger id) first, so P@1 = 0, but the other order gives 1.
    write_suite(
        project,
        """
        name: ties
        k: [1]
        queries:
          - id: q
            query: join orders
            relevant: [sql/orders.sql]
        """,
    )
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1)  # the suite's run item; there are no gates
    run = json.loads((project.path / "retrieval-gate-report.json").read_text())["runs"][0]
    assert run["metrics"]["P@1"] == 0.0  # trec_eval's order still gives the value
    assert run["stats"]["ties_at_cutoff"]["P@1"] == {"low": 0.0, "high": 1.0, "queries": 1}
    assert run["queries"][0]["unjudged"] == ["sql/payments.sql"]
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert (
        "ties at the cutoff: nDCG@1 could be 0.0000-1.0000 depending on tie order (1 query with "
        "ties straddling 1); R@1 could be 0.0000-1.0000"
    ) in markdown
    assert "ground truth: Judged@1 0.0000, 1 of 1 query has unjudged documents in their top 1" in (
        markdown
    )


def test_suggest_floors_writes_a_diff_and_never_a_suite(proj: pytest.Pytester) -> None:
    suite = write(proj, suite_text(40))
    # Every 4th query loses rank 1 to one spam document: MRR@10 1/2 there, 1 elsewhere.
    damage(proj, {i: 1 for i in range(0, 40, 4)})
    save(proj)
    before = suite.read_bytes()
    result = proj.runpytest("--retrieval-gate", "--rg-suggest-floors", "floors.diff")
    assert result.ret == 0
    # Suite: 10 of 40 at 0.5, mean 0.875, sd sqrt((10 * 0.375^2 + 30 * 0.125^2) / 39) = 0.219265;
    # 0.875 - t(0.975, 39) 2.0226909 * 0.219265 / sqrt(40) = 0.8048758 -> 0.80.
    # alpha and beta: 5 of 20 at 0.5 each, sd sqrt((5 * 0.375^2 + 15 * 0.125^2) / 19) = 0.222131;
    # 0.875 - t(0.975, 19) 2.0930241 * 0.222131 / sqrt(20) = 0.7710396 -> 0.77.
    result.stdout.fnmatch_lines(
        [f"suggested floors (3 floors in 1 suite files) written to {proj.path / 'floors.diff'}*"]
    )
    diff = (proj.path / "floors.diff").read_text(encoding="utf-8").splitlines()
    assert [line for line in diff if line[:1] in "+-"] == [
        "--- a/topics.retrieval.yaml",
        "+++ b/topics.retrieval.yaml",
        "-  MRR@10: 0.1",
        "+  MRR@10: 0.80",
        "-  alpha: {MRR@10: 0.1}",
        "-  beta: {MRR@10: 0.1}",
        "+  alpha: {MRR@10: 0.77}",
        "+  beta: {MRR@10: 0.77}",
    ]
    assert suite.read_bytes() == before
    # To the terminal instead.
    shown = proj.runpytest("--retrieval-gate", "--rg-suggest-floors=-")
    shown.stdout.fnmatch_lines(
        [
            "suggested floors (3 floors in 1 suite files), from the baseline's lower 95 % bounds:",
            "--- a/topics.retrieval.yaml",
            "*",
            "+  MRR@10: 0.80",
        ]
    )


def test_suggest_floors_options_are_refused_where_they_cannot_work(proj: pytest.Pytester) -> None:
    write(proj, suite_text(4))
    alone = proj.runpytest("--rg-suggest-floors=f.diff")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["*--rg-suggest-floors only take effect with --retrieval-gate*"])
    onto_suite = proj.runpytest("--retrieval-gate", "--rg-suggest-floors=topics.retrieval.yaml")
    assert onto_suite.ret == pytest.ExitCode.USAGE_ERROR
    onto_suite.stderr.fnmatch_lines(["*a .yaml file could be a suite*"])


def test_drift_floor_fails_when_unjudged_rankings_churn(proj: pytest.Pytester) -> None:
    header = "unjudged: [topic 100, {id: u101, query: topic 101}]\ndrift: {min_rbo: 0.85, min_jaccard: 0.8}"
    write(proj, suite_text(8, header=header))
    save(proj)
    saved = json.loads((proj.path / "retrieval-baseline.json").read_text(encoding="utf-8"))
    drift = saved["runs"]["topics::gen"]["drift_rankings"]
    assert list(drift) == ["topic 100", "u101"]  # the id defaults to the text
    assert drift["u101"]["ranking"][:2] == ["d101", "f0"]
    # The two unjudged queries now return 11 spam documents first: their top 10 is disjoint from
    # the baseline's. The judged queries do not move, so no judged metric does.
    damage(proj, {100: 11, 101: 11})
    result = proj.runpytest("--retrieval-gate")
    # 3 floors and the MRR@10 regression pass; RBO@10 = (8 * 1 + 2 * 0) / 10 = 0.8 < 0.85 fails;
    # Jaccard@10 = (8 * 1 + 2 * 0) / 10 = 0.8 sits on its floor and passes.
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAILED topics.retrieval.yaml::gen::drift::RBO@10*",
        ]
    )
    gates = {
        g["nodeid"].rsplit("::", 1)[1]: g
        for g in report(proj)["gates"]
        if "::drift::" in g["nodeid"]
    }
    assert (gates["RBO@10"]["value"], gates["RBO@10"]["passed"]) == (0.8, False)
    assert (gates["Jaccard@10"]["value"], gates["Jaccard@10"]["passed"]) == (0.8, True)
    assert [w["id"] for w in gates["RBO@10"]["worst"]] == ["topic 100", "u101"]


def test_unjudged_queries_need_drift_floors(proj: pytest.Pytester) -> None:
    write(proj, suite_text(4, header="unjudged: [topic 100]"))
    result = proj.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        ["*topics.retrieval.yaml [[]unjudged[]]: 'unjudged' queries are compared only by drift*"]
    )
