"""What a reviewer reads when a team runs several systems on one project: each failure headed by
the item it is about, a fact every system shares said once, and a TREC judging round gated
against the JSONL corpus the team searches."""

from __future__ import annotations

import json

import pytest

from .bad_inputs import CORPUS
from .conftest import SUITE, write_suite

BOTH = ("--rg-system", "keyword", "--rg-system", "reverse")


def test_a_trec_suite_reads_its_jsonl_corpus_as_jsonl(project: pytest.Pytester) -> None:
    # The topics and qrels of a judging round beside the corpus the team's search indexes.
    docs = {
        "sql/orders.sql": "orders table join customers on customer id",
        "sql/payments.sql": "payments join orders on order id",
        "docs/faq.md": "frequently asked questions about refunds",
    }
    (project.path / "docs.jsonl").write_text(
        "".join(json.dumps({"id": doc, "text": text}) + "\n" for doc, text in docs.items())
    )
    (project.path / "topics.trec").write_text(
        "<top>\n<num> Number: 1\n<title> which tables join orders\n</top>\n"
    )
    (project.path / "qrels.txt").write_text("1 0 sql/orders.sql 1\n")
    write_suite(
        project,
        "name: judged\nformat: trec\ntopics: topics.trec\nqrels: qrels.txt\n"
        "corpus: docs.jsonl\nk: [3]\ngates: {MRR@3: 0.5}\n",
        "judged.retrieval.yaml",
    )
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1)
    # orders.sql and payments.sql share 2 query words (join, orders): the tie goes to the larger
    # id, payments.sql, so the relevant orders.sql is second: MRR@3 = 1/2.
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert report["runs"][0]["metrics"]["MRR@3"] == 1 / 2


def test_each_failure_is_headed_by_its_scope(project: pytest.Pytester) -> None:
    # One metric gated three ways: over the suite, over a category, against the baseline.
    write_suite(project, SUITE.replace("joins: {MRR@3: 0.5}", "joins: {P@1: 0.9}"))
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=5)
    # The change under review: keyword now ranks as reverse does.
    settings = project.path / "pyproject.toml"
    settings.write_text(settings.read_text().replace(':retrieve"', ':retrieve_reversed"', 1))
    result = project.runpytest("--retrieval-gate")
    headers = [line.strip("_ ") for line in result.outlines if line.startswith("___")]
    for item in ("suite::P@1", "category:joins::P@1", "regression::P@1"):
        assert f"lineage x keyword: {item}" in headers, headers
    assert len(headers) == len(set(headers)), headers


def test_the_comparison_every_system_shares_is_said_once(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline", *BOTH)
    # The query refunds renamed: the same rename for every system.
    write_suite(project, SUITE.replace("id: refunds", "id: refund-questions"))
    result = project.runpytest("--retrieval-gate", *BOTH)
    result.stdout.fnmatch_lines(
        [
            "  every system vs baseline: 2 shared queries (1 added: refund-questions; "
            "1 removed: refunds)"
        ]
    )
    assert "keyword vs baseline" not in result.stdout.str()
    assert "reverse vs baseline" not in result.stdout.str()


def test_a_suite_fault_failing_every_system_is_one_line(project: pytest.Pytester) -> None:
    for name in ("sql/orders.sql", "sql/payments.sql", "sql/customers.sql"):
        path = project.path / "corpus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("select 1")
    write_suite(project, "corpus: corpus\n" + SUITE)
    result = project.runpytest("--retrieval-gate", *BOTH)
    failed = [line for line in result.outlines if line.startswith("run failed:")]
    assert len(failed) == 1, failed
    assert failed[0].startswith("run failed: lineage x keyword, reverse: ")
    assert failed[0].endswith("(10 gates not decided)")
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    section = markdown.split("## Runs that failed\n\n")[1].split("\n\n")[0]
    assert section.startswith("- `lineage` x `keyword`, `reverse`: "), section
    assert section.count("\n") == 0, section


def test_a_change_every_system_shares_is_said_once(project: pytest.Pytester) -> None:
    for name, text in CORPUS.items():
        path = project.path / "corpus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    write_suite(project, "corpus: corpus\n" + SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline", *BOTH)
    (project.path / "corpus" / "docs" / "lineage.md").write_text("lineage, rewritten")
    # A third system with no baseline run: the two that have one still share a line.
    settings = project.path / "pyproject.toml"
    settings.write_text(
        settings.read_text()
        + '\n[tool.retrieval_gate.system.fresh]\nretriever = "search_app:retrieve"\n'
    )
    result = project.runpytest("--retrieval-gate", *BOTH, "--rg-system", "fresh")
    result.stdout.fnmatch_lines(
        [
            "  keyword, reverse vs baseline: 3 shared queries",
            "  keyword, reverse vs baseline: corpus_digest changed since the baseline: *",
            "  fresh vs baseline: retrieval-baseline.json has no run for lineage x fresh: *",
        ]
    )
    assert result.stdout.str().count("corpus_digest changed") == 1


