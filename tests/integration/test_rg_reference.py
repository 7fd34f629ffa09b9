"""--rg-reference NAME and the ``reference`` setting: the system the report compares others to.

Two retriever systems from the shared project: ``keyword`` scores 1.0 on every metric of SUITE's
three queries, ``reverse`` 0.0 (see test_rg_report). Against a reference, each row's delta is
system minus reference, and with all three queries moving by the same 1.0 the paired
randomisation test's exact p is 2 / 2**3 = 0.25 (only all-plus and all-minus sign flips reach a
mean difference of 1).
"""

from __future__ import annotations

import pytest

from .conftest import SUITE, lit, write_suite

BOTH = ("--rg-system", "keyword", "--rg-system", "reverse")
TABLE_HEADER = "| system | metric | {ref} | system value | delta | p | better | worse |"


def _reference_section(pytester: pytest.Pytester) -> list[str]:
    """The report's lines from the reference heading to the next blank line after its table."""
    lines = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8").splitlines()
    headings = [i for i, line in enumerate(lines) if line.startswith("### Against the reference")]
    assert len(headings) == 1, "exactly one suite, so exactly one reference section"
    start = headings[0]
    table = next(i for i in range(start + 2, len(lines)) if lines[i].startswith("|"))
    end = next((i for i in range(table, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [lines[start], *lines[table:end]]


def _settings(pytester: pytest.Pytester, extra: str) -> None:
    pytester.makefile(
        ".toml",
        pyproject=f"""
        [tool.retrieval_gate]
        systems = ["keyword", "reverse"]
        {extra}

        [tool.retrieval_gate.system.keyword]
        retriever = "search_app:retrieve"

        [tool.retrieval_gate.system.reverse]
        retriever = "search_app:retrieve_reversed"
        """,
    )


def test_default_reference_is_the_first_system(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", *BOTH)
    section = _reference_section(project)
    assert section[0] == "### Against the reference system `keyword`"
    assert section[1] == TABLE_HEADER.format(ref="keyword")
    assert "| `reverse` | P@1 | 1.0000 | 0.0000 | -1.0000 | 0.2500 | 0 | 3 |" in section
    assert not [row for row in section if row.startswith("| `keyword`")]


def test_rg_reference_names_the_system_compared_against(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", *BOTH, "--rg-reference", "reverse")
    section = _reference_section(project)
    assert section[0] == "### Against the reference system `reverse`"
    assert section[1] == TABLE_HEADER.format(ref="reverse")
    # keyword against reverse: 0 -> 1 on every metric, 3 queries better, none worse.
    assert "| `keyword` | P@1 | 0.0000 | 1.0000 | +1.0000 | 0.2500 | 3 | 0 |" in section
    assert "| `keyword` | R@3 | 0.0000 | 1.0000 | +1.0000 | 0.2500 | 3 | 0 |" in section
    assert not [row for row in section if row.startswith("| `reverse`")]


def test_reference_setting_names_the_system_compared_against(project: pytest.Pytester) -> None:
    _settings(project, 'reference = "reverse"')
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate")
    section = _reference_section(project)
    assert section[0] == "### Against the reference system `reverse`"
    assert "| `keyword` | P@1 | 0.0000 | 1.0000 | +1.0000 | 0.2500 | 3 | 0 |" in section


def test_rg_reference_wins_over_the_setting(project: pytest.Pytester) -> None:
    _settings(project, 'reference = "reverse"')
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-reference=keyword")
    section = _reference_section(project)
    assert section[0] == "### Against the reference system `keyword`"
    assert "| `reverse` | P@1 | 1.0000 | 0.0000 | -1.0000 | 0.2500 | 0 | 3 |" in section


def test_unknown_rg_reference_is_a_usage_error_quoting_it(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", *BOTH, "--rg-reference", "nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *'nosuch'*"])
    assert not (project.path / "retrieval-gate-report.md").exists()


def test_rg_reference_not_among_the_systems_run_is_a_usage_error(
    project: pytest.Pytester,
) -> None:
    # Configured, but this session runs only keyword: there is nothing to compare it with.
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "--rg-system=keyword", "--rg-reference=reverse")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *'reverse'*"])


def test_unknown_reference_setting_is_a_usage_error_quoting_it(project: pytest.Pytester) -> None:
    _settings(project, 'reference = "nosuch"')
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([lit("ERROR: *pyproject.toml*") + "*'nosuch'*"])


def test_malformed_rg_reference_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--retrieval-gate", "--rg-reference", "two words")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rg-reference*'two words'*"])


def test_one_system_has_no_reference_section(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-reference", "keyword")
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "Against the reference" not in markdown
