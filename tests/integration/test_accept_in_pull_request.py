"""Accepting an intended drop inside its pull request (gates/accept.py, docs/ci.md): a real git
repository whose ``main`` branch holds a baseline and a history of two merges, and a pull
request that drops P@1 by three times its tolerance and saves the baseline itself. Its gate
passes every item and names what it accepts in every output; the merge recorded on main carries
the acceptance; a target branch git cannot give is one line saying what to fetch."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from .conftest import lit
from .history_project import TOLERANCE, git, git_repository, stepped_project

#: Queries the pull request makes wrong: P@1 1 -> 0.9, a drop of 0.1, 3 x the tolerance.
DROPPED = 5
#: What the pull request accepts, as every output words it.
CHANGE = (
    "P@1 of stepped (merges): 1 -> 0.9 (-0.1000, 3 x its tolerance 0.0333) over 50 shared "
    "queries; moved most: q0 1 -> 0, q1 1 -> 0, q2 1 -> 0, q3 1 -> 0, q4 1 -> 0"
)


@pytest.fixture(scope="module")
def main_built() -> dict[str, Path]:
    """Where the first test that asked for it left main (see :func:`_main_with_history`): built
    once a module, copied into each test's folder after."""
    return {}


def _main_with_history(pytester: pytest.Pytester, built: dict[str, Path]) -> str:
    """main: the project, a baseline saved at its first commit and a run recorded at the next,
    all committed; ``origin/main`` names its tip, as a fetched remote branch does. Returns the
    tip. Built by the module's first test that asks (two sessions and six git commands), copied
    by the others: the same commits, baseline and history, with nothing of the test's own yet."""
    root = pytester.path
    if "main" in built:
        shutil.copytree(built["main"], root, symlinks=True, dirs_exist_ok=True)
        pytester.syspathinsert()
        return git(root, "rev-parse", "HEAD")
    stepped_project(pytester)
    git_repository(pytester)
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    git(root, "add", "retrieval-baseline.json", ".retrieval-gate/history")
    git(root, "commit", "-q", "-m", "the baseline")
    pytester.runpytest("--retrieval-gate", "--rg-record")
    git(root, "add", ".retrieval-gate/history")
    git(root, "commit", "-q", "-m", "the history")
    tip = git(root, "rev-parse", "HEAD")
    git(root, "update-ref", "refs/remotes/origin/main", tip)
    template = pytester.path.parent / f"{root.name}-main"
    shutil.copytree(root, template, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    built["main"] = template
    return tip


def _pull_request(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    *,
    base: bool = True,
    committed: bool = False,
) -> pytest.RunResult:
    """The pull request: a cheaper ranker (P@1 0.9), its baseline saved by the developer before
    committing (``--rg-save-baseline``; against ``origin/main`` when ``base``, as
    ``GITHUB_BASE_REF`` says in a pull-request run), then committed with it; with
    ``committed``, the change is committed first and the baseline saved at that commit (its
    record is then one of the history's merges). Returns the save."""
    root = pytester.path
    git(root, "checkout", "-q", "-b", "cheaper-ranker")
    (root / "step.txt").write_text(str(DROPPED))
    if committed:
        git(root, "commit", "-q", "-a", "-m", "a cheaper ranker")
    if base:
        monkeypatch.setenv("GITHUB_BASE_REF", "main")
    saved = pytester.runpytest("--retrieval-gate", "--rg-save-baseline", "-rA")
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)
    git(root, "add", "step.txt", "retrieval-baseline.json", ".retrieval-gate/history")
    git(root, "commit", "-q", "-m", "a cheaper ranker, its drop accepted")
    return saved


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((pytester.path / "retrieval-gate-report.json").read_text())  # type: ignore[no-any-return]


def _verdicts(result: pytest.RunResult) -> dict[str, str]:
    """The gate items' verdicts (PASSED, FAILED) by their last node id parts, from ``-rA``."""
    out = {}
    for line in result.outlines:
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED") and "::" in rest:
            out[rest.split()[0].split("::", 2)[2]] = word
    return out


