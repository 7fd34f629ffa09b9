"""--rg-plots DIR: PNG plots of each suite's metrics (bars with 95 % intervals) and of each run's
per-query deltas against the baseline; a folder holding anything the plugin did not write is
refused before anything runs."""

from __future__ import annotations

import json

import pytest

from retrieval_gate.records import QueryRecord, RunRecord

from .conftest import SUITE, write_suite
from .png import pixels
from .test_pair_suites import CONFTEST as PAIR_CONFTEST
from .test_pair_suites import SETTINGS as PAIR_SETTINGS

pytest.importorskip("matplotlib")
# pytester's in-process runs restore sys.modules afterwards, and matplotlib does not survive a
# second import in one process: loaded once, up front (as conftest.py does for numpy).
import matplotlib.backends.backend_agg
import matplotlib.figure  # noqa: F401

import retrieval_gate.report.plots  # noqa: F401

PNG = b"\x89PNG\r\n\x1a\n"


def _near(counts: dict[tuple[int, int, int], int], hex_colour: str) -> int:
    target = bytes.fromhex(hex_colour.removeprefix("#"))
    return sum(
        n
        for colour, n in counts.items()
        if all(abs(a - b) <= 6 for a, b in zip(colour, target, strict=True))
    )


def test_plots_per_metric_and_per_query_deltas(project: pytest.Pytester) -> None:
    from retrieval_gate.report.plots import BETTER, COLOUR, WORSE

    write_suite(project, SUITE)
    first = project.runpytest("--retrieval-gate", "--rg-plots", "plots", "--rg-save-baseline")
    first.assert_outcomes(passed=5)
    first.stdout.fnmatch_lines(
        [f"*generated retrieval gate plots (PNG files) in {project.path / 'plots'} -*"]
    )
    folder = project.path / "plots"
    # The summary's metrics: the gated ones (P@1, R@3, MRR@3, Hit@3), then nDCG@3.
    names = {"lineage--P@1.png", "lineage--R@3.png", "lineage--MRR@3.png", "lineage--Hit@3.png"}
    names |= {"lineage--nDCG@3.png"}
    assert {p.name for p in folder.glob("*.png")} == names
    assert (folder / "lineage--P@1.png").read_bytes()[:8] == PNG
    assert _near(pixels(folder / "lineage--R@3.png"), COLOUR) > 100

    # A baseline now exists: keyword's per-query deltas (nothing changed: no red, no green bar).
    # The 5 floors and 2 regression items (P@1, R@3 against the baseline).
    project.runpytest("--retrieval-gate", "--rg-plots", "plots").assert_outcomes(passed=7)
    deltas = folder / "lineage--keyword--deltas-P@1.png"
    assert deltas.read_bytes()[:8] == PNG
    # One deltas plot per metric a regression item gates, not only the first one.
    deltas_plots = {p.name for p in folder.glob("*--deltas-*.png")}
    assert deltas_plots == {"lineage--keyword--deltas-P@1.png", "lineage--keyword--deltas-R@3.png"}
    counts = pixels(deltas)
    assert _near(counts, WORSE) == 0 and _near(counts, BETTER) == 0
    # The manifest names exactly what this run wrote; stale plots of earlier runs are gone.
    manifest = (folder / ".retrieval-gate-plots").read_text().split()
    assert set(manifest) == {p.name for p in folder.glob("*.png")}


def test_suites_whose_names_differ_in_unsafe_characters_get_their_own_plots(
    project: pytest.Pytester,
) -> None:
    from retrieval_gate.report.plots import _name

    # "line age" and "line_age" would both be line_age--P@1.png: the first one's plot was lost.
    write_suite(project, SUITE.replace("name: lineage", "name: line age"), name="a.retrieval.yaml")
    write_suite(project, SUITE.replace("name: lineage", "name: line_age"), name="b.retrieval.yaml")
    project.runpytest("--retrieval-gate", "--rg-plots", "plots").assert_outcomes(passed=10)
    names = {p.name for p in (project.path / "plots").glob("*.png")}
    spaced, plain = _name("line age", "P@1"), _name("line_age", "P@1")
    assert plain == "line_age--P@1.png"
    assert spaced.startswith("line_age--P@1-") and spaced.endswith(".png") and spaced != plain
    assert {spaced, plain} <= names
    assert len(names) == 10  # five metrics for each suite


