"""The baseline's age (gates/keeper.py): the baseline records its commit and time; a run warns
once when it is older than baseline_max_age or was saved from another suite version, in the
terminal, the reports and JUnit XML's test-suite properties."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from retrieval_gate.baseline.provenance import COMMIT_VARIABLES

from .history_project import SETTINGS, commit, run_step, stepped_project, suite_text


def _age_days(time: str) -> float:
    saved = datetime.fromisoformat(time.replace("Z", "+00:00"))
    return (datetime.now(UTC) - saved).total_seconds() / 86400.0


def test_an_old_baseline_is_said_once_everywhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    stepped_project(pytester)
    run_step(pytester, monkeypatch, 0, 0)
    path = pytester.path / "retrieval-baseline.json"
    baseline = json.loads(path.read_text())
    assert baseline["saved"]["commit"] == commit(0)
    baseline["saved"]["time"] = "2026-01-01T00:00:00Z"
    path.write_text(json.dumps(baseline))
    result = pytester.runpytest("--retrieval-gate", "--junitxml=out.xml")
    days = _age_days("2026-01-01T00:00:00Z")
    warning = (
        f"the baseline is {days:.0f} days old (saved at abc0000 of 2026-01-01; baseline_max_age "
        "30 days): save a fresh one on the main branch"
    )
    assert result.outlines.count(f"retrieval gate: warning: {warning}") == 1
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    assert report["history"]["baseline_age"]["warnings"] == [warning]
    assert report["history"]["baseline_age"]["saved"]["commit"] == commit(0)
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert f"> **Warning:** {warning}." in markdown
    xml = (pytester.path / "out.xml").read_text()
    assert f'<property name="baseline_commit" value="{commit(0)}" />' in xml
    assert '<property name="baseline_time" value="2026-01-01T00:00:00Z" />' in xml


def test_a_fresh_baseline_says_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    stepped_project(pytester)
    run_step(pytester, monkeypatch, 0, 0)
    result = pytester.runpytest("--retrieval-gate")
    assert not [line for line in result.outlines if "retrieval gate: warning" in line]
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    assert report["history"]["baseline_age"]["warnings"] == []


def test_a_baseline_of_another_suite_version_is_said(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    stepped_project(pytester)
    run_step(pytester, monkeypatch, 0, 0)
    text = suite_text().replace("query: question 0\n", "query: edited question 0\n")
    (pytester.path / "merges.retrieval.yaml").write_text(text)
    result = pytester.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        [
            "retrieval gate: warning: the baseline was saved from another version of merges x "
            "stepped (queries compared only where unchanged)"
        ]
    )


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_commits_behind_are_counted_and_a_hand_edited_commit_reaches_no_git_option(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    for name in COMMIT_VARIABLES:  # the commit from git, not from the CI running these tests
        monkeypatch.delenv(name, raising=False)
    stepped_project(pytester)
    pytester.makefile(
        ".toml",
        pyproject=SETTINGS + "\n[tool.retrieval_gate.history]\nbaseline_max_commits = 1\n",
    )
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "commit", "-q", "--allow-empty", "-m", "one")
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    path = pytester.path / "retrieval-baseline.json"
    saved = json.loads(path.read_text())["saved"]["commit"]
    assert saved == _git(pytester.path, "rev-parse", "HEAD")
    for message in ("two", "three"):
        _git(pytester.path, "commit", "-q", "--allow-empty", "-m", message)
    result = pytester.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        [
            f"retrieval gate: warning: the baseline is 2 commits behind (saved at {saved[:7]}; "
            "baseline_max_commits 1)"
        ]
    )
    # The commit is read from the file: a hand edit is no commit, never an option git obeys
    # (rev-list's --output= would create the file 'pwned..HEAD').
    baseline = json.loads(path.read_text())
    baseline["saved"]["commit"] = "--output=pwned"
    path.write_text(json.dumps(baseline))
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.OK
    assert not (pytester.path / "pwned..HEAD").exists()
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    assert report["history"]["baseline_age"]["commits_behind"] is None
