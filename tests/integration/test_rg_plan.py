"""``--rg-plan`` and the ``resolution`` setting on baselines that cannot be planned from: the
line says what is wrong (no baseline, no run of the suite in it, too few shared queries),
never "save a baseline first" when there is one."""

from __future__ import annotations

import pytest

from .conftest import SUITE, write_suite

# The first query of the test suite alone: a one-query suite.
ONE_QUERY = SUITE[: SUITE.index("  - id: customer_names")].replace(
    "categories:\n  joins: {MRR@3: 0.5}\ndifficulties:\n  hard: {Hit@3: 0.5}\n", ""
)
FOOTNOTE = (
    "none: fewer than 2 queries shared with the baseline, which resolve no change (a query "
    "edited since the baseline is not shared: save a baseline after editing a suite, or grow it)"
)


def _plan(project: pytest.Pytester) -> pytest.RunResult:
    result = project.runpytest("--retrieval-gate", "--rg-plan")
    assert result.ret == pytest.ExitCode.OK
    return result


def test_without_a_baseline_the_plan_asks_for_one(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    _plan(project).stdout.fnmatch_lines(
        ["no regression checks to plan: save a baseline first (--rg-save-baseline)"]
    )


def test_a_baseline_without_the_suite_is_named(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    assert project.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    write_suite(project, SUITE.replace("name: lineage", "name: renamed"))
    result = _plan(project)
    result.stdout.fnmatch_lines(
        [
            "no regression checks to plan: the baseline retrieval-baseline.json has no run of "
            "renamed x keyword (saved before the suite or system existed, or under another "
            "name); save a baseline with them (--rg-save-baseline)"
        ]
    )
    assert "save a baseline first" not in result.stdout.str()


def test_a_one_query_baseline_resolves_nothing_and_says_so(project: pytest.Pytester) -> None:
    write_suite(project, ONE_QUERY)
    assert project.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    result = _plan(project)
    result.stdout.fnmatch_lines(
        ["lineage*keyword*P@1*1*0.01*none*-", "lineage*keyword*R@3*1*0.01*none*-", FOOTNOTE]
    )
    assert "save a baseline first" not in result.stdout.str()


def test_an_edited_suite_shares_no_query_and_says_so(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    assert project.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    # Every query's text edited: none is shared with the baseline.
    edited = SUITE.replace("query: ", "query: the ")
    write_suite(project, edited)
    result = _plan(project)
    result.stdout.fnmatch_lines(["lineage*keyword*P@1*0*0.01*none*-", FOOTNOTE])


def test_the_resolution_setting_holds_for_a_one_query_suite(project: pytest.Pytester) -> None:
    write_suite(project, ONE_QUERY)
    assert project.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    settings = project.path / "pyproject.toml"
    text = settings.read_text(encoding="utf-8")
    settings.write_text(
        text.replace("[tool.retrieval_gate]\n", "[tool.retrieval_gate]\nresolution = 1e-300\n"),
        encoding="utf-8",
    )
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*lineage.retrieval.yaml [[]resolution[]]: P@1 over suite (keyword) has 1 query "
            "shared with the baseline, and one has no spread to resolve a change by: it cannot "
            "meet the 'resolution' setting 1e-300; grow the suite"
        ]
    )
    # The plan shows it too coarse, with the setting as written.
    _plan(project).stdout.fnmatch_lines(["lineage*keyword*P@1*1*none*-*1e-300 (too coarse)*"])
    # Grown, the suite's new baseline can be saved (only queries shared with the old one would
    # count against the setting, and there is still one).
    write_suite(project, SUITE.replace("categories:\n  joins: {MRR@3: 0.5}\n", ""))
    assert project.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    grown = project.runpytest("--retrieval-gate")
    grown.stdout.fnmatch_lines(["*P@1 over suite (keyword) resolves +-* with 3 shared queries*"])
