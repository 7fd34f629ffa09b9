"""A team's ten merges, lived as the documented workflow has them (docs/ci.md, docs/baselines.md),
in a real git repository: pull requests gated against ``origin/main`` (``GITHUB_BASE_REF``), each
merge on main saving the baseline and recording the history, a bot committing both. The team's
ranker slides by 0.6 x the tolerance of P@1 a merge (tests/integration/history_project.py).

What a team must be able to act on (issue 39): the slow drift fails at the merge the docs
predict (the fourth, then the eighth) and names the queries that slid; the baseline saved over it
says what it accepts and where the anchor moves; passing pull requests print no resolution
warning and state the same advice figure as ``--rg-plan``, the shelf-life table and the report;
an intended drop of 3 x the tolerance, saved inside its own pull request, passes that pull
request's gate and is named in every output; the merge recorded on main carries the acceptance.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from retrieval_gate.records import format_value

from .history_project import git, git_repository, stepped_project

DROPPED = 5  # the intended drop: five more queries wrong, P@1 -0.1 = 3 x the tolerance


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((pytester.path / "retrieval-gate-report.json").read_text())  # type: ignore[no-any-return]


def _gate(report: dict[str, Any], ending: str) -> dict[str, Any]:
    (found,) = [g for g in report["gates"] if g["nodeid"].endswith(ending)]
    return found  # type: ignore[no-any-return]


def test_a_team_lives_ten_merges(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About 20 gate sessions in one process, each a second or so: the week is the point."""
    root = pytester.path
    stepped_project(pytester)
    git_repository(pytester)
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)

    def commit_outputs(message: str) -> None:
        git(root, "add", "retrieval-baseline.json", ".retrieval-gate/history")
        git(root, "commit", "-q", "-m", message)
        git(root, "update-ref", "refs/remotes/origin/main", git(root, "rev-parse", "HEAD"))

    def merge(quality: int, *args: str) -> pytest.RunResult:
        """A change merged on main, then main's run saves the baseline and the bot commits it."""
        (root / "step.txt").write_text(str(quality))
        git(root, "commit", "-q", "-a", "--allow-empty", "-m", f"quality {quality}")
        result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline", "-rA", *args)
        commit_outputs(f"the gate's baseline at quality {quality}")
        return result

    def pull_request(quality: int, name: str) -> pytest.RunResult:
        """A pull request's required check: its branch's change, gated against origin/main."""
        git(root, "checkout", "-q", "-b", name, "main")
        (root / "step.txt").write_text(str(quality))
        git(root, "commit", "-q", "-a", "--allow-empty", "-m", name)
        monkeypatch.setenv("GITHUB_BASE_REF", "main")
        result = pytester.runpytest("--retrieval-gate", "-rA")
        monkeypatch.delenv("GITHUB_BASE_REF")
        git(root, "checkout", "-q", "main")
        return result

    merge(0)  # the first baseline

    # -- two pull requests against the same baseline: quiet, and one advice figure ------------
    plan = pytester.runpytest("--retrieval-gate", "--rg-plan")
    ((figure, needed),) = re.findall(
        r"^merges\s+stepped\s+P@1\s+50\s+0\.0333\s+\+-(\S+)\s+(\S+)$", plan.stdout.str(), re.M
    )
    advice = []
    for quality, name in ((1, "one-more-wrong"), (0, "docs-only")):
        checked = pull_request(quality, name)
        assert checked.ret == pytest.ExitCode.OK, checked.stdout.str()
        assert "WARNING" not in checked.stdout.str()  # a passing pull request is quiet
        report = _report(pytester)
        gate = _gate(report, "regression::P@1")
        (shelf,) = [s for s in report["history"]["shelf_life"] if s["metric"] == "P@1"]
        assert format_value(gate["planned_resolution"]) == figure
        assert f"{gate['queries_needed']:,}" == needed
        assert shelf["resolution_fresh"] == gate["planned_resolution"]
        markdown = (root / "retrieval-gate-report.md").read_text()
        assert re.search(
            rf"\| P@1 \| 50 \| 0\.0333 \| \+-\S+ \| \+-{re.escape(figure)} \|", markdown
        )
        advice.append((gate["planned_resolution"], gate["queries_needed"]))
    assert advice[0] == advice[1]  # from one pull request to the next

    # -- the slow slide: each merge within its tolerance, the drift caught at the fourth --------
    for quality in (1, 2, 3):
        assert merge(quality).ret == pytest.ExitCode.OK
    fourth = merge(4)
    assert fourth.ret == pytest.ExitCode.TESTS_FAILED
    fourth.stdout.fnmatch_lines(
        [
            "*P@1 slow drift (merges x stepped): FAILED:*",
            "*slid most since the anchor (anchor -> now): q0 * 1 -> 0 (-1.0000)*",
            "*P@1 at each step: *",
        ]
    )
    # Saved over the failing drift item: the acceptance is said, with where the anchor moves.
    moved = git(root, "rev-parse", "HEAD~1")[:7]  # the merge that saved it (before the bot)
    fourth.stdout.fnmatch_lines(
        [f"accepted: P@1 of stepped (merges), 1 -> 0.92 since *; drift anchor now {moved}*"]
    )
    for quality in (5, 6, 7):
        assert merge(quality).ret == pytest.ExitCode.OK
    eighth = merge(8)  # 0.92 -> 0.84 since the fourth: the drift fails again
    assert eighth.ret == pytest.ExitCode.TESTS_FAILED
    eighth.stdout.fnmatch_lines(["*P@1 slow drift (merges x stepped): FAILED:*"])

    # -- an intended drop of 3 x the tolerance, accepted inside its pull request ---------------
    git(root, "checkout", "-q", "-b", "cheaper-ranker", "main")
    (root / "step.txt").write_text(str(8 + DROPPED))
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")  # the developer accepts it
    git(root, "add", "step.txt", "retrieval-baseline.json", ".retrieval-gate/history")
    git(root, "commit", "-q", "-m", "a cheaper ranker, its drop accepted")
    summary = root / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    checked = pytester.runpytest("--retrieval-gate", "-rA", "--junitxml=junit.xml")
    monkeypatch.delenv("GITHUB_BASE_REF")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert checked.ret == pytest.ExitCode.OK, checked.stdout.str()  # every item passes
    change = "P@1 of stepped (merges): 0.84 -> 0.74"
    checked.stdout.fnmatch_lines(
        ["*ACCEPTED (passed) *history-drift::P@1: accepted in its pull request*", f"*{change}*"]
    )
    assert change in summary.read_text()
    assert change in (root / "retrieval-gate-report.md").read_text()
    (said,) = _report(pytester)["accepted"]["changes"]
    assert (said["metric"], said["from"], said["to"]) == ("P@1", 0.84, pytest.approx(0.74))
    properties = {
        p.get("name"): p.get("value") for p in ET.parse(root / "junit.xml").iter("property")
    }
    assert properties.get("accepted:merges::stepped::P@1") is not None

    # -- merged: main records the merge, which carries the acceptance --------------------------
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--ff-only", "cheaper-ranker")
    recorded = pytester.runpytest("--retrieval-gate", "--rg-record", "-rA")
    assert recorded.ret == pytest.ExitCode.OK, recorded.stdout.str()
    commit_outputs("the history of the merge")
    live = (root / ".retrieval-gate/history/merges.jsonl").read_text().splitlines()
    assert json.loads(live[-1])["accepted_drift"] == ["P@1"]

    # The tenth merge: the slide goes on from the accepted drop, within the drift tolerance.
    assert merge(8 + DROPPED + 1).ret == pytest.ExitCode.OK
