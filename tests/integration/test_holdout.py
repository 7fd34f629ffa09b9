"""A suite's holdout (``holdout: 0.3``, docs/suite-format.md): a fixed, seeded part of the
queries, evaluated but never shown query by query in any output; its own items say pass or fail
against the holdout's tolerance, and the visible items are over the other queries.

The project: 20 queries ``q00`` ... ``q19``, query ``q<i>`` ("ask zeta<i>x") with its one
relevant document ``d<i>``, which the retriever ranks first unless ``bad.txt`` names ``i``. Under
the default seed (0) the holdout of 0.3 is the 7 queries of ``HELD_OUT`` (sha256 of seed, suite
name and id below 0.3), so 13 are visible: one visible query made wrong drops the visible P@1 by
1/13 = 0.0769, one held-out query drops the holdout's by 1/7 = 0.1429.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from retrieval_gate.suites.holdout import holdout_ids, holdout_key
from retrieval_gate.suites.suite import load_suite

QUERIES = 20
HELD_OUT = ("q00", "q04", "q09", "q12", "q13", "q15", "q18")
VISIBLE = tuple(f"q{i:02d}" for i in range(QUERIES) if f"q{i:02d}" not in HELD_OUT)
#: The inputs the test writes; every other file in the project is an output of the plugin.
INPUTS = {"pyproject.toml", "held_app.py", "heldout.retrieval.yaml", "bad.txt"}

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate]
systems = ["held"]
tolerance = {"P@1" = 0.01}

[tool.retrieval_gate.system.held]
retriever = "held_app:retrieve"
"""

RETRIEVER = f"""
import pathlib

QUERIES = {QUERIES}


def retrieve(query, k):
    bad = pathlib.Path(__file__).with_name("bad.txt").read_text().split()
    i = int(query.removeprefix("ask zeta").removesuffix("x"))
    right, wrong = f"d{{i}}", f"d{{(i + 1) % QUERIES}}"
    order = [wrong, right] if str(i) in bad else [right, wrong]
    return [(doc, float(2 - rank)) for rank, doc in enumerate(order)][:k]
"""


def text_of(qid: str) -> str:
    return f"ask zeta{int(qid[1:])}x"


