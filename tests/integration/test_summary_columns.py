"""The terminal summary's metric columns are the suite's declared ones, in declared order,
however the session is run: which items ran (``--lf``, node ids), in which process (``-n 2``)
or failed changes nothing."""

from __future__ import annotations

import pytest

from tests.integration.conftest import RETRIEVER, write_suite

SETTINGS = """
[tool.retrieval_gate]
systems = ["keyword"]

[tool.retrieval_gate.system.keyword]
retriever = "search_app:retrieve"
"""

# P@3 declared first and passing (a floor of 0); nDCG@3 declared second and failing (docs/faq.md
# shares no word with the first query, so that query's nDCG@3 is below 1): failing gates come
# first in the report's gate list, not in the columns.
SUITE = """
name: lineage
k: [1, 3]
gates:
  P@3: 0.0
  nDCG@3: 1.0
queries:
  - id: join_orders
    query: which tables join orders
    relevant: [sql/orders.sql, docs/faq.md]
  - id: refunds
    query: refunds questions
    relevant: [docs/faq.md]
"""


def _header(result: pytest.RunResult) -> str:
    lines = [line.strip() for line in result.outlines if line.strip().startswith("system ")]
    assert len(lines) == 1, result.outlines
    return " ".join(lines[0].split())


def test_columns_keep_declared_order_whichever_items_ran(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(search_app=RETRIEVER)
    write_suite(pytester, SUITE)
    pytester.syspathinsert()
    # The declared floors, then the ranking headline not already shown (nDCG, R, MRR at
    # max k; P at min k).
    expected = "system P@3 nDCG@3 R@3 MRR@3 P@1 p95 ms"

    full = pytester.runpytest("--retrieval-gate", "-p", "cacheprovider")
    full.assert_outcomes(passed=1, failed=1)
    assert _header(full) == expected

    # Only the failed nDCG@3 gate runs again: P@3 keeps its column and its place.
    last_failed = pytester.runpytest("--retrieval-gate", "-p", "cacheprovider", "--lf")
    last_failed.assert_outcomes(failed=1, deselected=1)
    assert _header(last_failed) == expected

    # Only the passing P@3 gate, by node id: nDCG@3 keeps its column and its place.
    only_passing = pytester.runpytest(
        "--retrieval-gate", "-p", "no:cacheprovider", "lineage.retrieval.yaml::keyword::suite::P@3"
    )
    only_passing.assert_outcomes(passed=1)
    assert _header(only_passing) == expected

    # Under xdist the records reach the controller through the workers' reports.
    distributed = pytester.runpytest("--retrieval-gate", "-p", "no:cacheprovider", "-n", "2")
    distributed.assert_outcomes(passed=1, failed=1)
    assert _header(distributed) == expected