def test_a_query_that_got_worse_is_a_red_bar(project: pytest.Pytester) -> None:
    from retrieval_gate.report.plots import BETTER, WORSE

    write_suite(project, SUITE)
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=5)
    # The retriever now ranks worst first: queries lose their relevant first result.
    app = project.path / "search_app.py"
    app.write_text(app.read_text() + "\nretrieve = retrieve_reversed\n")
    project.runpytest("--retrieval-gate", "--rg-plots", "plots")
    counts = pixels(project.path / "plots" / "lineage--keyword--deltas-P@1.png")
    assert _near(counts, WORSE) > 50
    assert _near(counts, BETTER) == 0


def test_a_folder_with_files_of_the_users_is_refused(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    (project.path / "figures").mkdir()
    (project.path / "figures" / "paper.png").write_bytes(PNG)
    result = project.runpytest("--retrieval-gate", "--rg-plots", "figures")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--rg-plots */figures holds files the plugin did not write (paper.png)*"]
    )
    assert (project.path / "figures" / "paper.png").read_bytes() == PNG
    inside = project.runpytest(
        "--retrieval-gate", "--rg-plots", "cache/plots", "--rg-cache-dir", "cache"
    )
    assert inside.ret == pytest.ExitCode.USAGE_ERROR
    inside.stderr.fnmatch_lines(["*--rg-plots * and the cache folder (--rg-cache-dir) * overlap*"])
    alone = project.runpytest("--rg-plots", "plots")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR


def test_without_the_option_matplotlib_is_not_imported(project: pytest.Pytester) -> None:
    write_suite(project, SUITE)
    project.makeconftest(
        "import sys\n\ndef pytest_sessionfinish(session):\n"
        "    (session.config.rootpath / 'mods.txt').write_text("
        "'\\n'.join(m for m in sys.modules if m.startswith('matplotlib')))\n"
    )
    import sys

    already = {m for m in sys.modules if m.startswith("matplotlib")}
    project.runpytest("--retrieval-gate").assert_outcomes(passed=5)
    loaded = set((project.path / "mods.txt").read_text().split()) - already
    assert loaded == set()


def test_intervals_are_the_runs_own_or_a_seeded_bootstrap() -> None:
    from retrieval_gate.metrics import parse_metric
    from retrieval_gate.metrics.bootstrap import bootstrap_ci
    from retrieval_gate.report.plots import interval

    queries = tuple(
        QueryRecord(
            id=f"q{i}", digest="d", category=None, difficulty=None,
            metrics={"P@1": v}, ranking=(), relevant_ranks={},
        )
        for i, v in enumerate([1.0, 0.0, 1.0, 1.0])
    )  # fmt: skip
    run = RunRecord(
        suite="s", suite_path="s.yaml", system="x", n=4, k=(1,), fingerprint={},
        metrics={"P@1": 0.75}, categories={}, difficulties={}, latency_ms={}, stats={},
        queries=queries,
    )  # fmt: skip
    expected = bootstrap_ci(parse_metric("P@1"), [1.0, 0.0, 1.0, 1.0], {}, 7)
    assert interval(run, "P@1", 7) == expected
    assert expected[0] < 0.75 < expected[1] or expected == (0.75, 0.75)
    kept = RunRecord(**{**run.__dict__, "intervals": {"P@1": (0.5, 1.0)}})
    assert interval(kept, "P@1", 7) == (0.5, 1.0)


