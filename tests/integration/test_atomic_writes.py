"""The report, its JSON twin and the baseline are written atomically by a real run.

tests/test_atomic.py checks ``write_text_atomic`` itself; these check that the session's writers
use it: each file is renamed into place from a temporary beside it, and a rename that fails
leaves the previous file byte-identical. pytester runs in process, so patching ``os.replace``
here reaches the plugin.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import SUITE, write_suite

Replace = Callable[[str | os.PathLike[str], str | os.PathLike[str]], None]


def _spy(monkeypatch: pytest.MonkeyPatch, *, fail_for: str | None = None) -> list[Path]:
    """Record every ``os.replace`` destination; raise ENOSPC for a destination named ``fail_for``."""
    real: Replace = os.replace
    targets: list[Path] = []

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        target = Path(os.fspath(dst))
        targets.append(target)
        if target.name == fail_for:
            raise OSError(28, "No space left on device", os.fspath(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    return targets


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_file())


def test_report_json_and_baseline_are_renamed_into_place(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(project, SUITE)
    targets = _spy(monkeypatch)
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=5)
    root = project.path.resolve()
    renamed = {t.resolve() for t in targets}
    for name in (
        "retrieval-gate-report.md",
        "retrieval-gate-report.json",
        "retrieval-baseline.json",
    ):
        assert root / name in renamed, name


def test_failed_baseline_save_keeps_the_previous_baseline(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=5)
    baseline = project.path / "retrieval-baseline.json"
    before = baseline.read_bytes()
    files_before = _names(project.path)
    _spy(monkeypatch, fail_for=baseline.name)
    result = project.runpytest("--retrieval-gate", "--rg-save-baseline")
    # The gates passed, but the baseline asked for was not saved: the session fails.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*could not save the baseline*No space left on device*"])
    assert baseline.read_bytes() == before
    assert _names(project.path) == files_before  # no temporary file left behind


def test_failed_report_write_keeps_the_previous_report(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate").assert_outcomes(passed=5)
    report = project.path / "retrieval-gate-report.md"
    before = report.read_bytes()
    files_before = _names(project.path)
    # A different run (one gate now fails), so a torn or rewritten report would differ.
    write_suite(project, SUITE.replace("  R@3: 0.5", "  P@3: 0.9"))
    _spy(monkeypatch, fail_for=report.name)
    result = project.runpytest("--retrieval-gate")
    result.stdout.fnmatch_lines(["*could not write the report*No space left on device*"])
    assert report.read_bytes() == before
    assert _names(project.path) == files_before


def test_a_failed_report_write_leaves_the_other_reports_written_and_announced(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(project, SUITE)
    _spy(monkeypatch, fail_for="retrieval-gate-report.json")
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The JSON is named as what failed; the markdown (and anything after it) is still written
    # and announced.
    result.stdout.fnmatch_lines(
        [
            "*generated retrieval gate report: *retrieval-gate-report.md*",
            "retrieval gate: could not write the report *retrieval-gate-report.json: "
            "No space left on device",
        ]
    )
    assert (project.path / "retrieval-gate-report.md").is_file()
    assert not (project.path / "retrieval-gate-report.json").exists()
