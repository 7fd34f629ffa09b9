"""A gate cannot be fooled into passing by an interpreter exit in the code under test.

``os._exit(0)`` in a retriever ends pytest at once with exit status 0 and no summary: no hook
can run after it. Two guarantees (docs/ci.md): the documented CI workflow (examples/github-actions)
removes any earlier JSON report, runs the gate, then runs its completion check, which fails when
the report is missing, incomplete or failed (these tests run that very step); and a retriever
system with ``isolate = true`` runs in a child process, whose exit fails that system's run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_gate.report.complete import main, problem

from ..test_ci_example import completion_check
from .conftest import SUITE, write_suite

EXITING = """
import os


def retrieve(query, k):
    os._exit(0)
"""


def _run_check(root: Path) -> subprocess.CompletedProcess[str]:
    """The workflow's completion check, as its shell runs it, with this interpreter."""
    argv = shlex.split(completion_check())
    assert argv[0] == "python"
    return subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
        timeout=120,
    )


def test_an_interpreter_exit_passes_pytest_and_fails_the_check(project: pytest.Pytester) -> None:
    """In a pytest of its own: the retriever's os._exit would end this very process. The
    workflow's check runs as its shell runs it, the one test of that command line."""
    write_suite(project, SUITE)
    project.makepyfile(search_app=EXITING)
    result = project.runpytest_subprocess("--retrieval-gate")
    # The hazard: pytest's own exit status says nothing went wrong.
    assert result.ret == 0
    assert not (project.path / "retrieval-gate-report.json").exists()
    check = _run_check(project.path)
    assert check.returncode == 1
    assert check.stderr.splitlines() == [
        "retrieval gate: retrieval-gate-report.json was not written: the session did not reach "
        "its end (an interpreter exit such as os._exit in the code under test, a crash or a "
        "kill), so no gate decided"
    ]


def test_a_complete_passing_session_passes_the_check(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In process: nothing here ends the interpreter. The workflow's check is called as the
    # function its command runs; the command itself, as the shell runs it, is run above.
    write_suite(project, SUITE)
    assert project.runpytest("--retrieval-gate").ret == 0
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert report["complete"] is True
    argv = shlex.split(completion_check())
    assert argv[:3] == ["python", "-m", "retrieval_gate.report.complete"]
    capsys.readouterr()
    monkeypatch.chdir(project.path)
    assert main(argv[3:]) == 0
    check = capsys.readouterr()
    assert check.out.strip() == (
        "retrieval gate: retrieval-gate-report.json is complete and passed"
    ), check.err


def _report(tmp_path: Path, **fields: object) -> Path:
    path = tmp_path / "retrieval-gate-report.json"
    data = {"version": 1, "generator": "pytest-retrieval-gate 0.1.0", "passed": True}
    path.write_text(json.dumps({**data, **fields}), encoding="utf-8")
    return path


def test_a_report_without_the_marker_fails_the_check(tmp_path: Path) -> None:
    # Reports written by an interrupted session, or before the marker existed.
    assert "has no completion marker" in (problem(_report(tmp_path, complete=False)) or "")
    assert "has no completion marker" in (problem(_report(tmp_path)) or "")
    assert main([str(_report(tmp_path, complete=False))]) == 1


def test_a_failed_or_foreign_report_fails_the_check(tmp_path: Path) -> None:
    assert "says the gate failed" in (problem(_report(tmp_path, complete=True, passed=False)) or "")
    assert "is not a JSON report of" in (
        problem(_report(tmp_path, complete=True, generator="other")) or ""
    )
    (tmp_path / "garbage.json").write_text("{", encoding="utf-8")
    assert "is not JSON" in (problem(tmp_path / "garbage.json") or "")
    assert main([str(_report(tmp_path, complete=True))]) == 0


ISOLATED = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate]
systems = ["keyword", "quitter"]

[tool.retrieval_gate.system.keyword]
retriever = "search_app:retrieve"
isolate = {both}

[tool.retrieval_gate.system.quitter]
retriever = "quit_app:retrieve"
isolate = true
timeout = {timeout}
"""


def test_an_isolated_retriever_that_exits_fails_its_run(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.makefile(".toml", pyproject=ISOLATED.format(timeout=60, both="true"))
    project.makepyfile(quit_app=EXITING)
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The other system, isolated too, runs as ever; the one that exits fails with one line.
    result.assert_outcomes(passed=5, failed=5)
    result.stdout.fnmatch_lines(
        [
            "run failed: lineage x quitter: *lineage.retrieval.yaml [[]query join_orders[]]: "
            "retriever quit_app:retrieve ended its process (isolate = true) with exit status 0: "
            "an interpreter exit such as os._exit, or a crash, in the code; it would have ended "
            "pytest (5 gates not decided)"
        ]
    )
    assert json.loads((project.path / "retrieval-gate-report.json").read_text())["complete"]


def test_an_isolated_retriever_past_its_time_limit_is_stopped(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.makefile(".toml", pyproject=ISOLATED.format(timeout=0.5, both="false"))
    project.makepyfile(quit_app="import time\n\n\ndef retrieve(query, k):\n    time.sleep(600)\n")
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "run failed: lineage x quitter: *: retriever quit_app:retrieve did not return within "
            "0.5 s (its process was stopped) for query join_orders (the 'timeout' setting of "
            "system.quitter) (5 gates not decided)"
        ]
    )


# What the isolated retriever returns crosses as data: pickle ran the child's __reduce__ in
# pytest, where raising was an internal error of 850 lines and os._exit(0) ended the session.
UNPICKLED = """
import os


