"""--rg-suggest-floors on a session of several systems: a system already failing a floor does
not switch it off, and a perfect run without spread does not propose 1.00."""

from __future__ import annotations

import pytest

from .conftest import SUITE, write_suite


def test_a_failing_system_is_left_out_and_no_spread_is_not_a_perfect_floor(
    project: pytest.Pytester,
) -> None:
    settings = (project.path / "pyproject.toml").read_text()
    settings += '\n[tool.retrieval_gate.system.broken]\nretriever = "search_app:nothing"\n'
    (project.path / "pyproject.toml").write_text(settings)
    app = project.path / "search_app.py"
    app.write_text(app.read_text() + "\n\ndef nothing(query, k):\n    return []\n")
    write_suite(project, SUITE)
    systems = ("--rg-system", "keyword", "--rg-system", "broken")
    project.runpytest("--retrieval-gate", "--rg-save-baseline", *systems)
    result = project.runpytest("--retrieval-gate", "--rg-suggest-floors=-", *systems)
    # keyword: P@1 = 1 on all 3 queries, no spread: Wilson's bound n / (n + z^2) = 3 / 6.8415
    # = 0.4385 -> 0.43 (not 1.00). broken scores 0 and fails every floor: left out (with it the
    # minimum would be 0.00).
    result.stdout.fnmatch_lines(
        [
            "suggested floors: lineage suite P@1: left out broken 0.0000 (their baseline P@1 "
            "over the suite is below the floor 0.5; give such a system its own floor under "
            "system_floors)",
            "*",
            "-  P@1: 0.5",
            "+  P@1: 0.43",
        ]
    )
    result.stdout.no_fnmatch_line("*P@1: 0.00*")
    result.stdout.no_fnmatch_line("*P@1: 1.00*")
