"""What the session's outputs say about themselves: JUnit test cases named by their gate (no
stray bracket), serial and under xdist; the "All gates" table's regression rows decided on the
drop, not shown against a floor; a partial (-k) report that says it is partial."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from .conftest import SUITE, write_suite
from .test_rg_baseline import damage, regression_gates, save, suite_text, write
from .test_verdicts import settings


def _cases(path: str) -> list[tuple[str, str]]:
    root = ET.parse(path).getroot()
    return [(case.get("classname", ""), case.get("name", "")) for case in root.iter("testcase")]


JUNIT_CASES = [
    ("lineage_retrieval_yaml.keyword", "query[customer_names]"),
    ("lineage_retrieval_yaml.keyword.category:joins", "MRR@3"),
    ("lineage_retrieval_yaml.keyword.difficulty:hard", "Hit@3"),
    ("lineage_retrieval_yaml.keyword.suite", "P@1"),
    ("lineage_retrieval_yaml.keyword.suite", "R@3"),
]


def test_junit_test_cases_are_named_by_their_gate(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--junitxml=junit.xml")
    cases = sorted(_cases(str(project.path / "junit.xml")))
    assert cases == JUNIT_CASES
    assert not any(name.endswith("]") and "[" not in name for _, name in cases)


def test_under_xdist_junit_names_each_gate_and_the_workers_deselection_is_counted(
    project: pytest.Pytester,
) -> None:
    """One xdist session for two claims that do not touch each other (its workers are most of
    the CPU): the JUnit cases the controller writes from the workers' reports keep their gate
    names (the query item's bracket included), and the report counts the gate items the workers
    deselected (the controller collects nothing: selection.py)."""
    pytest.importorskip("xdist")
    write_suite(project, SUITE)
    project.runpytest(
        "--retrieval-gate",
        "--junitxml=junit.xml",
        "-k",
        "not suite",
        "-n",
        "2",
        "-p",
        "no:benchmark",
    )
    cases = sorted(_cases(str(project.path / "junit.xml")))
    assert cases == [case for case in JUNIT_CASES if not case[0].endswith(".suite")]
    assert not any(name.endswith("]") and "[" not in name for _, name in cases)
    data = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert data["partial"] == "2 gate items deselected by -k 'not suite'"


def test_a_regression_row_shows_its_verdict_and_the_drop_it_allows(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", pyproject=settings())
    from .test_rg_baseline import RETRIEVER

    pytester.makepyfile(gen_app=RETRIEVER)
    pytester.syspathinsert()
    write(pytester, suite_text(160))
    save(pytester)
    # Three of 160 queries lose their document: 157 / 160 = 0.98125, a drop of 0.01875 from 1,
    # below "baseline - tolerance" (0.99). Whatever the verdict, the row must not read as a floor
    # the value fails while it says pass.
    damage(pytester, {3: 12, 50: 12, 77: 12})
    pytester.runpytest("--retrieval-gate")
    gate = regression_gates(pytester)["MRR@10"]
    status = ("pass" if gate["passed"] else "**FAIL**") + f" ({gate['verdict']})"
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    row = (
        f"| {status} | `topics.retrieval.yaml::gen::regression::MRR@10` | "
        f"{gate['value']:.4f} (drop {1.0 - gate['value']:.4f}) | drop <= 0.0100 from 1.0000 | 160 |"
    )
    assert row in markdown
    assert "regression::MRR@10` | 0.9812 | >= 0.9900" not in markdown


def test_a_k_selection_says_the_report_is_partial(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    full = project.runpytest("--retrieval-gate")
    full.assert_outcomes(passed=5)
    data = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert "partial" not in data
    assert "Partial run" not in (project.path / "retrieval-gate-report.md").read_text()

    result = project.runpytest("--retrieval-gate", "-k", "suite")
    result.assert_outcomes(passed=2)
    why = "3 gate items deselected by -k 'suite'"
    result.stdout.fnmatch_lines([f"partial run: {why}; the report covers only the selected gates"])
    data = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert data["partial"] == why
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert f"**Partial run**: {why}." in markdown


def test_node_ids_on_the_command_line_make_a_partial_report(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "lineage.retrieval.yaml::keyword::suite").assert_outcomes(
        passed=2
    )
    data = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert data["partial"] == "only the node ids lineage.retrieval.yaml::keyword::suite selected"
