"""Slow drift (gates/history.py): ten merges, each dropping P@1 by 0.6 of its regression
tolerance and each saving a baseline. Every regression item passes; the history-drift item
fails at the first merge where the drop from its anchor exceeds the drift tolerance (twice the
regression tolerance by default), naming the anchor, and again four merges after the baseline
saved over it accepted the drop. Thirty unchanged merges raise nothing.

Each pytester run here is a merge or a run a user makes; a test replays only the merges its
claim needs (records a history needs but no claim looks at are written, not run)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from retrieval_gate.gates.shelflife import adaptive_epsilon
from tests.ledger import entry

from .conftest import lit
from .history_project import (
    SETTINGS,
    STEP_DROP,
    TOLERANCE,
    commit,
    run_step,
    stepped_project,
)

#: Merges replayed for real by the sliding test: failures at 4 and at 8 (the drop accepted at 4
#: re-anchors the window), and a passing merge 9 after the acceptance at 8. A longer replay
#: repeats the same period (the 20-record window never binds while a drift is accepted every
#: fourth merge); the window's own bound is the unchanged test's.
MERGES = 10
#: The unchanged merges: enough that the drift window (20 records) is full and slides.
UNCHANGED = 30


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    """node id suffix -> PASSED / FAILED, from the -rA summary."""
    out = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED"):
            if line.startswith(word + " "):
                nodeid = line.split()[1]
                out[nodeid.split("::", 2)[2]] = word
    return out


def _names_the_queries_that_slid(pytester: pytest.Pytester, result: pytest.RunResult) -> None:
    """Merge 4's failing drift item (q0 ... q3 now rank wrong first) in the terminal, the JSON
    twin and the markdown report. Issue 39: the drift failure named no query and no value
    between the anchor and today."""
    slid = (
        'slid most since the anchor (anchor -> now): q0 "question 0" 1 -> 0 (-1.0000), '
        'q1 "question 1" 1 -> 0 (-1.0000), q2 "question 2" 1 -> 0 (-1.0000), q3 "question 3" '
        "1 -> 0 (-1.0000); 4 of the 50 queries worse, 0 better"
    )
    # Who holds the places above each one's relevant document today (the anchor kept no
    # rankings, so not who displaced it): what a team reads to find the cause.
    above = (
        "ranked above them now: q0: d0 at 2, below d1; q1: d1 at 2, below d2; q2: d2 at 2, "
        "below d3; q3: d3 at 2, below d4"
    )
    steps = (
        f"P@1 at each step: {commit(0)[:7]} 1 (anchor), {commit(1)[:7]} 0.98, "
        f"{commit(2)[:7]} 0.96, {commit(3)[:7]} 0.94, now 0.92"
    )
    result.stdout.fnmatch_lines(
        [
            "P@1 slow drift (merges x stepped): FAILED: 0.92 *",
            "P@1 is 0.08 below the anchor of *",
            "anchor 1 -> now 0.92 over 50 shared queries; *",
            slid,
            above,
            steps,
        ]
    )
    drift = _drift_gate(pytester)
    assert drift["worst"] == [
        {"id": f"q{i}", "value": -1.0, "text": f"question {i}"} for i in range(4)
    ]
    assert drift["detail"][2:] == [slid, above, steps]
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert f"  - {slid}\n  - {above}\n  - {steps}\n" in markdown


def test_small_merges_fail_drift_when_they_add_up(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One replay of ten merges, its runs checked for every claim about a sliding suite: when the
    drift item fails and against which anchor, what its failure names (the queries that slid,
    who ranks above them, each step's value) in the terminal and the report, and the shelf
    life the recorded decisions leave."""
    stepped_project(pytester)
    drift_tolerance = 2 * TOLERANCE  # 0.0667: the default, twice the regression tolerance
    failures = []
    accepted = 0  # each merge saves its baseline: a drift that failed is accepted there
    for step in range(MERGES):
        result = run_step(pytester, monkeypatch, step, quality=step)
        outcomes = _outcomes(result)
        assert outcomes.get("regression::P@1", "PASSED") == "PASSED", step  # 0.02 < 0.0333
        drift = outcomes.get("history-drift::P@1")
        # No history before the first merge; after it, only the baseline itself.
        assert (drift is None) == (step <= 1)
        # The anchor: the oldest of the last 20 records, or the merge that accepted a drift.
        anchor = max(0, step - 20, accepted)
        dropped = (step - anchor) * STEP_DROP
        assert (drift == "FAILED") == (dropped > drift_tolerance + 1e-9), step
        if drift == "FAILED":
            failures.append(step)
            accepted = step
        if step == 4:
            # 4 merges of 0.02 = 0.08 > 0.0667, where 3 (0.06) were not.
            result.stdout.fnmatch_lines(
                [
                    "P@1 slow drift (merges x stepped): FAILED: 0.92 (needs >= 0.9333: the "
                    "anchor's value less the drift tolerance, n=50)",
                    f"P@1 is 0.08 below the anchor of ????-??-?? ({commit(0)[:7]}), over 4 steps "
                    "(accepted baselines and this run), each within its tolerance; more than "
                    "the drift tolerance 0.0667",
                    "anchor 1 -> now 0.92 over 50 shared queries; drift tolerance 0.0667 (anchor: "
                    "the oldest of the last 20 records); resolution *",
                ]
            )
            _names_the_queries_that_slid(pytester, result)
        if step == 8:
            # Saved over the failing item at merge 4, the drop was accepted there (as a
            # regression is): the item fails again once four more merges add up.
            result.stdout.fnmatch_lines(
                [
                    f"P@1 is 0.08 below the anchor of ????-??-?? ({commit(4)[:7]}), over 4 steps *",
                    "anchor 0.92 -> now 0.84 over 50 shared queries; drift tolerance 0.0667 "
                    "(anchor: the newest baseline saved over a failing P@1 drift item); *",
                ]
            )
    assert failures == [4, 8]
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    drift_gates = [g for g in report["gates"] if g["scope"] == "history-drift"]
    assert [g["passed"] for g in drift_gates] == [True]  # one merge after merge 8 accepted
    history = (pytester.path / ".retrieval-gate/history/merges.jsonl").read_text()
    assert history.count("\n") == MERGES
    # Shelf life: each recorded merge revealed its items' verdicts, each a decision the team
    # saw: merge 0 its P@1 floor (no baseline yet), merge 1 the floor and the regression item,
    # merges 2 to 8 those and the drift item: 1 + 2 + 7 x 3 = 24 (this run, merge 9, is not
    # in the history it read). Today P@1 has 41 ones and 9 zeros: sum of squares 50 * 0.82 *
    # 0.18 = 41 * 9 / 50, sd^2 = that / 49.
    (shelf,) = report["history"]["shelf_life"]
    assert shelf["decisions"] == 1 + 2 + 7 * 3
    sd = math.sqrt(41 * 9 / 50 / 49)
    # The fresh figure is the P@1 regression item's planned one (one figure per item), grown by
    # the bound's factor epsilon_24 / epsilon_0 of the formula.
    (item,) = [g for g in report["gates"] if g["scope"] == "regression" and g["metric"] == "P@1"]
    planned = item["planned_resolution"]
    fresh = adaptive_epsilon(sd, 50, 1.0, 0.05, 0)
    factor = adaptive_epsilon(sd, 50, 1.0, 0.05, 24) / fresh
    assert shelf["resolution_fresh"] == pytest.approx(planned)
    assert shelf["resolution_now"] == pytest.approx(planned * factor)
    # 50 queries cannot resolve 0.0333 even fresh: the resolution warning says so, not this.
    assert shelf["resolution_fresh"] > TOLERANCE and not shelf["spent"]
    # Nor does the table read "none": it says what fresh queries would give, ten sessions like
    # this one (3 verdicts each) at the tolerance: the fewest n whose epsilon_30 is within it.
    from retrieval_gate.gates.shelflife import fresh_queries

    units = fresh_queries(sd, 1.0, TOLERANCE, 0.05, 30, planned / fresh)
    assert shelf["fresh_units"] == units and shelf["fresh_decisions"] == 30
    assert units is not None
    assert adaptive_epsilon(sd, units, 1.0, 0.05, 30) * planned / fresh <= TOLERANCE
    assert adaptive_epsilon(sd, units - 1, 1.0, 0.05, 30) * planned / fresh > TOLERANCE
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert (
        f"| 0.0333 | 0 (+-{planned:.4f} even fresh) | {units:,} fresh queries give 30 more "
        "decisions at tolerance 0.0333 |" in markdown
    )
    assert "none: too few" not in markdown


