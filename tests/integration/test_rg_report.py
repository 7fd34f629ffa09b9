"""--rg-report / --rg-json / GITHUB_STEP_SUMMARY: the markdown report and its JSON twin."""

from __future__ import annotations

import json

import pytest

from .conftest import SUITE, write_suite


def test_report_and_json_written_with_the_documented_layout(project: pytest.Pytester) -> None:
    write_suite(project, SUITE.replace("  R@3: 0.5", "  P@3: 0.9"))
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*generated retrieval gate report: *retrieval-gate-report.md*",
            "*generated retrieval gate report: *retrieval-gate-report.json*",
        ]
    )
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert report["version"] == 3
    assert report["passed"] is False
    (run,) = report["runs"]
    assert (run["suite"], run["system"], run["n"], run["k"]) == ("lineage", "keyword", 3, [1, 3])
    assert run["fingerprint"]["suite_digest"]
    assert run["metrics"]["P@3"] == pytest.approx(5 / 9, abs=1e-12)
    assert run["categories"]["lookup"] == {
        "n": 2,
        "metrics": pytest.approx(
            {
                # customer_names and refunds, by hand: P@3 (2/3 + 1/3) / 2, R@1 (1/2 + 1) / 2, ...
                "P@1": 1.0,
                "P@3": 0.5,
                "R@1": 0.75,
                "R@3": 1.0,
                "MRR@1": 1.0,
                "MRR@3": 1.0,
                "nDCG@1": 1.0,
                "nDCG@3": 1.0,
                "MAP@1": 0.75,
                "MAP@3": 1.0,
                "Hit@1": 1.0,
                "Hit@3": 1.0,
                "R-Prec": 1.0,
            }
        ),
    }
    assert set(run["latency_ms"]) == {"p50", "p95", "p99", "mean"}
    queries = {q["id"]: q for q in run["queries"]}
    # Every family at every cutoff of the suite's k, plus R-Prec.
    assert list(queries["join_orders"]["metrics"]) == [
        "P@1", "P@3", "R@1", "R@3", "MRR@1", "MRR@3", "nDCG@1", "nDCG@3", "MAP@1", "MAP@3",
        "Hit@1", "Hit@3", "R-Prec",
    ]  # fmt: skip
    # Tied scores (2 and 2) ordered by doc id descending, as trec_eval does.
    assert queries["join_orders"]["ranking"] == [
        "sql/payments.sql",
        "sql/orders.sql",
        "docs/lineage.md",
    ]
    assert queries["join_orders"]["relevant_ranks"] == {"sql/orders.sql": 2, "sql/payments.sql": 1}
    assert queries["customer_names"]["category"] == "lookup"
    assert queries["customer_names"]["text"] == "customer name"
    failing = [g for g in report["gates"] if not g["passed"]]
    assert failing == [
        {
            "nodeid": "lineage.retrieval.yaml::keyword::suite::P@3",
            "suite": "lineage",
            "system": "keyword",
            "scope": "suite",
            "metric": "P@3",
            "value": pytest.approx(5 / 9),
            "threshold": 0.9,
            "comparison": ">=",
            "passed": False,
            "n": 3,
            "worst": [
                {"id": "refunds", "value": pytest.approx(1 / 3), "text": "refunds questions"},
                {
                    "id": "join_orders",
                    "value": pytest.approx(2 / 3),
                    "text": "which tables join orders",
                },
                {"id": "customer_names", "value": pytest.approx(2 / 3), "text": "customer name"},
            ],
            "detail": [],
            "rule": "floor",  # the verdict rule that decided it (docs/architecture.md)
        }
    ]
    markdown = (project.path / "retrieval-gate-report.md").read_text()
    assert "**FAILED**: 4 of 5 gates passed" in markdown
    # Failing gates come before the per-suite tables.
    assert markdown.index("## Failing gates") < markdown.index("## Suite `lineage`")
    assert "| `lineage.retrieval.yaml::keyword::suite::P@3` | 0.5556 | >= 0.9000 | 3 |" in markdown
    assert "xychart-beta\n" in markdown and "```mermaid\n%%{init:" in markdown