class Evil:
    def __reduce__(self):
        return {reduce}

    def __repr__(self):
        return "Evil()"


def retrieve(query, k):
    return [Evil()]
"""

REFUSED = (
    "run failed: lineage x quitter: *lineage.retrieval.yaml [[]query join_orders[]]: retriever "
    "quit_app:retrieve returned Evil() at position 0; expected (doc_id, score) (5 gates not "
    "decided)"
)


def test_an_isolated_result_is_never_unpickled_in_pytest(project: pytest.Pytester) -> None:
    """In a pytest of its own: before the fix, the child's bytes ended this very process."""
    write_suite(project, SUITE)
    project.makefile(".toml", pyproject=ISOLATED.format(timeout=60, both="false"))
    project.makepyfile(quit_app=UNPICKLED.format(reduce="(os._exit, (0,))"))
    result = project.runpytest_subprocess("--retrieval-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([REFUSED])
    assert json.loads((project.path / "retrieval-gate-report.json").read_text())["complete"]


def test_an_isolated_result_that_would_raise_when_unpickled_is_one_line(
    project: pytest.Pytester,
) -> None:
    write_suite(project, SUITE)
    project.makefile(".toml", pyproject=ISOLATED.format(timeout=60, both="false"))
    project.makepyfile(quit_app=UNPICKLED.format(reduce='(int, ("not a number",))'))
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=5, failed=5)
    result.stdout.fnmatch_lines([REFUSED])
    output = result.stdout.str()
    assert "INTERNALERROR" not in output and "Traceback" not in output


# -- a session that did not finish cleanly never writes "complete": true ---------------------


def _marker(project: pytest.Pytester) -> tuple[bool, list[str], str | None]:
    """The JSON twin's completion marker, its reasons, and the completion check's line (None
    when it passes)."""
    path = project.path / "retrieval-gate-report.json"
    report = json.loads(path.read_text())
    return report["complete"], report.get("unfinished", []), problem(path)


def test_a_session_that_ran_nothing_says_so_and_fails_the_check(project: pytest.Pytester) -> None:
    """Issue 40: the check said "the session did not reach its end" for a session that ended
    normally with nothing selected."""
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "-k", "nomatch")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    why = "5 gate items deselected by -k 'nomatch', and no gate item is left"
    result.stdout.fnmatch_lines(
        [
            "*generated retrieval gate report: *retrieval-gate-report.json*",
            f"retrieval gate: nothing ran: {why}",
        ]
    )
    report = json.loads((project.path / "retrieval-gate-report.json").read_text())
    assert (report["complete"], report["passed"], report["nothing_ran"]) == (True, False, why)
    check = _run_check(project.path)
    assert check.returncode == 1
    assert check.stderr.splitlines() == [
        "retrieval gate: retrieval-gate-report.json says the session completed with no gate run "
        f"({why}): nothing was decided, as pytest's exit status 5 says; select or add gates"
    ]


def test_a_baseline_that_could_not_be_saved_leaves_the_session_unfinished(
    project: pytest.Pytester,
) -> None:
    write_suite(project, SUITE)
    (project.path / "held").write_text("a file, where the baseline's folder would be\n")
    result = project.runpytest(
        "--retrieval-gate", "--rg-save-baseline", "--rg-baseline", "held/baseline.json"
    )
    result.assert_outcomes(passed=5)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    complete, unfinished, line = _marker(project)
    assert not complete and len(unfinished) == 1
    assert unfinished[0].startswith("could not save the baseline ")
    assert line is not None and "says the session did not finish cleanly: could not save" in line


def test_a_collection_error_leaves_an_unfinished_report(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    write_suite(project, "queries: [{id: a, query: x}]\n", name="broken.retrieval.yaml")
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    complete, unfinished, line = _marker(project)
    assert not complete
    assert unfinished == [
        "pytest interrupted the session (exit status 2: Ctrl-C, or an error during collection) "
        "before every item ran"
    ]
    assert line is not None and line.endswith(f"did not finish cleanly: {unfinished[0]}")


def test_a_session_stopped_by_x_is_not_complete(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "--rg-system", "reverse", "-x")
    result.assert_outcomes(failed=1)
    complete, unfinished, _ = _marker(project)
    assert (complete, unfinished) == (
        False,
        ["the session stopped before every item ran (stopping after 1 failures)"],
    )


def test_a_crashed_xdist_worker_leaves_the_session_unfinished(project: pytest.Pytester) -> None:
    """Under -n 2 a worker ended by os._exit is reported by xdist as a crashed item; the items
    it would have decided hand nothing over, so the report must not say complete. (Slow: xdist
    starts its workers, and one again after the crash; on 65934fb this report said complete and
    passed.)"""
    pytest.importorskip("xdist")
    write_suite(project, SUITE)
    settings = ISOLATED.format(timeout=60, both="false").replace("isolate = true\n", "")
    project.makefile(".toml", pyproject=settings)
    project.makepyfile(quit_app=EXITING)
    result = project.runpytest("--retrieval-gate", "-n", "2", "--max-worker-restart", "1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    complete, unfinished, line = _marker(project)
    assert not complete
    assert unfinished and unfinished[0].startswith("an xdist worker crashed while running ")
    assert line is not None
