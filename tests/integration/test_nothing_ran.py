"""A gate session that runs nothing (pytest's exit status 5) says which option or setting left
no item, serially and under xdist (whose controller collects nothing itself: the workers'
counts travel back to it)."""

from __future__ import annotations

import pytest

from .conftest import SUITE, write_suite

SYSTEMS_LINE = (
    "retrieval gate: nothing ran: no suite has an item for this session's systems: "
    "lineage.retrieval.yaml names the systems [reverse] ('systems:'), and this session runs "
    "keyword (chosen by the 'systems' setting)"
)


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_suite_for_other_systems_says_so(
    project: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    if workers:
        pytest.importorskip("xdist")
    write_suite(project, "systems: [reverse]\n" + SUITE)
    result = project.runpytest("--retrieval-gate", *workers)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([SYSTEMS_LINE])


def test_a_deselecting_expression_under_xdist_says_so(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    write_suite(project, SUITE)
    result = project.runpytest("--retrieval-gate", "-n", "2", "-k", "nothing")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        [
            "retrieval gate: nothing ran: 5 gate items deselected by -k 'nothing', and no gate "
            "item is left"
        ]
    )
