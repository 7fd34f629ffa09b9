"""What the session does around the runs: options without the gate, the plugin's own bugs."""

from __future__ import annotations

import json

import pytest

from .conftest import SUITE, lit, write_suite


@pytest.mark.parametrize(
    "option",
    [
        "--rg-report=r.md",
        "--rg-json=r.json",
        "--rg-baseline=b.json",
        "--rg-save-baseline",
        "--rg-reference=keyword",
    ],
)
def test_gate_only_option_without_the_gate_is_a_usage_error(
    project: pytest.Pytester, option: str
) -> None:
    write_suite(project, SUITE)
    result = project.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    flag = option.split("=")[0]
    result.stderr.fnmatch_lines(
        [f"*{flag} only take effect with --retrieval-gate; add --retrieval-gate or drop them*"]
    )


def test_options_the_fixture_reads_are_accepted_without_the_gate(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = project.runpytest("--rg-system=keyword", "--rg-no-cache", "--rg-cache-dir=c")
    result.assert_outcomes(passed=1)


def test_a_bug_in_the_plugin_is_an_internal_error_with_its_traceback(
    project: pytest.Pytester,
) -> None:
    # A KeyError inside the plugin's own evaluation must not read as the user's retriever failing,
    # nor as a library's failure: raised in a frame of the plugin's package (errors.origin_of).
    project.makeconftest(
        """
        import retrieval_gate.runs.evaluate as evaluation

        namespace = {"__name__": "retrieval_gate.runs.evaluate"}
        exec("def broken(*args, **kwargs):\\n    return {}['P@1']\\n", namespace)
        evaluation.record_run = namespace["broken"]
        """
    )
    write_suite(project, SUITE)
    result = project.runpytest_subprocess("--retrieval-gate")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 5 and "passed" not in outcomes
    result.stdout.fnmatch_lines(
        [
            "*record_run(*",  # the traceback reaches the call that failed
            "*InternalRunError: internal error in pytest-retrieval-gate while running lineage x "
            "keyword: KeyError: 'P@1'",
            # The other items point at the first instead of repeating it.
            "not decided: the run of lineage x keyword failed "
            "(see lineage.retrieval.yaml::keyword::suite::P@1)",
        ]
    )
    result.stdout.fnmatch_lines(
        ["run failed: lineage x keyword: internal error * (5 gates not decided)"]
    )
    assert "keyword failed: KeyError" not in result.stdout.str()  # the old disguise
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert report["passed"] is False
    (error,) = report["errors"]
    assert error["error"].startswith("internal error in pytest-retrieval-gate while running")
    assert error["traceback"].endswith("KeyError: 'P@1'\n")  # for the bug report


def test_the_user_s_retriever_failing_stays_one_line(project: pytest.Pytester) -> None:
    project.makepyfile(
        search_app="""
        def retrieve(query, k):
            raise ValueError("index offline")
        """
    )
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        [
            "*"
            + lit(
                "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve raised ValueError: index offline"
            )
        ]
    )
    assert "Traceback" not in result.stdout.str()
    # pytest and the report count the same: every gate of the run failed, none passed, and the
    # error is shown once, the other items pointing at it.
    result.assert_outcomes(failed=5)
    # The failure sections show the error once; pytest's short summary and the gate's own
    # "run failed" line may repeat it (CI=true does not shorten summary lines).
    shown = [
        line
        for line in result.outlines
        if "index offline" in line and not line.startswith(("FAILED ", "run failed: "))
    ]
    assert len(shown) == 1
    pointers = [line for line in result.outlines if line.startswith("not decided: the run of")]
    assert len(pointers) == 4
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "**FAILED**: 0 of 5 gates passed; 5 not decided because their run failed" in markdown


def test_the_user_s_retriever_s_traceback_is_there_when_asked_for(
    project: pytest.Pytester,
) -> None:
    # Theirs, not the plugin's: the one line by default; -v shows where in their code it raised.
    project.makepyfile(
        search_app="""
        def retrieve(query, k):
            raise ValueError("index offline")
        """
    )
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "-v")
    result.stdout.fnmatch_lines(
        [
            "*" + lit("retriever search_app:retrieve raised ValueError: index offline"),
            "",
            "Traceback (most recent call last):",
            "*search_app.py*, line 2, in retrieve",
            '*raise ValueError("index offline")',
            "ValueError: index offline",
        ]
    )
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    (error,) = report["errors"]
    assert error["traceback"].endswith("ValueError: index offline\n")


def test_junit_xml_carries_each_gate_s_numbers(project: pytest.Pytester) -> None:
    import xml.etree.ElementTree as ET

    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "--junitxml=junit.xml")
    result.assert_outcomes(passed=5)
    tree = ET.parse(project.path / "junit.xml")
    cases = {(c.get("classname"), c.get("name")): c for c in tree.iter("testcase")}
    case = cases[("lineage_retrieval_yaml.keyword.suite", "P@1")]
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    # P@1 over the three queries: join_orders and customer_names hit at rank 1, refunds too: 3/3.
    assert props == {
        "scope": "suite",
        "metric": "P@1",
        "value": "1.0",
        "threshold": "0.5",
        "comparison": ">=",
        "n": "3",
        "verdict": "ok",
    }


def test_progress_reaches_the_log_around_capture(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval_gate.progress

    # A three-query suite is quick; without the quiet time every step reports.
    monkeypatch.setattr(retrieval_gate.progress, "QUIET_SECONDS", 0.0)
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=5)
    # Not a terminal: a line per tenth crossed; three queries, one per step.
    result.stdout.fnmatch_lines(
        [
            "retrieval gate: lineage x keyword: querying 1/3 (33%), * s*",
            "retrieval gate: lineage x keyword: querying 3/3 (100%), * s",
        ]
    )
