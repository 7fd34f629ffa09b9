"""Every bad input is one line naming the file and the entry, never a traceback (SPEC 8)."""

from __future__ import annotations

import pytest

from .conftest import RETRIEVER, SUITE, lit, only_system, write_suite


def _collect_error(project: pytest.Pytester, line: str) -> None:
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([lit(line)])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("suite", "line"),
    [
        (
            "queries: [\n  {query: a, relevant: [x]\n",
            "*lineage.retrieval.yaml: invalid YAML at line 3, column 1: "
            "expected ',' or '}', but got '<stream end>'",
        ),
        (
            SUITE.replace("P@1: 0.5", "nDGC@10: 0.5"),
            "*lineage.retrieval.yaml [gates]: unknown metric 'nDGC@10'; known: P@k, *",
        ),
        (SUITE.replace("P@1: 0.5", "P@0: 0.5"), "*lineage.retrieval.yaml [gates]: *P@0*"),
        (
            SUITE.replace("k: [1, 3]", "k: [0, 3]"),
            "*lineage.retrieval.yaml: invalid 'k': [0, 3]; expected integer or list (a cutoff or "
            "a list of them, each 1 to 100000: *",
        ),
        (
            SUITE.replace("id: refunds", "id: join_orders"),
            "*[queries[2] (id join_orders)]: duplicate query id 'join_orders' (first at queries[0])",
        ),
        (
            SUITE.replace("relevant: [docs/faq.md]", "relevant: []"),
            "*[queries[2] (id refunds)]: empty relevant set (no document with grade >= 1)",
        ),
        (
            SUITE.replace("relevant: [docs/faq.md]", "relevant: {docs/faq.md: 0}"),
            "*[queries[2] (id refunds)]: empty relevant set (no document with grade >= 1)",
        ),
        (
            SUITE.replace("P@1: 0.5", "P@1: 1.5"),
            "*[gates.P@1]: P@1 floor must be within [0, 1], got 1.5",
        ),
        (
            SUITE.replace("joins: {MRR@3: 0.5}", "join: {MRR@3: 0.5}"),
            "*[categories.join]: no query has category 'join'",
        ),
        (
            SUITE.replace("gates:", "gate:"),
            "*lineage.retrieval.yaml: unknown key 'gate'; known: categories, *",
        ),
        (
            SUITE.replace("    query: customer name\n", ""),
            "*[queries[1] (id customer_names)]: query needs non-empty text ('query' or 'text')",
        ),
        (
            SUITE.replace("difficulty: hard", "difficulty: xfail").replace(
                "  hard: {Hit@3: 0.5}", "  xfail: {Hit@3: 0.5}"
            ),
            "*[difficulty]: difficulty 'xfail' is also a pytest marker ('xfail' would change how "
            "its items run); rename the label",
        ),
        (
            SUITE.replace("category: lookup", "category: _lookup"),
            "*[queries[1] (id customer_names)]: 'category' '_lookup' must start with a letter *",
        ),
        (
            SUITE.replace("  P@1: 0.5", "  P@1: 0.5\n  precision@1: 0.2"),
            "*lineage.retrieval.yaml [gates]: P@1 is given twice",
        ),
        (
            "tolerance: {latency_p95_ms: 5}\n" + SUITE,
            "*lineage.retrieval.yaml [tolerance]: latency is gated by ceilings, not baseline tolerances",
        ),
    ],
    ids=[
        "malformed-yaml",
        "unknown-metric",
        "k-zero-in-metric",
        "k-zero",
        "duplicate-id",
        "empty-relevant",
        "only-grade-zero",
        "floor-out-of-range",
        "unknown-category",
        "unknown-key",
        "missing-text",
        "label-is-a-marker",
        "label-underscore",
        "metric-twice",
        "latency-tolerance",
    ],
)
def test_bad_suite_is_a_one_line_collection_error(
    project: pytest.Pytester, suite: str, line: str
) -> None:
    write_suite(project, suite)
    _collect_error(project, line)


def test_malformed_json(project: pytest.Pytester) -> None:
    write_suite(project, '{"queries": [{"query": "a",}]}', name="lineage.retrieval.json")
    _collect_error(
        project,
        "*lineage.retrieval.json: invalid JSON at line 1, column 28: Expecting property name "
        "enclosed in double quotes",
    )