def test_thirty_unchanged_merges_raise_no_drift(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Merges 0 to 2 run for real (no drift item, then none against the baseline alone, then a
    passing one); merges 3 to 28 are merge 2's own record at their commits, as those runs of the
    unchanged project would record it; merge 29 runs for real against a full window of 20."""
    import dataclasses

    from retrieval_gate.baseline.log import JsonLinesLog

    stepped_project(pytester)
    for step in range(3):
        result = run_step(pytester, monkeypatch, step, quality=5)
        assert result.ret == 0, step
        assert _outcomes(result).get("history-drift::P@1") == (None if step <= 1 else "PASSED")
    store = JsonLinesLog(pytester.path / ".retrieval-gate/history")
    *_, last = store.read("merges").entries
    store.append(
        [
            dataclasses.replace(
                last, at=dataclasses.replace(last.at, commit=commit(step)), session=f"m{step}"
            )
            for step in range(3, UNCHANGED - 1)
        ]
    )
    result = run_step(pytester, monkeypatch, UNCHANGED - 1, quality=5)
    assert result.ret == 0
    assert _outcomes(result).get("history-drift::P@1") == "PASSED"
    drift = _drift_gate(pytester)
    assert drift["passed"] and drift["value"] == drift["threshold"] + 2 * TOLERANCE
    # The window holds the last 20 of the 29 earlier records: its oldest is merge 9.
    assert drift["detail"][0] == (
        f"P@1 is level with the anchor of {_day(pytester, 9)} ({commit(9)[:7]}), over 20 steps "
        "(accepted baselines and this run), each within its tolerance"
    )
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (trend,) = report["history"]["trends"]
    assert trend["change_points"] == [] and trend["anchor"] == commit(9)[:7]
    assert len(trend["points"]) == UNCHANGED  # the 29 earlier records and this run


def _recorded(
    pytester: pytest.Pytester, values: list[float], accepted: tuple[int, ...] = ()
) -> None:
    """One record of P@1 per merge, merge ``step`` at ``commit(step)`` on 2026-09-(step + 1),
    its drift accepted at the merges ``accepted`` (as a baseline saved over a failing drift item
    records it)."""
    from retrieval_gate.baseline.log import JsonLinesLog
    from retrieval_gate.baseline.provenance import Provenance

    records = [
        entry(
            suite="merges",
            system="stepped",
            at=Provenance(commit(step), f"2026-09-{step + 1:02d}T12:00:00Z"),
            suite_digest="s",
            identity="i",
            source="baseline",
            decided=True,
            session=str(step),
            n=50,
            metrics={"P@1": value},
            tolerance={"P@1": TOLERANCE},
            accepted_drift=("P@1",) if step in accepted else (),
        )
        for step, value in enumerate(values)
    ]
    JsonLinesLog(pytester.path / ".retrieval-gate/history").append(records)


def test_a_level_shift_at_step_15_is_named_in_the_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    stepped_project(pytester)
    # 29 recorded merges: P@1 0.9 with +-0.01 wobble, then 0.8 from merge 15 (5 more queries
    # wrong); today's run is at quality 10, P@1 = 0.8.
    wobble = [0.01, -0.01, 0.0]
    _recorded(pytester, [(0.9 if step < 15 else 0.8) + wobble[step % 3] for step in range(29)])
    monkeypatch.setenv("GITHUB_SHA", commit(29))
    (pytester.path / "step.txt").write_text("10", encoding="utf-8")
    pytester.runpytest("--retrieval-gate", "--rg-record")
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (trend,) = report["history"]["trends"]
    (change,) = trend["change_points"]
    assert change["index"] == 15 and change["commit"] == commit(15)[:7]
    assert change["date"] == "2026-09-16"
    assert change["shift"] == pytest.approx(-0.1, abs=0.01)
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert f"a step at `{change['commit']}` (2026-09-16): 0.9 -> 0.8 (-0.1000)" in markdown
    # Marked on the chart's x axis with its commit and date.
    assert f'"{change["commit"]} 2026-09-16 (change)"' in markdown
    assert trend["slides"] == []
    assert "line [" in markdown


def test_a_steady_slide_is_one_slide_named_alike_on_every_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten merges each losing 0.6 x the tolerance of P@1 (0.02 of 0.0333), the drift accepted
    at merges 4 and 8 (where the thirty-merge test fails it); today's run (P@1 0.8) is the
    eleventh point. Two runs of that history under two seeds name one slide, in the same words:
    no merge is blamed for it."""
    stepped_project(pytester)
    _recorded(pytester, [1.0 - STEP_DROP * step for step in range(10)], accepted=(4, 8))
    monkeypatch.setenv("GITHUB_SHA", commit(10))
    (pytester.path / "step.txt").write_text("10", encoding="utf-8")
    seen = []
    for seed in (0, 7):
        pytester.makefile(
            ".toml",
            pyproject=SETTINGS.replace(
                "[tool.retrieval_gate]\n", f"[tool.retrieval_gate]\nseed = {seed}\n"
            ),
        )
        for old in pytester.path.glob("retrieval-gate-report.*"):
            old.unlink()
        assert pytester.runpytest("--retrieval-gate").ret == 0
        report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
        markdown = (pytester.path / "retrieval-gate-report.md").read_text()
        history = markdown.split("### History", 1)[1].split("\n### ", 1)[0]  # not latencies
        seen.append((report["history"]["trends"], history))
    assert seen[0] == seen[1]
    (trend,), history = seen[0]
    assert trend["change_points"] == []
    (slide,) = trend["slides"]
    assert (slide["from"], slide["to"], slide["merges"], slide["ongoing"]) == (
        commit(0)[:7],
        "now",
        10,
        True,
    )
    assert slide["slope"] == pytest.approx(-STEP_DROP)
    assert (slide["first"], slide["last"]) == pytest.approx((1.0, 0.8))
    assert trend["anchor"] == commit(8)[:7]  # the newest accepted drift
    assert trend["accepted"] == [commit(4)[:7], commit(8)[:7]]
    assert (
        f"P@1 has slid 0.02 per merge (0.6 x its tolerance) over the last 10 merges, since "
        f"`{commit(0)[:7]}` (2026-09-01): 1 -> 0.8 on its fitted line" in history
    )
    assert "change point" not in history and "a step at" not in history
    # The x axis: each point's commit and date, the slide's start, the accepted anchors marked.
    assert f'"{commit(0)[:7]} 2026-09-01 (slide)"' in history
    assert f'"{commit(4)[:7]} 2026-09-05 (accepted)"' in history
    assert f'"{commit(8)[:7]} 2026-09-09 (anchor, accepted)"' in history
    assert f'"{commit(9)[:7]} 2026-09-10"' in history
    assert re.search(rf'"now {commit(10)[:7]} \d{{4}}-\d\d-\d\d"', history)


def _drift_gate(pytester: pytest.Pytester) -> dict[str, Any]:
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (drift,) = [g for g in report["gates"] if g["scope"] == "history-drift"]
    return drift  # type: ignore[no-any-return]


def _day(pytester: pytest.Pytester, step: int) -> str:
    """The day merge ``step`` was recorded (its record's time)."""
    lines = (pytester.path / ".retrieval-gate/history/merges.jsonl").read_text().splitlines()
    return str(json.loads(lines[step])["time"])[:10]


def test_k_drift_selects_both_kinds_and_history_drift_only_these(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    stepped_project(pytester)
    run_step(pytester, monkeypatch, 0, quality=0)
    run_step(pytester, monkeypatch, 1, quality=0)
    result = pytester.runpytest("--retrieval-gate", "--collect-only", "-q", "-k", "history-drift")
    assert [line for line in result.outlines if "::" in line] == [
        "merges.retrieval.yaml::stepped::history-drift::P@1"
    ]
    result = pytester.runpytest("--retrieval-gate", "--collect-only", "-q", "-k", "drift")
    assert "merges.retrieval.yaml::stepped::history-drift::P@1" in result.outlines


def test_a_pin_is_named_and_one_matching_two_commits_is_a_usage_error_naming_them(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three merges recorded; a pin matching them all is refused, then merge 3 pinned to merge 1
    is compared with it."""
    stepped_project(pytester)
    for step in range(3):
        run_step(pytester, monkeypatch, step, quality=step)
    # abc0000, abc0001 and abc0002 all start with abc0: the newest was silently taken.
    result = pytester.runpytest("--retrieval-gate", "--rg-pin", "ABC0")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # an error of the collection
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        [
            f"--rg-pin ABC0: ambiguous: the history has records at {commit(0)[:7]}, "
            f"{commit(1)[:7]} and {commit(2)[:7]}; give more digits of the commit"
        ]
    )
    result = run_step(pytester, monkeypatch, 3, 3, "--rg-pin", commit(1)[:7])
    assert result.ret == 0
    drift = _drift_gate(pytester)
    assert drift["passed"]  # 2 merges of 0.02 = 0.04 <= 0.0667
    assert drift["detail"][0] == (
        f"P@1 is 0.04 below the pinned anchor of {_day(pytester, 1)} ({commit(1)[:7]}), over 2 "
        "steps (accepted baselines and this run), each within its tolerance"
    )


def test_a_file_url_store_is_relative_to_the_rootdir_from_a_subfolder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    stepped_project(pytester)
    with (pytester.path / "pyproject.toml").open("a") as settings:
        settings.write('\n[tool.retrieval_gate.history]\nstore = "file://quality"\n')
    monkeypatch.setenv("GITHUB_SHA", commit(0))
    monkeypatch.chdir(pytester.mkdir("sub"))
    result = pytester.runpytest("--retrieval-gate", "--rg-record", "..")
    assert result.ret == 0
    assert (pytester.path / "quality/merges.jsonl").read_text().count("\n") == 1
    assert not (pytester.path / "sub/quality").exists()


def test_a_suite_spent_by_decisions_is_warned(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from retrieval_gate.baseline.log import JsonLinesLog

    stepped_project(pytester)
    text = (pytester.path / "pyproject.toml").read_text()
    (pytester.path / "pyproject.toml").write_text(text.replace(repr(TOLERANCE), "0.1"))
    result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    store = JsonLinesLog(pytester.path / ".retrieval-gate/history")
    (first,) = store.read("merges").entries
    # The baseline's own session revealed one verdict (its P@1 floor), and six earlier
    # decisions on this version of the suite are entries written before the verdicts were
    # counted (no "verdicts": sessions d0..d5, each at its own commit, since copies at one
    # commit would be one measurement): each counts one, as it did then.
    assert first.verdicts == 1
    store.append(
        [
            dataclasses.replace(
                first,
                at=dataclasses.replace(first.at, commit=commit(i)),
                decided=True,
                session=f"d{i}",
                verdicts=None,
            )
            for i in range(6)
        ]
    )
    line = (pytester.path / ".retrieval-gate/history/merges.jsonl").read_text().splitlines()[-1]
    assert '"verdicts"' not in line
    result = pytester.runpytest("--retrieval-gate")
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (shelf,) = report["history"]["shelf_life"]
    assert shelf["decisions"] == 7 and shelf["older_sessions"] == 6
    assert shelf["resolution_fresh"] <= 0.1 < shelf["resolution_now"]  # 0.040, 0.133
    result.stdout.fnmatch_lines(
        [
            "retrieval gate: warning: the shelf life of suite merges is spent: after 7 revealed "
            "verdicts its P@1 resolution is +-* > tolerance 0.1; * fresh queries give 30 more at "
            "tolerance 0.1 (a changed suite starts a new ledger)"
        ]
    )
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert "| `stepped` | P@1 | 50 | 7 |" in markdown
    assert "6 sessions recorded before the count was kept count one each" in markdown


def test_a_pin_the_history_lacks_fails_never_skips(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 39: a pin with no record skipped the drift item and the session exited 0, the
    # reason shown only under -rs. Outside git, a commit prefix is matched against the records.
    stepped_project(pytester)
    run_step(pytester, monkeypatch, 0, quality=0)
    result = pytester.runpytest("--retrieval-gate", "--rg-pin", "beef")
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "  pinned to beef (git cannot resolve it here: not a git repository; matched as a "
            "commit prefix), which no record of merges x stepped is at: the nearest recorded "
            f"commits are {commit(0)[:7]} of {_day(pytester, 0)}; record the pinned commit "
            "(check it out and run with --rg-record) or pin a recorded one",
            "  FAILED merges.retrieval.yaml::stepped::history-drift::P@1: pinned to beef: no "
            "record at it or at an ancestor of it, nothing to compare with",
        ]
    )


def test_xdist_gives_the_same_drift_verdicts_and_writes_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    stepped_project(pytester)
    for step in range(4):  # 0.06 below merge 0 at merge 3: no drift failed (none accepted)
        run_step(pytester, monkeypatch, step, quality=step)
    (pytester.path / "step.txt").write_text("4")
    pytester.runpytest("--retrieval-gate")  # serial, writing nothing to the history
    serial = _drift_gate(pytester)
    lines = (pytester.path / ".retrieval-gate/history/merges.jsonl").read_text().count("\n")
    monkeypatch.setenv("GITHUB_SHA", commit(4))
    result = pytester.runpytest("--retrieval-gate", "--rg-record", "-n", "2", "-p", "no:benchmark")
    assert result.ret == 1  # the drift item fails: 0.08 below merge 0's record, over 4 steps
    parallel = _drift_gate(pytester)
    # The report's failing gates say what the item is against, as the terminal does.
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert (
        f"- `merges.retrieval.yaml::stepped::history-drift::P@1`: P@1 is 0.08 below the anchor "
        f"of {_day(pytester, 0)} ({commit(0)[:7]}), over 4 steps (accepted baselines and this "
        "run), each within its tolerance; more than the drift tolerance 0.0667\n"
    ) in markdown
    assert {k: parallel[k] for k in ("passed", "value", "threshold", "detail")} == {
        k: serial[k] for k in ("passed", "value", "threshold", "detail")
    }
    # One record appended, by the controller alone.
    history = (pytester.path / ".retrieval-gate/history/merges.jsonl").read_text()
    assert history.count("\n") == lines + 1


def test_a_suite_whose_every_query_changed_is_not_compared_with_the_anchor(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The anchor's 50 queries all renamed: the drift item would compare the means of two other
    # sets of queries (and did, failing with "the anchor kept no per-query values").
    stepped_project(pytester)
    run_step(pytester, monkeypatch, 0, quality=0)
    run_step(pytester, monkeypatch, 1, quality=0)
    suite = pytester.path / "merges.retrieval.yaml"
    suite.write_text(suite.read_text().replace("id: q", "id: renamed-q"))
    (pytester.path / "step.txt").write_text("10")  # P@1 0.8 against the anchor's 1
    result = pytester.runpytest("--retrieval-gate", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            f"SKIPPED*not compared with the anchor of {_day(pytester, 0)} ({commit(0)[:7]}): "
            "none of its queries is unchanged today (every one edited, renamed or removed)"
        ]
    )


def test_a_metric_gated_since_the_anchor_is_not_compared_with_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # P@2 gated after the anchor was recorded: it passed as "level with the anchor" against a
    # value the anchor never had, and the JSON twin's threshold was NaN (not JSON).
    stepped_project(pytester)
    run_step(pytester, monkeypatch, 0, quality=0)
    run_step(pytester, monkeypatch, 1, quality=0)
    suite = pytester.path / "merges.retrieval.yaml"
    suite.write_text(
        suite.read_text()
        .replace("k: [1]", "k: [1, 2]")
        .replace("  P@1: 0.0", "  P@1: 0.0\n  P@2: 0.0")
    )
    result = pytester.runpytest("--retrieval-gate", "-rs")
    result.stdout.fnmatch_lines(
        [
            f"SKIPPED*not compared with the anchor of {_day(pytester, 0)} ({commit(0)[:7]}): it "
            "has no P@2 (a metric measured since)"
        ]
    )
    text = (pytester.path / "retrieval-gate-report.json").read_text()
    assert "NaN" not in text
    drift = [g for g in json.loads(text)["gates"] if g["scope"] == "history-drift"]
    assert [(g["metric"], g["passed"]) for g in drift] == [("P@1", True)]


def test_compaction_keeps_each_systems_anchor_with_many_systems(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keep_values counts each system's entries: counted over the log (both systems') it
    compacted the anchor of a drift window of 2 of each system's entries, deciding it on suite
    values with no resolution. The live file is sealed at every append here (a segment of a
    byte), so each step's entries are a segment that compaction may take."""
    from retrieval_gate.baseline import log

    monkeypatch.setattr(log, "SEGMENT_BYTES", 1)
    stepped_project(pytester)
    settings = (pytester.path / "pyproject.toml").read_text()
    settings = settings.replace('systems = ["stepped"]', 'systems = ["stepped", "twin"]')
    settings += '\n[tool.retrieval_gate.system.twin]\nretriever = "stepped_app:retrieve"\n'
    settings += "\n[tool.retrieval_gate.history]\nkeep_values = 2\ndrift_window = 2\n"
    (pytester.path / "pyproject.toml").write_text(settings)
    for step in range(4):
        run_step(pytester, monkeypatch, step, quality=step)
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    drift = [g for g in report["gates"] if g["scope"] == "history-drift"]
    assert [g["system"] for g in drift] == ["stepped", "twin"]
    for gate in drift:  # anchor: merge 1 (P@1 0.98), now merge 3 (0.94)
        assert gate["detail"][1].startswith("anchor 0.98 -> now 0.94 over 50 shared queries;")
    segments = pytester.path / ".retrieval-gate/history/merges.d"
    compacted = [
        [bool(json.loads(line).get("compacted")) for line in path.read_text().splitlines()]
        for path in sorted(segments.glob("*.jsonl"))
    ]
    # Steps 0, 1 and 2 sealed; step 0's and step 1's have two newer entries of each system.
    assert compacted == [[True, True], [True, True], [False, False]]


def test_a_compaction_that_fails_after_the_append_says_the_entries_are_in(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It said "could not append to the history", after appending: a rerun appends them twice.
    from retrieval_gate.baseline import log

    monkeypatch.setattr(log, "SEGMENT_BYTES", 1)
    stepped_project(pytester)
    settings = (pytester.path / "pyproject.toml").read_text()
    settings += "\n[tool.retrieval_gate.history]\nkeep_values = 2\n"
    (pytester.path / "pyproject.toml").write_text(settings)
    run_step(pytester, monkeypatch, 0, quality=0)
    run_step(pytester, monkeypatch, 1, quality=0)  # seals step 0's entry: due at the next
    segment = pytester.path / ".retrieval-gate/history/merges.d/000001.jsonl"
    outside = pytester.path.parent / f"{pytester.path.name}-elsewhere.jsonl"
    segment.rename(outside)
    segment.symlink_to(outside)  # a link out of the project: never written through
    result = run_step(pytester, monkeypatch, 2, quality=0)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            # Announced as the reports and the baseline written are, in the singular.
            "-* recorded 1 run in the retrieval gate history: * -*",
            "retrieval gate: recorded, but could not compact the history *000001.jsonl*",
        ]
    )
    live = pytester.path / ".retrieval-gate/history/merges.jsonl"
    assert live.read_text().count("\n") == 1  # step 2's entry, appended once


def test_a_run_from_uncommitted_changes_is_recorded_as_such_and_no_merge(
    pytester: pytest.Pytester,
) -> None:
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=pytester.path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    stepped_project(pytester)
    git("init", "-q")
    git("add", "pyproject.toml", "stepped_app.py", "merges.retrieval.yaml", "step.txt")
    git("commit", "-q", "-m", "one")
    first = git("rev-parse", "HEAD")
    # A tracked file edited (as a CI step that rewrites a lock file would): named, and while
    # every record is from uncommitted changes, said to leave drift without an anchor.
    (pytester.path / "step.txt").write_text("0\n")
    result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    result.stdout.fnmatch_lines(
        ["retrieval gate: warning: the working tree has uncommitted changes (step.txt): *"]
    )
    result = pytester.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(
        [
            "retrieval gate: warning: no slow-drift check for merges x stepped: each of its 1 "
            "record in the history was made from uncommitted changes, so none is a drift anchor"
        ]
    )
    (pytester.path / "step.txt").write_text("0")
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    git("add", "retrieval-baseline.json", ".retrieval-gate/history")
    git("commit", "-q", "-m", "the baseline")
    second = git("rev-parse", "HEAD")
    # A developer's change, run and saved before it is committed: measured on top of HEAD, not
    # at it. The history recorded it as HEAD, a merge: an anchor, a step, a trend point.
    (pytester.path / "step.txt").write_text("3")  # P@1 0.94
    result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    result.stdout.fnmatch_lines(
        [
            f"retrieval gate: warning: the working tree has uncommitted changes (step.txt): "
            f"recorded as {second[:7]}-dirty, counted in the shelf-life ledger but no drift "
            "anchor, step or trend point (record from a clean checkout of the commit for that)"
        ]
    )
    lines = (pytester.path / ".retrieval-gate/history/merges.jsonl").read_text().splitlines()
    assert [json.loads(line).get("dirty") for line in lines] == [True, None, True]
    saved = json.loads((pytester.path / "retrieval-baseline.json").read_text())["saved"]
    assert saved["commit"] == second and saved["dirty"] is True
    # Committed, then run on main: drift is read from the first merge over one step, the dirty
    # record neither a step nor a point of the trend.
    git("commit", "-q", "-a", "-m", "the change")
    pytester.runpytest("--retrieval-gate", "--rg-record")
    drift = _drift_gate(pytester)
    assert drift["detail"][0].startswith(
        f"P@1 is 0.06 below the anchor of {_day(pytester, 1)} ({first[:7]}), over 1 step "
    )
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (trend,) = report["history"]["trends"]
    assert [p["commit"] for p in trend["points"]] == [first[:7], "now"]
    assert report["history"]["baseline_age"]["saved"]["dirty"] is True


def test_a_tracked_report_rewritten_by_the_last_run_leaves_the_baseline_clean(
    pytester: pytest.Pytester,
) -> None:
    # A team that commits its markdown report: the last run rewrote it. The history does not
    # count the plugin's outputs as uncommitted changes; the baseline's 'saved' must not either.
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=pytester.path,
            capture_output=True,
            check=True,
        )

    stepped_project(pytester)
    (pytester.path / "step.txt").write_text("0")
    pytester.runpytest("--retrieval-gate")
    report = pytester.path / "retrieval-gate-report.md"
    git("init", "-q")
    git("add", "pyproject.toml", "stepped_app.py", "merges.retrieval.yaml", "step.txt")
    git("add", report.name)
    git("commit", "-q", "-m", "one")
    report.write_text(report.read_text() + "\n(as another run wrote it)\n")
    result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    assert "uncommitted changes" not in result.stdout.str()
    saved = json.loads((pytester.path / "retrieval-baseline.json").read_text())["saved"]
    assert "dirty" not in saved, saved


def test_a_held_history_lock_fails_the_record_in_one_line_naming_its_holder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It waited for ever, saying nothing: a CI job stuck until its own timeout.
    import fcntl
    import os

    stepped_project(pytester)
    settings = pytester.path / "pyproject.toml"
    settings.write_text(
        settings.read_text().replace(
            "[tool.retrieval_gate]\n", "[tool.retrieval_gate]\nlock_timeout = 0.2\n"
        )
    )
    run_step(pytester, monkeypatch, 0, quality=0)
    holder = os.open(pytester.path / ".retrieval-gate/history/.lock", os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another open of it: as another process would
    try:
        result = run_step(pytester, monkeypatch, 1, quality=0)
    finally:
        os.close(holder)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    said = lit(
        "; gave up after 0.2 s (lock_timeout in [tool.retrieval_gate]): wait for it to finish, "
        "or end it"
    )
    result.stdout.fnmatch_lines(
        [
            "retrieval gate: could not append to the history *.retrieval-gate/history/.lock: "
            f"the history's lock is held by process {os.getpid()} (*){said}",
        ]
    )
    history = (pytester.path / ".retrieval-gate/history/merges.jsonl").read_text()
    assert history.count("\n") == 1  # the first record alone: nothing half written


def test_a_flood_of_bad_history_lines_is_four_lines_everywhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 10,000 bad lines were 10,000 lines of the terminal (and none in the reports).
    stepped_project(pytester)
    run_step(pytester, monkeypatch, 0, quality=0)
    path = pytester.path / ".retrieval-gate/history/merges.jsonl"
    with open(path, "a") as out:
        out.write("not a record\n" * 10_000)
    result = pytester.runpytest("--retrieval-gate", "-rA")
    assert result.ret == pytest.ExitCode.OK
    said = [line for line in result.outlines if line.startswith("history: ")]
    assert said == [
        f"history: {path} line 2: not a record (a torn write or an edit); skipped",
        f"history: {path} line 3: not a record (a torn write or an edit); skipped",
        f"history: {path} line 4: not a record (a torn write or an edit); skipped",
        f"history: {path}: 9,997 more lines skipped (10,000 in all: 10,000 not a record)",
    ]
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    assert report["history"]["problems"] == [line.removeprefix("history: ") for line in said]
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert markdown.count("> **History:** ") == 4
    assert "10,000 in all: 10,000 not a record" in markdown
    assert all(g["passed"] for g in report["gates"])  # the gate still decides
