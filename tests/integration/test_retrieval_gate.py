"""The --retrieval-gate flag end to end: items, outcomes, selection, failure output."""

from __future__ import annotations

import pytest

from .conftest import SUITE, lit, only_system, write_suite


def test_passing_suite_yields_one_item_per_gate(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "-v")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "lineage.retrieval.yaml::keyword::suite::P@1 PASSED*",
            "lineage.retrieval.yaml::keyword::suite::R@3 PASSED*",
            lit("lineage.retrieval.yaml::keyword::category:joins::MRR@3 PASSED") + "*",
            lit("lineage.retrieval.yaml::keyword::difficulty:hard::Hit@3 PASSED") + "*",
            lit("lineage.retrieval.yaml::keyword::query[customer_names] PASSED") + "*",
        ]
    )


def test_failing_floor_shows_value_floor_n_and_worst_queries(project: pytest.Pytester) -> None:
    # P@3 per query: join_orders 2/3, customer_names 2/3, refunds 1/3 -> mean 5/9 = 0.5556.
    write_suite(project, SUITE.replace("  R@3: 0.5", "  P@3: 0.9"))
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*P@3 over suite (lineage x keyword): FAILED: 0.5556 (needs >= 0.9 floor, n=3)",
            'worst queries: refunds "refunds questions" (0.3333), join_orders "which tables join '
            'orders" (0.6667), customer_names "customer name" (0.6667)',
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "def runtest" not in result.stdout.str()


def test_floor_met_exactly_passes(project: pytest.Pytester) -> None:
    # 5/9 computed as a mean of thirds is not exactly representable; the floor 0.5555555555555556
    # must still count as met.
    write_suite(project, SUITE.replace("  R@3: 0.5", "  P@3: 0.5555555555555556"))
    project.runpytest("--retrieval-gate").assert_outcomes(passed=5)


def test_category_floor_fails_alone(project: pytest.Pytester) -> None:
    write_suite(project, SUITE.replace("joins: {MRR@3: 0.5}", "lookup: {P@3: 0.6}"))
    # lookup: customer_names 2/3, refunds 1/3 -> 0.5
    result = project.runpytest("--retrieval-gate", "-rf")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            lit(
                "P@3 over category:lookup (lineage x keyword): FAILED: 0.5 (needs >= 0.6 floor, n=2)"
            ),
            lit("FAILED lineage.retrieval.yaml::keyword::category:lookup::P@3 - ") + "*",
        ]
    )


def test_query_expectation_failure_names_ranks(project: pytest.Pytester) -> None:
    write_suite(
        project,
        SUITE.replace("expect: {found_within: 1}", "expect: {found_within: 1}").replace(
            "relevant: [docs/faq.md]",
            "relevant: [docs/lineage.md]\n    expect: {found_within: 2, nDCG@3: 0.1}",
        ),
    )
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            lit('expect on query[refunds] "refunds questions" (lineage x keyword): FAILED'),
            "found_within 2: first relevant at rank 5",
            "nDCG@3 = 0, expected >= 0.1",
            "relevant: docs/lineage.md at 5",
            "top results: docs/faq.md, sql/payments.sql, sql/orders.sql, sql/customers.sql, docs/lineage.md",
        ]
    )
    # The report's table of all gates says the rank as a rank (it said 5.0000 <= 2.0000), and a
    # latency in milliseconds, as its table of failing gates does.
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    row = "| `lineage.retrieval.yaml::keyword::query[refunds]` | rank 5 | <= rank 2 | 1 |"
    assert f"| **FAIL** {row}" in markdown


def test_k_selects_a_category(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "-k", "joins", "-v")
    result.assert_outcomes(passed=1, deselected=4)
    result.stdout.fnmatch_lines(["*" + lit("category:joins::MRR@3 PASSED") + "*"])


def test_m_selects_by_difficulty_marker(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "-m", "hard", "-v", "--strict-markers")
    # difficulty:hard::Hit@3 and the customer_names query (difficulty hard) are marked.
    result.assert_outcomes(passed=2, deselected=3)


