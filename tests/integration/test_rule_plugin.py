"""A verdict rule from outside the package: a project installs a distribution whose
``retrieval_gate.rules`` entry point names one module, and the gate collects, decides, words and
reports its items with no file of the plugin changed (docs/architecture.md, "Verdict rules").

The rule here is the one a team asks for first: p95 latency may not grow by more than 20 % over
the accepted baseline's, as the ledger recorded it (with 250 ms of slack, so the noise of a fast
system's timer is no failure).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

LATENCY_RULE = '''
"""p95 latency may not grow by more than 20 % (and 250 ms) over the accepted baseline's."""

from retrieval_gate.gates.rule import Check, Rule
from retrieval_gate.records import Outcome

GROWTH = 1.2
SLACK_MS = 250.0


class LatencyGrowth(Rule):
    name = "latency-growth"
    title = "latency growth ceiling"

    def checks(self, context):
        accepted = context.history.accepted(context.suite.name, context.system)
        if accepted is not None and "p95" in accepted.run.latency_ms:
            yield Check(self.name, "latency-growth::p95", accepted.run.latency_ms["p95"], wide=True)

    def decide(self, check, context):
        run, before = context.record(), check.spec
        if not run.latency_measured:
            return "this run did not time its queries"
        now = run.latency_ms["p95"]
        ceiling = max(before * GROWTH, before + SLACK_MS)
        return Outcome(
            suite=run.suite,
            system=run.system,
            scope="latency",
            metric="latency_p95_ms",
            value=now,
            threshold=ceiling,
            passed=now <= ceiling,
            n=run.n,
            ceiling=True,
            unit="ms",
            rule=self.name,
            detail=(f"the baseline's p95 was {before:.1f} ms",),
        )


RULE = LatencyGrowth()
'''

SEARCH = """
import time
from pathlib import Path

DOCS = {"d1": "orders join customers", "d2": "payments ledger", "d3": "refund questions"}
SLOW = Path(__file__).with_name("SLOW").exists()


def retrieve(query, k):
    if SLOW:
        time.sleep(0.6)
    words = set(query.lower().split())
    scored = [(d, float(len(words & set(t.split())))) for d, t in DOCS.items()]
    return sorted(scored, key=lambda kv: (-kv[1], kv[0]))[:k]
"""

SUITE = """
name: lineage
k: [1, 3]
gates: {Hit@3: 0.5}
queries:
  - {id: q1, query: orders join, relevant: [d1]}
  - {id: q2, query: payments ledger, relevant: [d2]}
"""


@pytest.fixture
def rule_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(latency_rule=LATENCY_RULE, search_app=SEARCH)
    dist = pytester.path / "latency_rule-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: latency-rule\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[retrieval_gate.rules]\nlatency-growth = latency_rule\n"
    )
    pytester.makefile(".retrieval.yaml", lineage=SUITE)
    pytester.makefile(
        ".toml",
        pyproject=textwrap.dedent(
            """
            [tool.pytest.ini_options]
            addopts = "-p no:cacheprovider"

            [tool.retrieval_gate.system.words]
            retriever = "search_app:retrieve"
            """
        ),
    )
    pytester.syspathinsert()  # installed, as far as this process can tell
    return pytester


def _gates(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return [g for g in report["gates"] if g["rule"] == "latency-growth"]


def _forget_reports(pytester: pytest.Pytester) -> None:
    for name in ("retrieval-gate-report.json", "retrieval-gate-report.md"):
        (pytester.path / name).unlink()


def test_a_rule_from_an_entry_point_gates_every_run(rule_project: pytest.Pytester) -> None:
    """Five sessions of pytest on one project (the slow ones sleep 0.6 s a query): save, then
    unchanged and slower, each serial and under xdist, against the one saved baseline. Each in
    a process of its own, as a project that installed the rule runs it (an entry point is read
    once per process, and xdist gives its workers the sys.path this test process started
    with, which has no entry point of the project's)."""
    run = rule_project.runpytest_subprocess
    saved = run("--retrieval-gate", "--rg-save-baseline")
    saved.assert_outcomes(passed=1)  # no baseline yet: the rule adds no item
    assert _gates(rule_project) == []

    for workers in ([], ["-n", "2"]):
        _forget_reports(rule_project)  # each session's claims are read from its own report
        again = run("--retrieval-gate", "-v", *workers)
        again.assert_outcomes(passed=3)  # the floor, the regression item and the rule's
        again.stdout.re_match_lines(
            [
                r".*(lineage.retrieval.yaml::words::latency-growth::p95 PASSED|PASSED lineage.retrieval.yaml::words::latency-growth::p95).*"
            ]
        )
        (passed,) = _gates(rule_project)
        assert passed["passed"] is True and passed["metric"] == "latency_p95_ms"

    (rule_project.path / "SLOW").write_text("")
    for workers in ([], ["-n", "2"]):
        _forget_reports(rule_project)
        slow = run("--retrieval-gate", "-v", *workers)
        slow.assert_outcomes(passed=2, failed=1)
        # Worded by the rule's own title, in the failure text and the terminal summary.
        slow.stdout.fnmatch_lines(
            [
                "latency_p95_ms over latency (lineage x words): FAILED: * (needs <= *"
                " latency growth ceiling, n=2)",
                "the baseline's p95 was * ms",
            ]
        )
        slow.stdout.fnmatch_lines(["*FAILED *latency-growth::p95: * ms (needs <= * ms, n=2)"])
        (failed,) = _gates(rule_project)
        assert failed["passed"] is False and failed["value"] > failed["threshold"] >= 250.0
        markdown = (rule_project.path / "retrieval-gate-report.md").read_text()
        assert "`lineage.retrieval.yaml::words::latency-growth::p95`" in markdown