def test_a_correlation_is_drawn_as_each_pairs_share_of_its_change(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No pair has a Spearman of its own: its bars are each pair's share of the change, as the
    regression item explains it, not the change of its cosine."""
    from retrieval_gate.report.plots import BETTER, WORSE

    pytester.makefile(".toml", pyproject=PAIR_SETTINGS)
    pytester.makeconftest(PAIR_CONFTEST)
    # Gold ranks ascend t5 < t4 < ... < t0. Then t4 and t5 are out of order; now t5's cosine
    # falls into its gold order (t4 with it) while t0/t1 and t2/t3 swap: 4 pairs lowered rho by
    # 6 / 210 each and 2 raised it by as much, so the red bars are twice the green ones. The
    # cosines' own change is red for t0, t2, t5 (0.045 + 0.159 + 0.158) and green for t1 (0.045),
    # eight times as much red.
    gold = [5.0, 4.0, 3.0, 2.0, 1.0, 0.2]
    rows = "\n".join(f"  - [t{i}, u{i}, {g}]" for i, g in enumerate(gold))
    write_suite(
        pytester,
        f"name: sim\nkind: pairs\ntolerance: {{spearman: 0.01}}\npairs:\n{rows}\n",
        name="sim.retrieval.yaml",
    )

    def angles(of: list[float]) -> str:
        return json.dumps({f"t{i}": 0.0 for i in range(6)} | {f"u{i}": a for i, a in enumerate(of)})

    (pytester.path / "angles.json").write_text(angles([10.0, 20.0, 30.0, 40.0, 65.0, 60.0]))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=1)
    (pytester.path / "angles.json").write_text(angles([20.0, 10.0, 45.0, 40.0, 65.0, 70.0]))
    monkeypatch.setenv("ANGLES_VERSION", "2")
    pytester.runpytest("--retrieval-gate", "--rg-plots", "plots").assert_outcomes(
        passed=1, failed=1
    )
    counts = pixels(pytester.path / "plots" / "sim--angles--deltas-spearman.png")
    red, green = _near(counts, WORSE), _near(counts, BETTER)
    assert green > 50
    assert 1.6 < red / green < 2.5


def test_the_history_plot_labels_each_tick_with_commit_date_and_marks() -> None:
    from retrieval_gate.gates.changepoints import ChangePoint, Slide
    from retrieval_gate.gates.keeper import Trend
    from retrieval_gate.report.plots import WORSE, _trend_figure

    # 60 points, so the ticks are thinned to every second one: the marked points keep theirs
    # (the accepted drift at 5, the anchor at 9, the step at 21, the slide from 30, today).
    values = tuple([0.9] * 21 + [0.8] * 10 + [0.8 - 0.01 * k for k in range(29)])
    labels = (*(f"abc{i:04x}" for i in range(59)), "now")
    dates = (*(f"2026-09-{i % 28 + 1:02d}" for i in range(59)), "2026-10-01")
    trend = Trend(
        suite="s",
        system="bm25",
        metric="MRR@10",
        labels=labels,
        values=values,
        anchor=9,
        changes=(ChangePoint(21, 0.9, 0.8),),
        slides=(Slide(30, 59, -0.01, 0.8, 0.52),),
        dates=dates,
        accepted=(5, 9),
        tolerance=0.02,
        head="abcdef0123",
    )
    axes = _trend_figure(trend).axes[0]
    shown = zip(axes.get_xticks(), axes.get_xticklabels(), strict=True)
    ticks = {int(x): text.get_text() for x, text in shown}
    assert ticks[0] == "abc0000 2026-09-01"
    assert ticks[5] == "abc0005 2026-09-06 (accepted)"
    assert ticks[9] == "abc0009 2026-09-10 (anchor, accepted)"
    assert ticks[21] == "abc0015 2026-09-22 (change)"
    assert ticks[30] == "abc001e 2026-09-03 (slide)"
    assert ticks[59] == "now abcdef0 2026-10-01"
    assert 1 not in ticks  # unmarked points are thinned
    # The slide's fitted line, in the colour of a drop, and its slope per merge.
    assert any(
        list(line.get_xdata()) == [30, 59] and line.get_color() == WORSE for line in axes.lines
    )
    texts = [t.get_text() for t in axes.texts]
    assert "-0.0100 per merge since abc001e" in texts and "-0.1000 at abc0015" in texts
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["anchor", "drift accepted"]