def suite_text(holdout_tolerance: float = 0.1) -> str:
    lines = [
        "name: heldout",
        "k: [1]",
        "gates:",
        "  P@1: 0.5",
        "holdout: 0.3",
        f"holdout_tolerance: {{P@1: {holdout_tolerance}}}",
        "queries:",
    ]
    for i in range(QUERIES):
        qid = f"q{i:02d}"
        lines += [f"  - id: {qid}", f"    query: {text_of(qid)}", f"    relevant: [d{i}]"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def held(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(held_app=RETRIEVER)
    (pytester.path / "heldout.retrieval.yaml").write_text(suite_text(), encoding="utf-8")
    spoil(pytester)
    pytester.syspathinsert()
    return pytester


def spoil(pytester: pytest.Pytester, *qids: str) -> None:
    """Make the retriever rank a wrong document first for ``qids``."""
    (pytester.path / "bad.txt").write_text(" ".join(str(int(q[1:])) for q in qids))


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """node id suffix after the system -> PASSED / FAILED / SKIPPED, from the -rA summary."""
    out = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED", "SKIPPED"):
            if line.startswith(word + " "):
                found = re.search(r"::held::(\S+)", line)
                if found:
                    out[found.group(1)] = word
    return out


def test_the_holdout_is_the_seeded_part_the_docs_describe(held: pytest.Pytester) -> None:
    suite = load_suite(held.path / "heldout.retrieval.yaml")
    assert sorted(holdout_ids(suite, 0)) == list(HELD_OUT)


def test_no_output_names_a_held_out_query(
    held: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = [
        "--rg-json=out/report.json",
        "--rg-report=out/report.md",
        "--junitxml=out/junit.xml",
        "-rA",
    ]
    drawn: list[str] = []  # every text the plots draw: a PNG holds pixels, not strings
    if _has_matplotlib():
        # Loaded here, once, as tests/integration/test_rg_plots.py does: modules first imported
        # inside an in-process run are dropped after it (tests/integration/conftest.py).
        import matplotlib.backends.backend_agg
        import matplotlib.figure
        import matplotlib.text

        outputs.append("--rg-plots=out/plots")
        set_text = matplotlib.text.Text.set_text

        def recording(self: matplotlib.text.Text, s: object) -> None:
            drawn.append(str(s))
            set_text(self, s)

        monkeypatch.setattr(matplotlib.text.Text, "set_text", recording)
    summary = held.path / "out" / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    texts = []
    saved = _run(held, env, "--retrieval-gate", "--rg-save-baseline", *outputs)
    assert saved.ret == 0, saved.stdout.str()
    texts.append(saved.stdout.str() + saved.stderr.str())
    # The rerun regresses a held-out query (q04) and a visible one (q03), records its run in the
    # history and suggests floors on the terminal.
    spoil(held, "q04", "q03")
    rerun = _run(held, env, "--retrieval-gate", "--rg-record", "--rg-suggest-floors", "-", *outputs)
    texts.append(rerun.stdout.str() + rerun.stderr.str())
    assert outcomes(rerun) == {
        "suite::P@1": "PASSED",
        "regression::P@1": "FAILED",
        "holdout::P@1": "FAILED",
    }
    plan = _run(held, env, "--retrieval-gate", "--rg-plan")
    texts.append(plan.stdout.str() + plan.stderr.str())
    written = [
        p
        for p in held.path.rglob("*")
        if p.is_file()
        and str(p.relative_to(held.path)) not in INPUTS
        and "__pycache__" not in p.parts
    ]
    names = {str(p.relative_to(held.path)) for p in written}
    # Every output asked for was written (plots only where matplotlib is installed).
    for expected in ("out/report.json", "out/report.md", "out/junit.xml", "out/summary.md"):
        assert expected in names
    assert any(n.startswith(".retrieval-gate/history/") for n in names)
    assert "retrieval-baseline.json" in names
    # Text files as written; a PNG's compressed bytes could hold "q00" by chance, so plots are
    # read through what they drew (above) and their names.
    texts += [p.read_text(encoding="utf-8") for p in written if p.suffix != ".png"]
    texts += sorted(names)
    if _has_matplotlib():
        assert any(p.suffix == ".png" for p in written)
        assert "q03" in drawn  # the per-query delta plot labels the visible query that dropped
        texts += drawn
    everything = "\n".join(texts)
    for qid in HELD_OUT:
        assert qid not in everything, qid
        assert text_of(qid) not in everything, qid
    # The visible query that regressed is named (as the worst dropped), as before.
    assert "q03" in everything
    assert text_of("q03") in everything
    # What the report does say of the holdout: its size, and the item's bit.
    report = json.loads((held.path / "out" / "report.json").read_text())
    assert report["runs"][0]["holdout"] == {"fraction": 0.3, "n": 7}
    assert report["runs"][0]["n"] == 13
    item = next(g for g in report["gates"] if g["scope"] == "holdout")
    assert item["value"] is None and item["passed"] is False and item["n"] == 7
    rerun.stdout.fnmatch_lines(
        [
            "P@1 holdout (heldout x held): FAILED: its drop from the baseline is beyond the "
            "holdout tolerance 0.1 (n=7 held-out units; values not shown, docs/verdicts.md)"
        ]
    )


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _run(held: pytest.Pytester, env: dict[str, str], *args: str) -> pytest.RunResult:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return held.runpytest(*args)


@pytest.mark.parametrize(
    ("spoiled", "holdout_tolerance", "regression", "holdout"),
    [
        ((), 0.1, "PASSED", "PASSED"),  # nothing changed
        (("q03",), 0.1, "FAILED", "PASSED"),  # visible: 1/13 = 0.0769 > 0.01; holdout unchanged
        (("q04",), 0.1, "PASSED", "FAILED"),  # held out: 1/7 = 0.1429 > 0.1; visible unchanged
        (("q04",), 0.15, "PASSED", "PASSED"),  # held out: 1/7 = 0.1429 <= 0.15
        (("q04", "q09"), 0.15, "PASSED", "FAILED"),  # held out: 2/7 = 0.2857 > 0.15
    ],
)
def test_the_holdout_item_fails_on_the_holdout_alone(
    held: pytest.Pytester,
    spoiled: tuple[str, ...],
    holdout_tolerance: float,
    regression: str,
    holdout: str,
) -> None:
    assert held.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    (held.path / "heldout.retrieval.yaml").write_text(suite_text(holdout_tolerance))
    spoil(held, *spoiled)
    result = held.runpytest("--retrieval-gate", "-rA")
    assert outcomes(result) == {
        "suite::P@1": "PASSED",
        "regression::P@1": regression,
        "holdout::P@1": holdout,
    }


def test_the_same_holdout_serial_and_under_xdist(held: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    serial = held.runpytest("--retrieval-gate", "--rg-save-baseline", "--rg-baseline=a.json")
    parallel = held.runpytest(
        "--retrieval-gate", "--rg-save-baseline", "--rg-baseline=b.json", "-n", "2"
    )
    assert serial.ret == parallel.ret == 0
    runs = [
        json.loads((held.path / name).read_text())["runs"]["heldout::held"]
        for name in ("a.json", "b.json")
    ]
    suite = load_suite(held.path / "heldout.retrieval.yaml")
    keys = {holdout_key(u.id, u.digest) for u in suite.queries if u.id in HELD_OUT}
    for run in runs:
        assert set(run["queries"]) == set(VISIBLE)
        assert set(run["holdout"]["keys"]) == keys
    assert runs[0]["holdout"] == runs[1]["holdout"]
    # And the verdicts agree: the holdout item fails in both when a held-out query regresses.
    spoil(held, "q12")
    one = held.runpytest("--retrieval-gate", "--rg-baseline=a.json", "-rA")
    two = held.runpytest("--retrieval-gate", "--rg-baseline=b.json", "-rA", "-n", "2")
    assert (
        outcomes(one)
        == outcomes(two)
        == {
            "suite::P@1": "PASSED",
            "regression::P@1": "PASSED",
            "history-drift::P@1": "PASSED",  # the two saves made a history: visible, unchanged
            "holdout::P@1": "FAILED",
        }
    )


def test_adding_an_unrelated_query_keeps_the_holdout(held: pytest.Pytester) -> None:
    path = held.path / "heldout.retrieval.yaml"
    before = holdout_ids(load_suite(path), 0)
    # First, so that every other query moves one place: membership is each query's own coin,
    # keyed by its id, not by its position.
    text = suite_text().replace(
        "queries:\n", "queries:\n  - id: extra\n    query: ask zeta3x again\n    relevant: [d3]\n"
    )
    path.write_text(text)
    after = holdout_ids(load_suite(path), 0)
    assert after - {"extra"} == before


def test_the_holdout_ledger_counts_each_revealed_verdict(held: pytest.Pytester) -> None:
    from retrieval_gate.gates.shelflife import adaptive_epsilon

    def shelf() -> dict[str, dict[str, float]]:
        result = held.runpytest("--retrieval-gate", "--rg-save-baseline")
        assert result.ret == 0, result.stdout.str()
        report = json.loads((held.path / "retrieval-gate-report.json").read_text())
        return {s["metric"]: s for s in report["history"]["shelf_life"]}

    shelf()  # the first baseline: no holdout item (nothing to compare with), no verdict
    shelf()  # a verdict revealed: the holdout's first decision
    shelf()  # a second
    rows = shelf()  # reads the history as it starts: H = 2 (the visible suite's ledger too)
    held_row = rows["holdout::P@1"]
    assert held_row["decisions"] == 2 and held_row["n"] == 7
    assert held_row["tolerance"] == 0.1
    # The formula of docs/verdicts.md with the holdout's n = 7, R = 1, sd = R / 2, delta =
    # alpha = 0.05, H = 2 (tests/gates/test_shelflife.py checks it by hand).
    assert held_row["resolution_now"] == pytest.approx(adaptive_epsilon(0.5, 7, 1.0, 0.05, 2))
    assert held_row["resolution_fresh"] == pytest.approx(adaptive_epsilon(0.5, 7, 1.0, 0.05, 0))
    # The visible suite's ledger counts its own items' verdicts: the first session its P@1
    # floor, the second the floor and the regression item, the third those and the drift item.
    assert rows["P@1"]["decisions"] == 1 + 2 + 3 and rows["P@1"]["n"] == 13
    # A held-out query's judgments edited: another holdout, a new ledger (its earlier verdicts were about
    # other units); the visible suite's digest changed too.
    path = held.path / "heldout.retrieval.yaml"
    path.write_text(path.read_text().replace("relevant: [d4]", "relevant: [d4, d5]"))
    rows = shelf()
    assert rows["holdout::P@1"]["decisions"] == 0
    assert rows["P@1"]["decisions"] == 0


def test_a_baseline_from_before_the_holdout_names_none_of_it(held: pytest.Pytester) -> None:
    path = held.path / "heldout.retrieval.yaml"
    path.write_text(path.read_text().replace("holdout: 0.3\n", "").replace("holdout_tol", "#"))
    assert held.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    path.write_text(suite_text())
    spoil(held, "q04")  # a held-out query regresses: nothing visible may say so
    result = held.runpytest("--retrieval-gate", "-rA")
    assert outcomes(result) == {"suite::P@1": "PASSED", "regression::P@1": "PASSED"}
    assert result.parseoutcomes()["skipped"] == 1  # the holdout item, which says why:
    result.stdout.fnmatch_lines(
        ["*the baseline has no holdout values (saved before the suite had a holdout)*"]
    )
    report = json.loads((held.path / "retrieval-gate-report.json").read_text())
    compared = report["runs"][0]["baseline"]
    # The held-out queries are neither compared nor listed as removed from the suite.
    assert compared["shared"] == 13 and compared["removed"] == []
    shown = "\n".join(
        [
            result.stdout.str(),
            (held.path / "retrieval-gate-report.md").read_text(),
            json.dumps(report),
        ]
    )
    for qid in HELD_OUT:
        assert qid not in shown, qid


def test_a_run_that_fails_on_a_held_out_query_names_none_of_it(held: pytest.Pytester) -> None:
    held.makepyfile(
        held_app=RETRIEVER
        + "\n\nfound = retrieve\n\n\ndef retrieve(query, k):\n"
        + "    if query == 'ask zeta4x':\n"
        + "        raise ValueError(f'cannot search {query}')\n"
        + "    return found(query, k)\n"
    )
    result = held.runpytest("--retrieval-gate", "--rg-json=out.json")
    assert result.ret == 1
    assert (
        "heldout.retrieval.yaml [query a held-out unit]: retriever held_app:retrieve raised "
        "ValueError: cannot search a held-out unit"
    ) in result.stdout.str()
    shown = result.stdout.str() + (held.path / "out.json").read_text()
    for qid in HELD_OUT:
        assert qid not in shown and text_of(qid) not in shown, qid


def test_a_librarys_traceback_names_no_held_out_query(tmp_path: Path) -> None:
    # A library's failure keeps its traceback for the JSON report: a held-out query it quotes
    # is scrubbed there as in the line (suites/holdout.py).
    from retrieval_gate.errors import LibraryError
    from retrieval_gate.suites.holdout import hide_held_out

    path = tmp_path / "heldout.retrieval.yaml"
    path.write_text(suite_text(), encoding="utf-8")
    error = LibraryError(
        "tokenizers failed while embedding query 'q04': ValueError: bad text 'ask zeta4x'",
        library="tokenizers",
        detail="Traceback (most recent call last):\nValueError: bad text 'ask zeta4x'\n",
    )
    hidden = hide_held_out(error, load_suite(path), 0)
    assert "q04" not in str(hidden) and text_of("q04") not in str(hidden)
    assert hidden.traceback is not None and text_of("q04") not in hidden.traceback


def test_a_history_copied_twice_counts_each_run_once(
    held: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The history's lines doubled (a file merged twice, a CI job rerun appending again): the
    # holdout's ledger summed the revealed verdicts of every line, 4 for 2; the drift window
    # and the trend held each run twice.
    def run(commit: str, *args: str) -> pytest.RunResult:
        monkeypatch.setenv("GITHUB_SHA", commit * 40)
        result = held.runpytest("--retrieval-gate", "--rg-save-baseline", *args)
        assert result.ret == 0, result.stdout.str()
        return result

    for commit in "abc":  # the first has nothing to compare; two verdicts revealed after it
        run(commit)
    history = held.path / ".retrieval-gate/history/heldout.jsonl"
    history.write_text(history.read_text() * 2)
    result = run("d")
    report = json.loads((held.path / "retrieval-gate-report.json").read_text())
    rows = {s["metric"]: s for s in report["history"]["shelf_life"]}
    assert rows["holdout::P@1"]["decisions"] == 2
    assert rows["P@1"]["decisions"] == 1 + 2 + 3  # floor; floor, regression; and drift
    (trend,) = report["history"]["trends"]
    assert [p["commit"] for p in trend["points"]] == ["aaaaaaa", "bbbbbbb", "ccccccc", "now"]
    (drift,) = [g for g in report["gates"] if g["scope"] == "history-drift"]
    assert ", over 3 steps (accepted baselines and this run)," in drift["detail"][0]
    result.stdout.fnmatch_lines(
        [
            f"history: {history}: 3 records repeat an earlier one (the same commit, system and "
            "figures: a rerun or a copied line); each counted once"
        ]
    )
    # The same job run again at the same commit: the same measurement, not appended again.
    lines = history.read_text().count("\n")
    run("d").stdout.fnmatch_lines(
        [
            "the history holds 1 run of this session already (the same commit, system and "
            "figures): not appended again"
        ]
    )
    assert history.read_text().count("\n") == lines