def test_run_is_shared_by_the_items_of_a_suite_x_system(project: pytest.Pytester) -> None:
    only_system(
        project,
        "counting",
        "counting:retrieve",
        counting="""
        import search_app
        CALLS = []
        def retrieve(query, k):
            CALLS.append(query)
            return search_app.retrieve(query, k)
        """,
    )
    project.makeconftest(
        """
        def pytest_sessionfinish(session):
            import counting
            print("CALLS", len(counting.CALLS))
        """
    )
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "-s")
    result.assert_outcomes(passed=5)
    # 3 queries + 1 warm-up call, once for all 5 items.
    result.stdout.fnmatch_lines(["*CALLS 4"])


def test_several_systems_each_get_their_items(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest(
        "--retrieval-gate", "--rg-system", "keyword", "--rg-system", "reverse", "-v"
    )
    # reverse ranks every relevant document below every other: all five of its items fail.
    result.assert_outcomes(passed=5, failed=5)
    result.stdout.fnmatch_lines(["*::reverse::suite::P@1 FAILED*"])


def test_suite_given_on_the_command_line_whatever_its_name(project: pytest.Pytester) -> None:
    write_suite(project, SUITE, name="golden/queries.yaml")
    assert project.runpytest("--retrieval-gate").ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result = project.runpytest("--retrieval-gate", "golden/queries.yaml")
    result.assert_outcomes(passed=5)


def test_suite_without_gates_still_runs(project: pytest.Pytester) -> None:
    write_suite(
        project,
        """
        queries:
          - {query: refunds, relevant: [docs/faq.md]}
        """,
    )
    result = project.runpytest("--retrieval-gate", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["lineage.retrieval.yaml::keyword::run PASSED*"])


def test_xdist_gives_the_same_outcomes_and_report(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    write_suite(project, SUITE.replace("  R@3: 0.5", "  P@3: 0.9"))
    write_suite(project, SUITE.replace("name: lineage", "name: other"), name="other.retrieval.yaml")
    result = project.runpytest("--retrieval-gate", "-n", "2", "-p", "no:benchmark")
    result.assert_outcomes(passed=9, failed=1)
    import json

    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert sorted(run["suite"] for run in report["runs"]) == ["lineage", "other"]
    assert len(report["gates"]) == 10
    assert [g["nodeid"] for g in report["gates"] if not g["passed"]] == [
        "lineage.retrieval.yaml::keyword::suite::P@3"
    ]


def test_retriever_that_raises_fails_its_items_with_one_line(project: pytest.Pytester) -> None:
    only_system(
        project,
        "broken",
        "broken:retrieve",
        broken="""
        def retrieve(query, k):
            raise ConnectionError("search backend down")
        """,
    )
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            "*lineage.retrieval.yaml [[]query join_orders[]]: retriever broken:retrieve raised "
            "ConnectionError: search backend down"
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_retriever_returning_a_score_mapping_is_ranked_by_score(project: pytest.Pytester) -> None:
    # {doc_id: score}, the run shape of pytrec_eval: ranked by score, not by the dict's order.
    only_system(
        project,
        "mapping",
        "mapping:retrieve",
        mapping="""
        import search_app
        def retrieve(query, k):
            return dict(reversed(search_app.retrieve(query, k)))
        """,
    )
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate").assert_outcomes(passed=5)


def test_reference_setting_names_the_system_compared_against(project: pytest.Pytester) -> None:
    project.makefile(
        ".toml",
        pyproject="""
        [tool.retrieval_gate]
        systems = ["keyword", "reverse"]
        reference = "reverse"
        [tool.retrieval_gate.system.keyword]
        retriever = "search_app:retrieve"
        [tool.retrieval_gate.system.reverse]
        retriever = "search_app:retrieve_reversed"
        """,
    )
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate")
    markdown = (project.path / "retrieval-gate-report.md").read_text()
    assert "### Against the reference system `reverse`" in markdown
    # keyword finds every relevant document first on all 3 queries, reverse on none: the exact
    # two-sided sign-flip p over 3 queries that all moved one way is 2/8.
    assert "| `keyword` | P@1 | 0.0000 | 1.0000 | +1.0000 | 0.2500 | 3 | 0 |" in markdown
