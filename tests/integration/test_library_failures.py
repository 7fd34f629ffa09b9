"""A library failing underneath a run (errors.LibraryError) is one line by default, whose
traceback is there for who asks: -v, --tb=long, the JSON report; under xdist the same line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .bad_inputs import plugin_embedder
from .conftest import lit

LINE = (
    "*pyproject.toml [system.plugin]: conftest.py failed while embedding document "
    "'docs/faq.md': KeyError: 'refunds'"
)


def _project(project: pytest.Pytester) -> None:
    for name, text in plugin_embedder("raise").items():
        path = project.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(text), encoding="utf-8")


@pytest.mark.parametrize("args", [(), ("-p", "xdist", "-n", "2")], ids=["serial", "xdist"])
def test_a_librarys_failure_is_one_line_with_no_traceback(
    project: pytest.Pytester, args: tuple[str, ...]
) -> None:
    if args:
        pytest.importorskip("xdist")
    _project(project)
    result = project.runpytest("--retrieval-gate", *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([lit(LINE)])
    assert "Traceback" not in result.stdout.str()
    assert "internal error" not in result.stdout.str()


@pytest.mark.parametrize("flag", ["-v", "--tb=long"])
def test_its_traceback_is_shown_when_asked_for(project: pytest.Pytester, flag: str) -> None:
    _project(project)
    result = project.runpytest("--retrieval-gate", flag)
    result.stdout.fnmatch_lines(
        [
            lit(LINE),
            "",
            "Traceback (most recent call last):",
            "*conftest.py*",
            "KeyError: 'refunds'",
        ]
    )


def test_the_json_report_keeps_the_traceback(project: pytest.Pytester) -> None:
    _project(project)
    project.runpytest("--retrieval-gate")
    report = json.loads(Path(project.path / "retrieval-gate-report.json").read_text())
    (error,) = report["errors"]
    assert error["error"].endswith(
        "[system.plugin]: conftest.py failed while embedding document 'docs/faq.md': "
        "KeyError: 'refunds'"
    )
    assert error["traceback"].startswith("Traceback (most recent call last):")
    assert error["traceback"].endswith("KeyError: 'refunds'\n")
