"""``-m hard`` and ``-m joins``: a category or difficulty selects the items that decide about its
queries, whether or not the suite gives it floors of its own (docs/suite-format.md, "Markers"),
serially and under xdist.

Each test's expressions are a table of (expression, the items it selects). Serially every row is
a session of its own (in this process: a tenth of a second each). Under xdist only the table's
first row is run: a session there starts two worker processes (about 1.7 s of CPU), and what
xdist changes is where the items are collected, marked and selected (each worker, under
``--strict-markers``), not how an expression reads the markers, which is pytest's own ``-m``. The
first row proves that the workers mark its test's kind of item (suite-wide, in its own scope, a
regression item in its own scope) as this process does."""

from __future__ import annotations

import re

import pytest

from .conftest import SETTINGS, SUITE, item_verdicts, write_suite

WORKERS = [(), ("-n", "2", "-p", "no:benchmark")]
WORKER_IDS = ["serial", "xdist"]

# The lineage suite without its 'difficulties:' floors: hard and easy are labels only.
NO_DIFFICULTY_FLOORS = SUITE.replace("difficulties:\n  hard: {Hit@3: 0.5}\n", "")


def _select(project: pytest.Pytester, expression: str, *args: str) -> set[str]:
    result = project.runpytest(
        "--retrieval-gate", "-v", "--strict-markers", "-m", expression, *args
    )
    assert "Traceback" not in result.stdout.str()
    return set(item_verdicts(result))


def _settings(project: pytest.Pytester, extra: str) -> None:
    text = SETTINGS.replace('systems = ["keyword"]\n', f'systems = ["keyword"]\n{extra}\n')
    (project.path / "pyproject.toml").write_text(text, encoding="utf-8")


SUITE_WIDE = {
    "lineage.retrieval.yaml::keyword::suite::P@1",
    "lineage.retrieval.yaml::keyword::suite::R@3",
}
HARD_QUERY = "lineage.retrieval.yaml::keyword::query[customer_names]"
JOINS = "lineage.retrieval.yaml::keyword::category:joins::MRR@3"


def _rows(
    project: pytest.Pytester, workers: tuple[str, ...], rows: list[tuple[str, set[str]]]
) -> None:
    """Each row's expression selects exactly the row's items: every row serially, the first
    under xdist (the module's docstring says why)."""
    for expression, items in rows[:1] if workers else rows:
        assert _select(project, expression, *workers) == items, expression


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_a_difficulty_without_floors_selects_the_suite_wide_items(
    project: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    """Under xdist about 2 s of CPU: one -m session starting two worker processes (where the
    selection is made)."""
    if workers:
        pytest.importorskip("xdist")
    write_suite(project, NO_DIFFICULTY_FLOORS)
    # The hard queries are gated by the suite's own floors only: those, and the hard query's
    # expect item, are the items that decide about them. 'lookup' has no floor either; 'joins'
    # has one, so it selects only its own item.
    _rows(
        project,
        workers,
        [
            ("hard", SUITE_WIDE | {HARD_QUERY}),
            ("easy", SUITE_WIDE),
            ("lookup", SUITE_WIDE | {HARD_QUERY}),
            ("joins", {JOINS}),
            ("not hard", {JOINS}),
        ],
    )


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_a_difficulty_with_floors_selects_only_its_own_items(
    project: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    if workers:
        pytest.importorskip("xdist")
    write_suite(project, SUITE)
    hard = "lineage.retrieval.yaml::keyword::difficulty:hard::Hit@3"
    # easy has no floor of its own: the suite-wide items decide about its queries.
    _rows(
        project,
        workers,
        [
            ("hard", {hard, HARD_QUERY}),
            ("easy", SUITE_WIDE),
            ("hard and not easy", {hard, HARD_QUERY}),
        ],
    )


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_regression_items_follow_the_same_rule(
    project: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    if workers:
        pytest.importorskip("xdist")
    _settings(project, 'regression_scopes = ["suite", "difficulty"]')
    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=5)
    regression = "lineage.retrieval.yaml::keyword::regression::"
    # hard has a floor, and with it a gated regression item: its own items only. easy has
    # neither: the suite's floors and the suite's regression items.
    _rows(
        project,
        workers,
        [
            (
                "hard",
                {
                    "lineage.retrieval.yaml::keyword::difficulty:hard::Hit@3",
                    regression + "difficulty:hard::Hit@3",
                    HARD_QUERY,
                },
            ),
            ("easy", SUITE_WIDE | {regression + "P@1", regression + "R@3"}),
        ],
    )
    if workers:
        # One session under xdist: a suite-wide regression item is marked where a suite-wide
        # floor is (collect.py's _tree), which the first test's xdist session checks.
        return
    # Without the difficulty floors (the same queries: the baseline still applies), the hard
    # queries are decided by the suite-wide items.
    write_suite(project, NO_DIFFICULTY_FLOORS)
    assert _select(project, "hard") == SUITE_WIDE | {
        regression + "P@1",
        regression + "R@3",
        HARD_QUERY,
    }


def test_a_system_with_its_own_difficulty_floor_is_selected_by_it(
    project: pytest.Pytester,
) -> None:
    # Only 'reverse' gives hard a floor (system_floors): -m hard selects its difficulty item
    # and keyword's suite-wide items, each system's items that decide about the hard queries.
    write_suite(
        project,
        NO_DIFFICULTY_FLOORS.replace(
            "queries:\n",
            "system_floors:\n  reverse: {difficulties: {hard: {Hit@3: 0.5}}}\nqueries:\n",
        ),
    )
    both = ("--rg-system", "keyword", "--rg-system", "reverse")
    assert _select(project, "hard", *both) == SUITE_WIDE | {
        HARD_QUERY,
        "lineage.retrieval.yaml::reverse::difficulty:hard::Hit@3",
        "lineage.retrieval.yaml::reverse::query[customer_names]",
    }


def test_a_suite_without_floors_runs_for_its_labels(project: pytest.Pytester) -> None:
    # No floors and no expect: the run item is the suite's only item, and it carries the labels.
    text = re.sub(r"gates:\n(  .*\n)+categories:\n  joins: \{MRR@3: 0.5\}\n", "", SUITE)
    text = text.replace("difficulties:\n  hard: {Hit@3: 0.5}\n", "")
    text = text.replace("    expect: {found_within: 1}\n", "")
    assert "gates" not in text and "expect" not in text
    write_suite(project, text)
    assert _select(project, "hard") == {"lineage.retrieval.yaml::keyword::run"}
