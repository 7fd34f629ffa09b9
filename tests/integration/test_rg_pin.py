"""``--rg-pin REF`` (docs/baselines.md, "Slow drift"): a tag, a branch or a commit resolved by
git in the project's repository. A pin with no record of a suite x system anchors on its newest
recorded ancestor and says so; with no recorded ancestor its drift items fail naming the records
nearest the pin; a ref git does not know is a one-line usage error. The pin is named in the
terminal summary, the markdown report and the JSON twin.

Each test builds the same small history in a real git repository: the project committed (tag
``v0.1``, before any record), then merges each recorded on main (the retriever losing one query
more per merge, P@1 -0.02), a release tagged at the second merge (``v1.0``, branch ``release``),
and a bot commit of the baseline and the history after the third (``v1.1``: no record of it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from .history_project import git_repository, merge, stepped_project


def _released(pytester: pytest.Pytester) -> tuple[Callable[..., str], list[str]]:
    """The history above; returns ``git`` and the recorded merges' commits, oldest first."""
    stepped_project(pytester)
    git = git_repository(pytester)
    git("tag", "v0.1")
    commits = []
    for quality in range(3):
        found, result = merge(pytester, git, quality)
        assert result.ret == 0, result.stdout.str()
        commits.append(found)
        if quality == 1:
            git("tag", "v1.0")
            git("branch", "release")
    # The bot commits what the merge's run saved: a commit no run recorded, tagged a release.
    git("add", "retrieval-baseline.json", ".retrieval-gate")
    git("commit", "-q", "-m", "the baseline of quality 2")
    git("tag", "v1.1")
    (pytester.path / "step.txt").write_text("3", encoding="utf-8")
    git("commit", "-q", "-a", "-m", "quality 3")  # today's change: P@1 0.94
    return git, commits


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return found


def _drift(pytester: pytest.Pytester) -> dict[str, Any]:
    (gate,) = [g for g in _report(pytester)["gates"] if g["scope"] == "history-drift"]
    return dict(gate)


def _day(pytester: pytest.Pytester, merge: int) -> str:
    """The day merge ``merge`` was recorded (UTC), as the pin's words name it."""
    lines = (pytester.path / ".retrieval-gate/history/merges.jsonl").read_text().splitlines()
    return str(json.loads(lines[merge])["time"])[:10]


def test_a_tag_and_a_branch_pin_their_commits_record(pytester: pytest.Pytester) -> None:
    _, commits = _released(pytester)
    release = commits[1]
    said = f"pinned to v1.0 ({release[:7]}): merges x stepped anchored on its record of "
    result = pytester.runpytest("--retrieval-gate", "--rg-pin", "v1.0")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"  {said}{_day(pytester, 1)}"])
    drift = _drift(pytester)
    assert drift["passed"]  # 2 merges of 0.02 since the release: 0.04 <= 0.0667
    assert drift["detail"][0].startswith(
        f"P@1 is 0.04 below the pinned anchor of {_day(pytester, 1)} ({release[:7]}), over 2 steps"
    )
    pin = _report(pytester)["history"]["pin"]
    assert (pin["ref"], pin["commit"]) == ("v1.0", release)
    (run,) = pin["runs"]
    assert (run["anchored_on"], run["anchor_commit"]) == ("pin", release)
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert f"> **Drift:** {said}{_day(pytester, 1)}." in markdown
    # A branch is a ref as a tag is; a commit's own digits name it by its first 7.
    result = pytester.runpytest("--retrieval-gate", "--rg-pin", "release")
    result.stdout.fnmatch_lines([f"  pinned to release ({release[:7]}): merges x stepped *"])
    result = pytester.runpytest("--retrieval-gate", "--rg-pin", release[:10])
    result.stdout.fnmatch_lines([f"  pinned to {release[:7]}: merges x stepped anchored *"])
    assert _report(pytester)["history"]["pin"]["commit"] == release


def test_a_commit_without_records_anchors_on_its_newest_recorded_ancestor(
    pytester: pytest.Pytester,
) -> None:
    # Issue 39: pinning the release tag's commit (the bot's baseline commit, which has no
    # record) skipped every drift item and exited 0; a tag was refused.
    git, commits = _released(pytester)
    bot = git("rev-parse", "v1.1")
    result = pytester.runpytest("--retrieval-gate", "--rg-pin", "v1.1", "-rA")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=3)  # floor, regression, drift: none skipped
    said = (
        f"pinned to v1.1 ({bot[:7]}), which has no record of merges x stepped: anchored on its "
        f"newest recorded ancestor {commits[2][:7]} of {_day(pytester, 2)}"
    )
    result.stdout.fnmatch_lines([f"  {said}"])
    drift = _drift(pytester)
    assert drift["detail"][0].startswith(
        f"P@1 is 0.02 below the anchor of {_day(pytester, 2)} ({commits[2][:7]}), the newest "
        f"recorded ancestor of the pin v1.1 ({bot[:7]}), over 1 step"
    )
    assert said in drift["detail"]
    (run,) = _report(pytester)["history"]["pin"]["runs"]
    assert (run["anchored_on"], run["anchor_commit"]) == ("ancestor", commits[2])
    assert f"> **Drift:** {said}." in (pytester.path / "retrieval-gate-report.md").read_text()


def test_a_pin_older_than_every_record_fails_naming_the_nearest(pytester: pytest.Pytester) -> None:
    git, commits = _released(pytester)
    first = git("rev-parse", "v0.1")
    result = pytester.runpytest("--retrieval-gate", "--rg-pin", "v0.1", "-rA")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, failed=1)
    day = [_day(pytester, i) for i in range(3)]
    said = (
        f"pinned to v0.1 ({first[:7]}), which has no record of merges x stepped, nor has any "
        f"ancestor of it: the nearest recorded commits are {commits[0][:7]} of {day[0]}, "
        f"{commits[1][:7]} of {day[1]} and {commits[2][:7]} of {day[2]}; record the pinned commit "
        "(check it out and run with --rg-record) or pin a recorded one"
    )
    result.stdout.fnmatch_lines(
        [
            "P@1 slow drift (merges x stepped): FAILED: 0.94 today, with no record to compare "
            "it with (n=50)",
            said,
        ]
    )
    result.stdout.fnmatch_lines(
        [
            f"  {said}",
            f"  FAILED merges.retrieval.yaml::stepped::history-drift::P@1: pinned to v0.1 "
            f"({first[:7]}): no record at it or at an ancestor of it, nothing to compare with",
        ]
    )
    drift = _drift(pytester)
    assert not drift["passed"] and drift["threshold"] is None and drift["detail"] == [said]
    (run,) = _report(pytester)["history"]["pin"]["runs"]
    assert (run["anchored_on"], run["anchor_commit"]) == ("none", None)
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert f"> **Drift:** {said}." in markdown
    assert f"  - {said}" in markdown  # under the failing item


def test_an_unknown_ref_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    stepped_project(pytester)
    git_repository(pytester)
    result = pytester.runpytest("--retrieval-gate", "--rg-pin", "v9.9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert errors == [
        "ERROR: --rg-pin v9.9: git cannot resolve it here (no commit of this repository by that "
        "name); give a tag, a branch or a commit of this repository"
    ]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