def test_systems_side_by_side_with_best_marked(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-system", "keyword", "--rg-system", "reverse")
    markdown = (project.path / "retrieval-gate-report.md").read_text()
    assert "| metric | keyword | reverse |" in markdown
    assert "| P@1 | **1.0000** | 0.0000 |" in markdown


def test_report_paths_from_options(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest(
        "--retrieval-gate", "--rg-report", "out/gate.md", "--rg-json", "out/data.json"
    )
    result.assert_outcomes(passed=5)
    assert (project.path / "out" / "gate.md").is_file()
    assert json.loads((project.path / "out" / "data.json").read_text())["passed"] is True
    assert not (project.path / "retrieval-gate-report.md").exists()


def test_json_defaults_next_to_the_report(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-report", "reports/quality.md")
    assert (project.path / "reports" / "quality.json").is_file()


def test_github_step_summary_gets_the_report(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = project.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate").assert_outcomes(passed=5)
    text = summary.read_text()
    assert text.startswith("earlier step\n# Retrieval gate report")


def test_terminal_summary_is_compact(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        [
            "*= retrieval gate =*",
            "lineage (3 queries)",
            "  system         P@1        R@3      MRR@3      Hit@3     nDCG@3  p95 ms",
            "  keyword     1.0000     1.0000     1.0000     1.0000     1.0000  *",
            "  gates: 5 passed, 0 failed",
        ]
    )


def test_a_stored_run_beside_a_timed_system_has_no_latency_figure(
    project: pytest.Pytester,
) -> None:
    # A run file holds no query times: n/a in the p95 column the timed retriever fills, not a
    # dash that reads as a figure gone missing.
    settings = (project.path / "pyproject.toml").read_text(encoding="utf-8")
    settings += '\n[tool.retrieval_gate.system.stored]\nrun = "stored.trec"\n'
    (project.path / "pyproject.toml").write_text(settings, encoding="utf-8")
    (project.path / "stored.trec").write_text(
        "join_orders Q0 sql/orders.sql 1 1.0 x\ncustomer_names Q0 sql/customers.sql 1 1.0 x\n"
        "refunds Q0 docs/faq.md 1 1.0 x\n",
        encoding="utf-8",
    )
    write_suite(project, SUITE)
    result = project.runpytest(
        "--retrieval-gate", "--rg-system", "keyword", "--rg-system", "stored"
    )
    result.stdout.re_match_lines(
        [
            r"^  system +P@1 +R@3 +MRR@3 +Hit@3 +nDCG@3  p95 ms$",
            r"^  keyword +(\d\.\d{4} +){5} *\d+\.\d$",
            r"^  stored +(\d\.\d{4} +){5} *n/a$",
        ]
    )


def test_decision_score_ranks_the_systems(project: pytest.Pytester) -> None:
    settings = (project.path / "pyproject.toml").read_text(encoding="utf-8")
    settings = settings.replace(
        'systems = ["keyword"]',
        'systems = ["keyword", "reverse"]\n\n[tool.retrieval_gate.decision]\n'
        'weights = {"P@1" = 0.5, "R@3" = 0.5, dims = 0.2}',
    )
    (project.path / "pyproject.toml").write_text(settings, encoding="utf-8")
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(["*recommended: keyword (decision score 1.2000)"])
    decisions = json.loads((project.path / "retrieval-gate-report.json").read_text())["decisions"]
    (lineage,) = decisions
    assert [d["system"] for d in lineage["ranking"]] == ["keyword", "reverse"]
    keyword = lineage["ranking"][0]
    # keyword: P@1 = 1 and R@3 = 1 over the three queries; a retriever has no dims (n/a): its
    # weight 0.2 is spread over P@1 and R@3 in proportion, each 0.5 * 1.2 / 1.0 = 0.6.
    assert keyword["score"] == pytest.approx(0.6 * 1 + 0.6 * 1, abs=1e-12)
    assert keyword["terms"]["dims"]["value"] is None
    assert keyword["terms"]["P@1"]["effective_weight"] == pytest.approx(0.6, abs=1e-12)
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "### Choosing a system" in markdown
    assert (
        "| 1 | `keyword` | 1.2000 | 0.5 -> 0.6 x 1.0000 = 0.6000 | 0.5 -> 0.6 x 1.0000 = 0.6000 "
        "| n/a |" in markdown
    )


def test_a_suite_of_one_query_is_said_in_the_singular(project: pytest.Pytester) -> None:
    write_suite(
        project,
        "name: one\nk: [1]\ngates: {P@1: 0.5}\nqueries:\n"
        "  - id: refunds\n    query: refunds questions\n    relevant: [docs/faq.md]\n",
    )
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=1)
    result = project.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(["one (1 query)", "*keyword vs baseline: 1 shared query"])
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "1 query from `lineage.retrieval.yaml`, cutoffs [1]." in markdown
    assert "**PASSED**: 2 of 2 gates passed over 1 suite and 1 system." in markdown
    assert "Compared on 1 query shared with `retrieval-baseline.json`." in markdown
    assert "latency: timed on the suite's one query;" in markdown
    gates = json.loads((project.path / "retrieval-gate-report.json").read_text())["gates"]
    (regression,) = [g for g in gates if g["scope"] == "regression"]
    assert (
        "(drop 0, tolerance 0.01) over 1 shared query; 0 worse, 0 better" in regression["detail"][1]
    )