def test_stale_labels_fail_their_suite_only_listing_every_missing_id(
    project: pytest.Pytester,
) -> None:
    import fnmatch
    import json

    corpus = project.mkdir("corpus")
    (corpus / "sql").mkdir()
    for doc in ("sql/orders.sql", "sql/customers.sql"):
        (corpus / doc).write_text("select 1")
    # Two queries of lineage lose documents: sql/payments.sql and docs/faq.md. One error lists
    # both, with their queries; its items error; the other suite runs; the report is written.
    write_suite(project, "corpus: corpus\n" + SUITE)
    write_suite(project, SUITE.replace("name: lineage", "name: other"), name="other.retrieval.yaml")
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    where = "lineage.retrieval.yaml [queries[0] (id join_orders) and 1 more]: "
    message = (
        "2 relevant ids of 2 queries not in corpus *corpus (join_orders: sql/payments.sql; "
        "refunds: docs/faq.md); fix the labels, or count them as misses with "
        "'missing_relevant: miss'"
    )
    result.stdout.fnmatch_lines(["*" + lit(where) + message])
    assert "Traceback" not in result.stdout.str()
    outcomes = result.parseoutcomes()
    # Every item of the other suite ran (P@1, R@3, MRR@3, Hit@3, query[customer_names]); every
    # item of lineage failed: the first says why, the others point there.
    assert (outcomes["passed"], outcomes["failed"]) == (5, 5)
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert [run["suite"] for run in report["runs"]] == ["other"]
    (error,) = report["errors"]
    assert error["suite"] == "lineage"
    assert fnmatch.fnmatchcase(error["error"], "*" + lit(where) + message)
    # missing_relevant: miss counts them as misses instead (the retriever, like the corpus, no
    # longer has them): R@3 of join_orders is 1 of its 2 relevant found, of refunds 0 of 1.
    write_suite(project, "corpus: corpus\nmissing_relevant: miss\n" + SUITE)
    gone = ('    "sql/payments.sql": "payments join orders on order id",\n', '    "docs/faq.md"')
    app = RETRIEVER.replace(gone[0], "").replace(gone[1], '    "unrelated.md"')
    project.makepyfile(search_app=app)
    project.runpytest("--retrieval-gate")
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    (lineage,) = [run for run in report["runs"] if run["suite"] == "lineage"]
    by_id = {q["id"]: q["metrics"] for q in lineage["queries"]}
    assert (by_id["join_orders"]["R@3"], by_id["refunds"]["R@3"]) == (0.5, 0.0)
    assert report["errors"] == []


def test_missing_corpus(project: pytest.Pytester) -> None:
    write_suite(project, "corpus: no-such-folder\n" + SUITE)
    _collect_error(project, "*no-such-folder: corpus not found")


def test_unknown_system_is_a_usage_error_quoting_it(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "--rg-system", "bm25")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --rg-system 'bm25': unknown system; known systems: keyword, reverse"]
    )


def test_malformed_system_name_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--retrieval-gate", "--rg-system", "a b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --rg-system: invalid system name 'a b'*"])


def test_bad_setting_is_a_usage_error(project: pytest.Pytester) -> None:
    only_system(project, "keyword", "search_app")
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            lit(
                "ERROR: *pyproject.toml [system.keyword]: 'retriever' must be 'module:function', got 'search_app'"
            )
        ]
    )


def test_no_systems_configured(pytester: pytest.Pytester) -> None:
    write_suite(pytester, SUITE)
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: no retrieval systems configured: *"])


def test_retriever_that_cannot_be_imported(project: pytest.Pytester) -> None:
    only_system(project, "keyword", "search_app:no_such_function")
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            lit(
                "*pyproject.toml [system.keyword]: cannot import retriever "
                "'search_app:no_such_function': AttributeError: *"
            )
        ]
    )


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (
            "return None",
            "retriever bad:retrieve returned NoneType, expected a list of (doc_id, score)",
        ),
        (
            "return [('sql/orders.sql', 1.0, 'extra')]",
            "retriever bad:retrieve returned ('sql/orders.sql', 1.0, 'extra') at position 0; "
            "expected (doc_id, score)",
        ),
        (
            "return [('sql/orders.sql', float('nan'))]",
            "retriever bad:retrieve returned score nan for 'sql/orders.sql'; scores must be finite numbers",
        ),
        (
            "return [(None, 1.0)]",
            "retriever bad:retrieve returned doc id None at position 0; ids are strings",
        ),
        (
            "return [('sql/orders.sql', 'high')]",
            "retriever bad:retrieve returned score 'high' for 'sql/orders.sql'; scores must be finite numbers",
        ),
    ],
    ids=["none", "triple", "nan", "id-none", "score-str"],
)
def test_retriever_returning_garbage_fails_with_one_line(
    project: pytest.Pytester, body: str, line: str
) -> None:
    only_system(project, "bad", "bad:retrieve", bad=f"def retrieve(query, k):\n    {body}\n")
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines([lit(f"*lineage.retrieval.yaml [query join_orders]: {line}")])
    assert "Traceback" not in result.stdout.str()


def test_two_suites_with_one_name(project: pytest.Pytester) -> None:
    # The report and the baseline are keyed by suite name: two files must not share one.
    write_suite(project, SUITE)
    write_suite(project, SUITE, name="copy.retrieval.yaml")
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            lit("*lineage.retrieval.yaml [name]: suite name 'lineage' is already used by ")
            + "*.retrieval.yaml; give each suite a distinct 'name'"
        ]
    )


def test_empty_systems_list_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makefile(
        ".toml",
        pyproject="""
        [tool.retrieval_gate]
        systems = []
        [tool.retrieval_gate.system.keyword]
        retriever = "search_app:retrieve"
        """,
    )
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            lit(
                "ERROR: *pyproject.toml: invalid 'systems': []; expected string or list (a system "
                "name, or a non-empty list of them)"
            )
        ]
    )


def test_json_path_equal_to_report_path_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--retrieval-gate", "--rg-report=out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rg-json and the markdown report are both *out.json*"])


def test_retriever_module_failing_at_import_is_one_line(project: pytest.Pytester) -> None:
    only_system(
        project,
        "exploding",
        "exploding:search",
        exploding="raise RuntimeError('no credentials in this environment')\n",
    )
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            lit("*pyproject.toml [system.exploding]: cannot import retriever 'exploding:search': ")
            + "RuntimeError: no credentials in this environment"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    import json

    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert report["errors"][0]["system"] == "exploding"
