"""A run that cannot complete fails every item of its suite x system, and the report says so.

The mutant these tests kill: a run error swallowed into a pass (items not touching the failing
query passing, exit code 0, a report headed PASSED). The systems are plain ``module:function``
retrievers written into the pytester project, so no model is needed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import SUITE, only_system, write_suite

# SUITE holds 5 gate items: P@1 and R@3 over the suite, MRR@3 for category joins, Hit@3 for
# difficulty hard, and customer_names' found_within expectation.
N_ITEMS = 5

RAISING = """
def retrieve(query, k):
    raise RuntimeError("index offline")
"""

# Fails on the second query only: the first query's results exist, yet the run is incomplete.
RAISING_ON_ONE_QUERY = """
from search_app import retrieve as good

def retrieve(query, k):
    if query == "customer name":
        raise ConnectionError("shard 3 unreachable")
    return good(query, k)
"""

GARBAGE_ON_ONE_QUERY = """
from search_app import retrieve as good

def retrieve(query, k):
    if query == "refunds questions":
        return "docs/faq.md"  # a bare id: iterable, yet no (doc_id, score) pairs
    return good(query, k)
"""


def _reports(pytester: pytest.Pytester) -> tuple[str, dict[str, Any]]:
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text(encoding="utf-8"))
    return markdown, data


def _assert_reported_as_failed_run(
    pytester: pytest.Pytester, system: str, *needles: str
) -> dict[str, Any]:
    markdown, data = _reports(pytester)
    headline = [line for line in markdown.splitlines() if line.startswith("**")]
    assert headline and headline[0].startswith("**FAILED**")
    assert "PASSED" not in markdown
    assert "## Runs that failed" in markdown
    (line,) = [x for x in markdown.splitlines() if x.startswith(f"- `lineage` x `{system}`")]
    assert data["passed"] is False
    (error,) = [e for e in data["errors"] if e["system"] == system]
    assert error["suite"] == "lineage"
    for needle in needles:
        assert needle in line
        assert needle in error["error"]
    return data


def test_raising_retriever_fails_every_item_and_the_session(project: pytest.Pytester) -> None:
    only_system(project, "flaky", "flaky:retrieve", flaky=RAISING)
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=N_ITEMS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*RuntimeError: index offline*"])
    data = _assert_reported_as_failed_run(project, "flaky", "RuntimeError", "index offline")
    # No gate result is invented for a run that never finished.
    assert not [g for g in data["gates"] if g["system"] == "flaky" and g["passed"]]


def test_retriever_raising_on_one_query_fails_the_whole_run(project: pytest.Pytester) -> None:
    # The gates on category "joins" (join_orders only) and on "refunds" would pass on the
    # queries that did answer: they must fail all the same, the run being incomplete.
    only_system(project, "flaky", "flaky:retrieve", flaky=RAISING_ON_ONE_QUERY)
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=N_ITEMS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    _assert_reported_as_failed_run(project, "flaky", "ConnectionError", "shard 3 unreachable")


def test_retriever_returning_garbage_on_one_query_fails_the_whole_run(
    project: pytest.Pytester,
) -> None:
    only_system(project, "sloppy", "sloppy:retrieve", sloppy=GARBAGE_ON_ONE_QUERY)
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=N_ITEMS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Names the query and what came back, so the user can find the bug in their retriever.
    _assert_reported_as_failed_run(project, "sloppy", "refunds", "str")


def test_a_failed_run_fails_only_its_own_system(project: pytest.Pytester) -> None:
    project.makepyfile(flaky=RAISING)
    project.makefile(
        ".toml",
        pyproject="""
        [tool.retrieval_gate.system.keyword]
        retriever = "search_app:retrieve"

        [tool.retrieval_gate.system.flaky]
        retriever = "flaky:retrieve"
        """,
    )
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "--rg-system=keyword", "--rg-system=flaky")
    # keyword passes all of its 5 gates; flaky fails all 5 of its own.
    result.assert_outcomes(passed=N_ITEMS, failed=N_ITEMS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    data = _assert_reported_as_failed_run(project, "flaky", "index offline")
    assert [e["system"] for e in data["errors"]] == ["flaky"]
    assert {g["system"] for g in data["gates"] if g["passed"]} == {"keyword"}


def test_run_error_under_xdist_is_reported_as_failed(project: pytest.Pytester) -> None:
    # Under xdist the error happens in a worker; the controller writes the report and must learn
    # of it, or it would head the report PASSED over zero gates.
    pytest.importorskip("xdist")
    only_system(project, "flaky", "flaky:retrieve", flaky=RAISING)
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "-p", "xdist", "-n", "2")
    result.assert_outcomes(failed=N_ITEMS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    _assert_reported_as_failed_run(project, "flaky", "RuntimeError", "index offline")