def test_a_new_suite_without_baseline_runs_is_one_line(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline", *BOTH)
    write_suite(project, SUITE.replace("name: lineage", "name: fresh"), "fresh.retrieval.yaml")
    result = project.runpytest("--retrieval-gate", *BOTH)
    result.stdout.fnmatch_lines(
        [
            "  every system vs baseline: retrieval-baseline.json has no run for fresh x keyword, "
            "reverse: nothing to compare; save one with --rg-save-baseline"
        ]
    )
    assert result.stdout.str().count("has no run for") == 1


def test_a_suite_that_gates_nothing_says_so(project: pytest.Pytester) -> None:
    # Another tool's file, a bare list of queries: it loads, runs and has nothing to fail.
    cases = [{"question": "which tables join orders", "relevant_ids": ["sql/orders.sql"]}]
    (project.path / "cases.retrieval.json").write_text(json.dumps(cases))
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=1)
    result = project.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(["  gates: none: nothing in this suite can fail: *"])
    assert "0 passed, 0 failed" not in result.stdout.str()
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "**No gates**: nothing in this suite can fail: " in markdown
    # The advice, followed: a header naming the file, with a tolerance, gates a regression.
    (project.path / "cases.retrieval.json").rename(project.path / "cases.json")
    write_suite(project, "name: cases\nqueries: cases.json\ntolerance: {MRR@10: 0.1}\n")
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["  gates: 1 passed, 0 failed"])


def test_a_suite_whose_regression_checks_have_no_baseline_yet_says_to_save_one(
    project: pytest.Pytester,
) -> None:
    # A tolerance and no floor, before any baseline: 'add tolerance:' would do nothing.
    cases = [{"question": "which tables join orders", "relevant_ids": ["sql/orders.sql"]}]
    (project.path / "cases.json").write_text(json.dumps(cases))
    write_suite(project, "name: cases\nqueries: cases.json\ntolerance: {MRR@10: 0.1}\n")
    result = project.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        [
            "  gates: none: nothing in this suite can fail yet: it has no floors and no "
            "'expect', and its regression checks (MRR@10) have no baseline run to compare "
            "with; save one with --rg-save-baseline, or add 'gates:' (floors)"
        ]
    )
    # The advice, followed: the next run gates the regression.
    project.runpytest("--retrieval-gate", "--rg-save-baseline")
    result = project.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(["  gates: 1 passed, 0 failed"])


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_settings_table_the_yaml_overrides_is_named_once(
    project: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    # The team moved its settings to retrieval-gate.yaml; pyproject.toml still has the old table.
    pytest.importorskip("xdist")
    write_suite(project, SUITE)
    (project.path / "retrieval-gate.yaml").write_text(
        "system:\n  keyword: {retriever: 'search_app:retrieve'}\n"
    )
    result = project.runpytest("--retrieval-gate", *workers)
    line = (
        "retrieval gate: warning: retrieval-gate.yaml holds the settings; the "
        "[tool.retrieval_gate] table in pyproject.toml is not read (move what it needs into "
        "retrieval-gate.yaml and delete the table)"
    )
    result.stdout.fnmatch_lines([line])
    assert result.stdout.str().count("is not read") == 1


def test_a_suite_change_no_system_can_compare_is_one_line(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline", *BOTH)
    write_suite(project, SUITE.replace("name: lineage\n", "name: lineage\ngain: exponential\n"))
    result = project.runpytest("--retrieval-gate", *BOTH)
    result.stdout.fnmatch_lines(
        ["  every system vs baseline: not comparable: gain changed from 'linear' to 'exponential'"]
    )
    assert result.stdout.str().count("not comparable: gain") == 1
