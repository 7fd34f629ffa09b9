"""Progress lines in a CI log (no terminal, ``CI=true``): each on a line of its own between a
file's results, which resume after them: the file is named once and no "." stands alone."""

from __future__ import annotations

import re

import pytest

from retrieval_gate import progress
from tests.integration.conftest import SETTINGS, SUITE, write_suite

# A querying step's line, its times left out (they are the machine's).
STEP = re.compile(
    r"retrieval gate: (\w+ x \w+): querying (\d/3) \(\d+%\), \d+ s(, about \d+ s left)?"
)


def _log(lines: list[str]) -> list[str]:
    """The lines from the first file's name to the blank line after the results, each step's
    line as ``step SUITE x SYSTEM N/3``, runs of spaces as one (the width is the terminal's)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("lineage.retrieval.yaml"))
    end = lines.index("", start)
    return [
        f"step {m[1]} {m[2]}" if (m := STEP.fullmatch(line)) else " ".join(line.split())
        for line in lines[start:end]
    ]


def _steps(about: str) -> list[str]:
    return [f"step {about} {n}/3" for n in (1, 2, 3)]


@pytest.fixture
def two_by_two(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Two suite files x two systems, in a log, every step reporting (no quiet time)."""
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
    project.makefile(".toml", pyproject=SETTINGS.replace('["keyword"]', '["keyword", "reverse"]'))
    write_suite(project, SUITE)
    write_suite(project, SUITE.replace("name: lineage", "name: other"), "other.retrieval.yaml")
    return project


def test_a_log_names_each_file_once_and_resumes_its_results(two_by_two: pytest.Pytester) -> None:
    result = two_by_two.runpytest("--retrieval-gate")
    # keyword passes its 5 items, reverse (every ranking upside down) fails them.
    result.assert_outcomes(passed=10, failed=10)
    assert _log(result.outlines) == [
        "lineage.retrieval.yaml",
        *_steps("lineage x keyword"),
        ".....",
        *_steps("lineage x reverse"),
        "FFFFF [ 50%]",
        "other.retrieval.yaml",
        *_steps("other x keyword"),
        ".....",
        *_steps("other x reverse"),
        "FFFFF [100%]",
    ]


def test_a_verbose_log_has_no_blank_line_after_progress(two_by_two: pytest.Pytester) -> None:
    result = two_by_two.runpytest("--retrieval-gate", "-v")
    assert _log(result.outlines)[:5] == [
        "lineage.retrieval.yaml::keyword::suite::P@1",
        *_steps("lineage x keyword"),
        "lineage.retrieval.yaml::keyword::suite::P@1 PASSED [ 5%]",
    ]