def test_an_intended_drop_saved_in_its_pull_request_passes_it_and_is_named_everywhere(
    pytester: pytest.Pytester, main_built: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pytester.path
    tip = _main_with_history(pytester, main_built)
    first = git(root, "rev-parse", "HEAD~2")[:7]  # the baseline's commit, the drift anchor
    saved = _pull_request(pytester, monkeypatch)
    # Saved over its failing items: what it accepts is said, and where the drift anchor moves.
    assert saved.ret == pytest.ExitCode.TESTS_FAILED
    assert _verdicts(saved) == {
        "suite::P@1": "PASSED",
        "regression::P@1": "FAILED",
        "history-drift::P@1": "FAILED",
    }
    over = [
        f"accepted: P@1 of stepped (merges), 1 -> 0.9 since {first} (its drift anchor); drift "
        "anchor now this baseline (its drop recorded as accepted against its target branch)",
        f"accepted: P@1 of stepped (merges), 1 -> 0.9 since {first} (the baseline it replaces)",
    ]
    saved.stdout.fnmatch_lines([f"this baseline accepts, against origin/main ({tip[:7]}):", *over])
    said = _report(pytester)["accepted"]
    assert [o["line"] for o in said["saved_over"]] == over
    assert said["saved"] is True and [c["recorded"] for c in said["changes"]] == [True]
    markdown = (root / "retrieval-gate-report.md").read_text()
    assert all(f"- {line}" in markdown for line in over)
    # The baseline records the acceptance at its top, where the reviewer reads the diff.
    baseline = json.loads((root / "retrieval-baseline.json").read_text())
    assert list(baseline)[:4] == ["version", "generator", "saved", "accepted"]
    newest = git(root, "rev-parse", "main")  # the newest merge the history had a record of
    assert baseline["accepted"] == {
        "base": "origin/main",
        "commit": tip,
        "changes": [
            {
                "suite": "merges",
                "system": "stepped",
                "metric": "P@1",
                "from": 1.0,
                "to": 0.9,
                "n": 50,
                "history_at": git(root, "rev-parse", "main~1"),
            }
        ],
    }
    assert newest == tip

    # The pull request's gate, as GitHub runs it: every item passes, the drift one as accepted,
    # and what it accepts is named in the terminal, the step summary, both reports and JUnit.
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    summary = root / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    gate = pytester.runpytest("--retrieval-gate", "-rA", "--junitxml=junit.xml")
    assert gate.ret == pytest.ExitCode.OK
    assert set(_verdicts(gate).values()) == {"PASSED"} and len(_verdicts(gate)) == 3
    accepted = (
        f"accepted in its pull request: P@1 of stepped, 1 -> 0.9 against origin/main ({tip[:7]})"
    )
    gate.stdout.fnmatch_lines(
        [
            lit(
                f"  ACCEPTED (passed) merges.retrieval.yaml::stepped::history-drift::P@1: {accepted}; "
            )
            + "P@1 is level with *",
            f"accepted in this pull request (its baseline against origin/main ({tip[:7]})):",
            f"  {CHANGE}",
        ]
    )
    for text in (summary.read_text(), (root / "retrieval-gate-report.md").read_text()):
        assert "## Accepted" in text
        assert f"- {CHANGE}" in text
    report = _report(pytester)
    assert report["accepted"]["base"] == {
        "ref": "origin/main",
        "given": "GITHUB_BASE_REF=main",
        "commit": tip,
    }
    (change,) = report["accepted"]["changes"]
    assert (change["metric"], change["from"], change["to"], change["n"]) == ("P@1", 1.0, 0.9, 50)
    assert change["recorded"] is True and change["tolerance"] == pytest.approx(TOLERANCE)
    assert [m["id"] for m in change["moved"]] == ["q0", "q1", "q2", "q3", "q4"]
    (drift,) = [g for g in report["gates"] if g["rule"] == "history-drift"]
    assert drift["passed"] and drift["note"] == "ACCEPTED (passed)"
    assert drift["detail"][0] == accepted
    properties = dict(
        (p.get("name"), p.get("value"))
        for p in ET.parse(root / "junit.xml").getroot().iter("property")
    )
    assert properties["accepted_base"] == f"origin/main ({tip[:7]})"
    assert properties["accepted:merges::stepped::P@1"] == "1 -> 0.9"
    # A pin is the team's own anchor (a release), whatever a pull request accepted since.
    pinned = pytester.runpytest("--retrieval-gate", "-rA", "--rg-pin", first)
    assert _verdicts(pinned)["history-drift::P@1"] == "FAILED"
    assert "ACCEPTED" not in pinned.stdout.str()

    # Merged: main records the merge (--rg-record), the drift accepted there and carried.
    monkeypatch.delenv("GITHUB_BASE_REF")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "cheaper-ranker", "-m", "merge the cheaper ranker")
    merge = git(root, "rev-parse", "HEAD")
    recorded = pytester.runpytest("--retrieval-gate", "--rg-record", "-rA")
    assert recorded.ret == pytest.ExitCode.OK
    assert set(_verdicts(recorded).values()) == {"PASSED"}
    recorded.stdout.fnmatch_lines(
        [
            "  ACCEPTED (passed) merges.retrieval.yaml::stepped::history-drift::P@1: *",
            "the baseline accepts, as it records, against origin/main*",
            f"accepted in its pull request: P@1 of stepped (merges), 1 -> 0.9 against origin/main "
            f"({tip[:7]}); drift anchor now {merge[:7]}",
        ]
    )
    lines = (root / ".retrieval-gate/history/merges.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert (last["commit"], last["source"], last["accepted_drift"]) == (merge, "record", ["P@1"])

    # The next run on main measures drift from the merge: no more acceptance to take.
    git(root, "add", ".retrieval-gate/history")
    git(root, "commit", "-q", "-m", "the merge's record")
    after = pytester.runpytest("--retrieval-gate", "--rg-record", "-rA")
    assert after.ret == pytest.ExitCode.OK and "ACCEPTED" not in after.stdout.str()
    (drift,) = [g for g in _report(pytester)["gates"] if g["rule"] == "history-drift"]
    assert drift["passed"] and "note" not in drift
    assert (
        drift["detail"][0].startswith("P@1 is level with the anchor of ")
        and merge[:7] in drift["detail"][0]
    )
    assert (
        "(anchor: the merge that recorded the P@1 drop its pull request accepted)"
        in drift["detail"][1]
    )
    assert "accepted" not in _report(pytester)


def test_main_saving_its_baseline_after_the_merge_carries_the_acceptance_and_records_none(
    pytester: pytest.Pytester, main_built: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pytester.path
    _main_with_history(pytester, main_built)
    _pull_request(pytester, monkeypatch)
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "cheaper-ranker", "-m", "merge")
    merge = git(root, "rev-parse", "HEAD")
    result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline", "-rA")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["  ACCEPTED (passed) *history-drift::P@1: accepted in its pull request: *"]
    )
    last = json.loads((root / ".retrieval-gate/history/merges.jsonl").read_text().splitlines()[-1])
    assert (last["commit"], last["source"], last["accepted_drift"]) == (merge, "baseline", ["P@1"])
    # main's baseline accepts nothing of its own: the merge's record carries the acceptance.
    assert "accepted" not in json.loads((root / "retrieval-baseline.json").read_text())


def test_a_drop_saved_at_its_committed_change_is_accepted_there_and_on_main(
    pytester: pytest.Pytester, main_built: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change committed first, then the baseline saved at that commit and committed (the
    order a team took in a trial by hand): the save's own record, at the pull request's commit,
    is a merge of the history carrying the acceptance, newer than where the acceptance stands.
    Before, the pull request's drift item then passed against that record unsaid (not
    ACCEPTED), and main's save after the merge said nothing of it and recorded no
    ``accepted_drift``."""
    root = pytester.path
    _main_with_history(pytester, main_built)
    saved = _pull_request(pytester, monkeypatch, committed=True)
    assert saved.ret == pytest.ExitCode.TESTS_FAILED
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    gate = pytester.runpytest("--retrieval-gate", "-rA")
    monkeypatch.delenv("GITHUB_BASE_REF")
    assert gate.ret == pytest.ExitCode.OK, gate.stdout.str()
    gate.stdout.fnmatch_lines(
        ["  ACCEPTED (passed) *history-drift::P@1: accepted in its pull request: *"]
    )
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "cheaper-ranker", "-m", "merge")
    merge = git(root, "rev-parse", "HEAD")
    result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline", "-rA")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "  ACCEPTED (passed) *history-drift::P@1: accepted in its pull request: *",
            f"accepted in its pull request: P@1 of stepped (merges), 1 -> 0.9 against origin/main "
            f"(*); drift anchor now {merge[:7]}",
        ]
    )
    last = json.loads((root / ".retrieval-gate/history/merges.jsonl").read_text().splitlines()[-1])
    assert (last["commit"], last["source"], last["accepted_drift"]) == (merge, "baseline", ["P@1"])


def test_a_drop_saved_without_its_target_branch_is_named_as_not_recorded(
    pytester: pytest.Pytester, main_built: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Saved without --rg-base (and outside a pull-request run): the baseline records nothing,
    # so the drift check would count the drop on main; the pull request's gate says so.
    root = pytester.path
    tip = _main_with_history(pytester, main_built)
    _pull_request(pytester, monkeypatch, base=False)
    assert "accepted" not in json.loads((root / "retrieval-baseline.json").read_text())
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    gate = pytester.runpytest("--retrieval-gate", "-rA")
    assert gate.ret == pytest.ExitCode.TESTS_FAILED
    assert _verdicts(gate)["history-drift::P@1"] == "FAILED"
    gate.stdout.fnmatch_lines(
        [
            f"accepted in this pull request (its baseline against origin/main ({tip[:7]})):",
            f"  {CHANGE} (not recorded as accepted)",
            f"retrieval gate: warning: the baseline does not record its drop of P@1 of stepped "
            f"(merges) against origin/main ({tip[:7]}) as accepted (saved without --rg-base, or "
            "against an older target): the slow-drift check will count it; save the baseline "
            "again with --rg-base origin/main",
        ]
    )


def test_rg_base_naming_a_ref_git_lacks_is_one_line_and_the_gate_goes_on(
    pytester: pytest.Pytester,
    main_built: dict[str, Path],
) -> None:
    _main_with_history(pytester, main_built)
    result = pytester.runpytest("--retrieval-gate", "--rg-base", "origin/release")
    assert result.ret == pytest.ExitCode.OK
    line = (
        "retrieval gate: warning: cannot read the baseline of origin/release (--rg-base "
        "origin/release): git has no origin/release here: fetch it (git fetch origin release) "
        "or name a ref git has; what this baseline accepts against it is not named"
    )
    assert [x for x in result.outlines if "origin/release" in x] == [line]
    assert _report(pytester)["accepted"]["problem"] == line.removeprefix(
        "retrieval gate: warning: "
    )


def test_a_shallow_clone_is_told_what_to_fetch_and_keeps_what_the_baseline_records(
    pytester: pytest.Pytester, main_built: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # actions/checkout's default: the pull request's commit alone, without origin/main.
    root = pytester.path
    tip = _main_with_history(pytester, main_built)
    _pull_request(pytester, monkeypatch)
    clone = root.parent / f"{root.name}-shallow"
    git(
        root.parent,
        "clone",
        "-q",
        "--depth=1",
        "--branch=cheaper-ranker",
        root.as_uri(),
        str(clone),
    )
    monkeypatch.chdir(clone)
    pytester.syspathinsert(clone)
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    result = pytester.runpytest("--retrieval-gate", "-rA")
    assert result.ret == pytest.ExitCode.OK
    line = (
        "retrieval gate: warning: cannot read the baseline of origin/main (GITHUB_BASE_REF=main): "
        "this clone is shallow and does not have it: fetch it (git fetch --depth=1 origin main) "
        "or set fetch-depth: 0 in actions/checkout; what this baseline accepts against it is not "
        "named"
    )
    assert [x for x in result.outlines if "clone is shallow" in x] == [line]
    # The gate goes on: the drop the baseline records is taken, and named as recorded.
    result.stdout.fnmatch_lines(
        [
            "  ACCEPTED (passed) *history-drift::P@1: *",
            f"the baseline accepts, as it records, against origin/main ({tip[:7]}):",
            "  P@1 of stepped (merges): 1 -> 0.9 (-0.1000, 3 x its tolerance 0.0333) over 50 shared queries",
        ]
    )


def test_a_clean_baseline_saved_over_a_failing_drift_moves_the_anchor_and_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .history_project import commit, run_step, stepped_project

    stepped_project(pytester)
    for step in range(4):
        run_step(pytester, monkeypatch, step, quality=step)
    result = run_step(pytester, monkeypatch, 4, quality=4)  # 4 x 0.02 > the drift tolerance
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    line = (
        f"accepted: P@1 of stepped (merges), 1 -> 0.92 since {commit(0)[:7]} (its drift anchor); "
        f"drift anchor now {commit(4)[:7]}"
    )
    result.stdout.fnmatch_lines([line])
    (over,) = _report(pytester)["accepted"]["saved_over"]
    assert over == {
        "suite": "merges",
        "system": "stepped",
        "metric": "P@1",
        "scope": "suite",
        "rule": "history-drift",
        "from": 1.0,
        "to": 0.92,
        "since": f"{commit(0)[:7]} (its drift anchor)",
        "anchor": f"drift anchor now {commit(4)[:7]}",
        "line": line,
    }
    assert f"- {line}" in (pytester.path / "retrieval-gate-report.md").read_text()
