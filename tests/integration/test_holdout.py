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

import contextlib
import fnmatch
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


#: (spoiled queries, holdout tolerance, regression item, holdout item) against one baseline.
HOLDOUT_ALONE = [
    ((), 0.1, "PASSED", "PASSED"),  # nothing changed
    (("q03",), 0.1, "FAILED", "PASSED"),  # visible: 1/13 = 0.0769 > 0.01; holdout unchanged
    (("q04",), 0.1, "PASSED", "FAILED"),  # held out: 1/7 = 0.1429 > 0.1; visible unchanged
    (("q04",), 0.15, "PASSED", "PASSED"),  # held out: 1/7 = 0.1429 <= 0.15
    (("q04", "q09"), 0.15, "PASSED", "FAILED"),  # held out: 2/7 = 0.2857 > 0.15
]


def test_the_holdout_item_fails_on_the_holdout_alone(held: pytest.Pytester) -> None:
    """One baseline of the unspoiled project; each case a run against it (a run that saves
    nothing, so the cases see the same baseline and no history)."""
    assert held.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    for spoiled, holdout_tolerance, regression, holdout in HOLDOUT_ALONE:
        (held.path / "heldout.retrieval.yaml").write_text(suite_text(holdout_tolerance))
        spoil(held, *spoiled)
        result = held.runpytest("--retrieval-gate", "-rA")
        assert outcomes(result) == {
            "suite::P@1": "PASSED",
            "regression::P@1": regression,
            "holdout::P@1": holdout,
        }, (spoiled, holdout_tolerance)


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
    # The retriever now warns and prints each query: under xdist the workers seal both before
    # they send them (hostile row "under-xdist-workers-seal-before-sending"; 65934fb: security).
    held.makepyfile(
        held_app=RETRIEVER
        + "\n\nfound = retrieve\n\n\ndef retrieve(query, k):\n"
        + "    import warnings\n    warnings.warn(f'slow {query}')\n"
        + "    print(f'searching {query}')\n    return found(query, k)\n"
    )
    spoil(held, "q12")
    one = held.runpytest("--retrieval-gate", "--rg-baseline=a.json", "-rA", "-W", "default")
    two = held.runpytest(
        "--retrieval-gate", "--rg-baseline=b.json", "-rA", "-n", "2", "-W", "default"
    )
    shown = two.stdout.str()
    assert "UserWarning: slow a held-out unit" in shown and "searching a held-out unit" in shown
    assert "searching ask zeta3x" in shown
    for qid in HELD_OUT:
        assert text_of(qid) not in shown, qid
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
    # other units); the visible suite's digest changed too. The baseline keeps the holdout's
    # aggregate only, so the first run after the edit cannot decide the holdout item; the next
    # one, against the baseline it saved, does, on the new ledger.
    path = held.path / "heldout.retrieval.yaml"
    path.write_text(path.read_text().replace("relevant: [d4]", "relevant: [d4, d5]"))
    rows = shelf()
    assert "holdout::P@1" not in rows
    assert rows["P@1"]["decisions"] == 0
    rows = shelf()
    assert rows["holdout::P@1"]["decisions"] == 0


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


def test_a_drift_failure_names_the_visible_queries_that_slid_never_a_held_out_one(
    held: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 39: a failing history-drift item names the queries that slid most since its anchor
    # and the values at each step; two visible and two held-out queries slid, and only the
    # visible are named, anywhere.
    def run(commit: str, *args: str) -> pytest.RunResult:
        monkeypatch.setenv("GITHUB_SHA", commit * 40)
        return held.runpytest("--retrieval-gate", "-rA", *args)

    run("a", "--rg-save-baseline")
    run("b", "--rg-save-baseline")
    spoil(held, "q00", "q01", "q02", "q04")
    result = run("c")
    assert outcomes(result)["history-drift::P@1"] == "FAILED"
    result.stdout.fnmatch_lines(
        [
            'slid most since the anchor (anchor -> now): q01 "ask zeta1x" 1 -> 0 (-1.0000), '
            'q02 "ask zeta2x" 1 -> 0 (-1.0000); 2 of the 13 queries worse, 0 better',
            "P@1 at each step: aaaaaaa 1 (anchor), bbbbbbb 1, now 0.8462",
        ]
    )
    shown = everything_shown(held, result)
    for qid in HELD_OUT:
        assert qid not in shown and text_of(qid) not in shown, qid


# -- Stale labels, unknown ids: held-out units counted, never named --------------------------------

CORPUS = "\n".join(f'{{"id": "d{i}", "text": "document {i}"}}' for i in range(QUERIES)) + "\n"


def with_corpus(project: pytest.Pytester) -> None:
    """The project's documents d0 ... d19 as its corpus (the retriever returns them)."""
    (project.path / "docs.jsonl").write_text(CORPUS, encoding="utf-8")
    path = project.path / "pyproject.toml"
    path.write_text(
        path.read_text().replace('systems = ["held"]', 'systems = ["held"]\ncorpus = "docs.jsonl"')
    )


def everything_shown(project: pytest.Pytester, result: pytest.RunResult) -> str:
    """The run's terminal output and every file it wrote, as one text."""
    texts = [result.stdout.str(), result.stderr.str()]
    for path in sorted(project.path.rglob("*")):
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix != ".png"
            and path.name not in {*INPUTS, "docs.jsonl", "held_app.py", "run.json"}
        ):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


def test_stale_labels_of_held_out_queries_are_counted_never_named(held: pytest.Pytester) -> None:
    # Issue 40: the error named the held-out query, its missing document and its position
    # ("queries[4] (id q04)") in terminal, markdown and JSON.
    with_corpus(held)
    path = held.path / "heldout.retrieval.yaml"
    text = path.read_text()
    for i in (3, 4, 9):  # q03 visible; q04 and q09 held out
        text = text.replace(f"relevant: [d{i}]\n", f"relevant: [gone{i}]\n")
    path.write_text(text)
    result = held.runpytest("--retrieval-gate", "--rg-json=out.json", "--rg-report=out.md")
    assert result.ret == 1
    line = (
        "heldout.retrieval.yaml [queries[3] (id q03)]: 1 relevant id of 1 query not in corpus "
        f"{held.path / 'docs.jsonl'} (q03: gone3); fix the labels, or count them as misses with "
        "'missing_relevant: miss'; and 2 held-out queries name documents not in the corpus "
        "(which, and which documents, is not shown: the holdout shows only pass or fail)"
    )
    shown = everything_shown(held, result)
    assert line in result.stdout.str()
    assert line in (held.path / "out.md").read_text()
    assert line in json.loads((held.path / "out.json").read_text())["errors"][0]["error"]
    for hidden in ("q04", "q09", "gone4", "gone9", "queries[4]", "queries[9]", "and 2 more"):
        assert hidden not in shown, hidden
    # Only held-out queries stale: the count alone, at the suite's queries.
    text = text.replace("relevant: [gone3]\n", "relevant: [d3]\n")
    path.write_text(text)
    result = held.runpytest("--retrieval-gate", "--rg-json=out.json", "--rg-report=out.md")
    result.stdout.fnmatch_lines(
        [
            "*heldout.retrieval.yaml [[]queries]: 2 held-out queries name documents not in "
            "corpus *docs.jsonl (which, and which documents, is not shown: the holdout shows "
            "only pass or fail); fix the labels (a run without 'holdout' lists them), or count "
            "them as misses with 'missing_relevant: miss'"
        ]
    )
    shown = everything_shown(held, result)
    for hidden in ("q04", "q09", "gone4", "gone9", "queries[4]", "queries[9]", "queries[0]"):
        assert hidden not in shown, hidden


def test_unknown_ids_only_held_out_queries_returned_are_counted(held: pytest.Pytester) -> None:
    # Issue 40: the report's notes listed them ("e.g. 'ghost4'").
    with_corpus(held)
    held.makepyfile(
        held_app=RETRIEVER
        + "\n\nfound = retrieve\n\n\ndef retrieve(query, k):\n"
        + "    i = int(query.removeprefix('ask zeta').removesuffix('x'))\n"
        + "    extra = [(f'ghost{i}', 3.0)] if i in (3, 4, 9) else []\n"
        + "    return extra + found(query, k)\n"
    )
    result = held.runpytest("--retrieval-gate", "--rg-json=out.json", "--rg-report=out.md")
    assert result.ret == 0, result.stdout.str()
    note = (
        "3 returned ids are not in the corpus and count as non-relevant, e.g. 'ghost3' (2 of "
        "them returned only for held-out queries: not shown)"
    )
    report = json.loads((held.path / "out.json").read_text())
    assert note in report["runs"][0]["stats"]["notes"]
    assert note in (held.path / "out.md").read_text()
    shown = everything_shown(held, result)
    assert "ghost4" not in shown and "ghost9" not in shown


# -- Hostile rows: the retriever as an adversary of the holdout ------------------------------------
#
# Each row is a retriever that says a held-out query's text (or id) through some channel, in some
# form, and what the session must show instead. ``before`` is what 65934fb did (issue 40's
# classes: clear, handled, hang, traceback, lost record, silent, security); every row is clear
# now, or pins a limit docs/baselines.md states ("The holdout": a one-word held-out text outside
# its own unit's messages, base64, a reversed text), so that the docs stay true.

HOSTILE = """
import base64, html, json, logging, pathlib, sys, urllib.parse, warnings

log = logging.getLogger("hostile")
TEXTS = {texts!r}
QUERIES = {queries}
HELD = {held!r}  # the indices of the held-out queries
DOC = {doc!r}


class Odd(UserWarning):
    # A warning whose text is not its argument.
    def __init__(self, query, n):
        super().__init__(query, n)
        self.query = query

    def __str__(self):
        return f"odd {{self.query}}"


def retrieve(query, k):
    i = TEXTS[query]
    bad = pathlib.Path(__file__).with_name("bad.txt").read_text().split()
    wrong = 3.0 if str(i) in bad else 1.0
    pair = [(DOC.format(i), 2.0), (DOC.format((i + 1) % QUERIES), wrong)]
    hits = sorted(pair, key=lambda h: -h[1])[:k]
{body}
    return hits
"""

HOSTILE_SETTINGS = SETTINGS.replace(
    'addopts = "-p no:cacheprovider"',
    # The retriever's own warnings as a user's project shows them (not this suite's "error").
    'addopts = "-p no:cacheprovider"\nfilterwarnings = ["default"]',
)


@dataclass(frozen=True)
class Hostile:
    """One attack: the retriever's ``body`` (``query``, its index ``i`` and ``hits`` in scope;
    q04 is held out), the command-line ``args``, query ``texts`` by index, and what the output
    must hold (``said``) and must not (``unsaid``) besides any held-out text."""

    id: str
    before: str
    body: str
    said: tuple[str, ...] = ()
    unsaid: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    texts: tuple[tuple[int, str], ...] = ()
    corpus: bool = False
    ret: int = 0
    # What may show although it holds a held-out text (a visible query's own text, a form the
    # docs say is not recognised): left out of the output before it is searched.
    allowed: tuple[str, ...] = ()
    ids_allowed: tuple[str, ...] = ()  # held-out ids the user wrote on the command line
    ids_are_documents: bool = False  # held-out ids are documents' too, shown as theirs
    # A baseline saved first (by a run with these arguments), then these queries spoiled.
    saved: tuple[str, ...] | None = None
    spoiled: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # (path, what it must hold)
    env: tuple[tuple[str, str], ...] = ()
    check: Callable[[Path], None] | None = None  # of the project once run
    floors_last: bool = False  # the suite's floor written last, after the held-out q18
    ids: str = "q{:02d}"  # each query's id, by index
    docs: str = "d{}"  # its relevant document's id, by index


RAISE_ON_HELD = "    if i in HELD:\n        raise ValueError({})"
RAISE_ON_Q04 = (
    "    if i == 4:\n        raise ValueError({})"  # the held-out query whose text a row sets
)

ROWS = [
    # Issue 40's own findings first (not counted among the new rows).
    Hostile(
        "issue40-warning-of-the-query",
        "security",
        "    warnings.warn(query)",
        said=("*UserWarning: a held-out unit", "*UserWarning: ask zeta3x"),
    ),
    Hostile(
        "issue40-raise-upper-cased-joined-with-underscores",
        "security",
        RAISE_ON_HELD.format("query.upper().replace(' ', '_')"),
        said=(
            "*[[]query a held-out unit]: retriever held_app:retrieve raised ValueError: "
            "a held-out unit",
        ),
        ret=1,
    ),
    Hostile(
        "print-to-stdout",
        "security",
        "    print(f'searching {query}')",
        said=("searching a held-out unit", "searching ask zeta3x"),
    ),
    Hostile(
        "print-to-stderr",
        "security",
        "    print(f'searching {query}', file=sys.stderr)",
        said=("searching a held-out unit",),
    ),
    Hostile(
        "print-split-across-lines",
        "security",
        "    print('\\n'.join(query.split()))",
        said=("a held-out unit",),
    ),
    Hostile(
        "logging-captured-log",
        "security",
        "    log.warning('searching %s', query)",
        said=("*searching a held-out unit",),
    ),
    Hostile(
        "logging-exception-text",
        "security",
        "    try:\n        raise KeyError(query.upper())\n"
        "    except KeyError:\n        log.exception('lookup failed')",
        said=("KeyError: 'a held-out unit'",),
    ),
    Hostile(
        "logging-live-log-cli",
        "security",
        "    log.warning('searching %s', query)",
        said=("*searching a held-out unit*",),
        args=("-o", "log_cli=true"),
    ),
    Hostile(
        "logging-log-file",
        "security",
        "    log.warning('searching %s', query)",
        args=("--log-file=out/gate.log", "--log-file-level=WARNING"),
    ),
    Hostile(
        "junit-system-out",
        "security",
        "    print(query.title())",
        args=("-o", "junit_logging=all"),
    ),
    Hostile(
        "warning-upper-case",
        "security",
        "    warnings.warn(query.upper())",
        said=("*UserWarning: a held-out unit",),
    ),
    Hostile(
        "warning-own-class-own-str",
        "security",
        "    warnings.warn(Odd(query, 3))",
        said=("*Odd: odd ask zeta3x", "*Odd: odd a held-out unit"),
    ),
    Hostile(
        "warning-source-line-holds-the-text",
        "security",
        "    warnings.warn('x') if query == 'ask zeta4x' else None",
        said=("*UserWarning: x",),
    ),
    Hostile(
        "raise-repr-escaped-quotes",
        "security",
        RAISE_ON_Q04.format("repr(query)"),
        texts=((4, 'it\'s "zeta4x"\tnow'),),
        said=("*raised ValueError: 'a held-out unit'",),
        ret=1,
    ),
    Hostile(
        "raise-json-escaped-unicode",
        "security",
        RAISE_ON_Q04.format("json.dumps(query)"),
        texts=((4, "café crème zeta4x"),),
        said=('*raised ValueError: "a held-out unit"',),
        ret=1,
    ),
    Hostile(
        "raise-url-encoded",
        "security",
        RAISE_ON_HELD.format("'/search?q=' + urllib.parse.quote(query)"),
        said=("*raised ValueError: /search?q=a held-out unit",),
        ret=1,
    ),
    Hostile(
        "raise-html-escaped",
        "security",
        RAISE_ON_Q04.format("html.escape(query)"),
        texts=((4, "it's zeta4x"),),
        said=("*raised ValueError: a held-out unit",),
        ret=1,
    ),
    Hostile(
        "raise-camel-case",
        "security",
        RAISE_ON_HELD.format("''.join(w.capitalize() for w in query.split())"),
        said=("*raised ValueError: a held-out unit",),
        ret=1,
    ),
    Hostile(
        "raise-dotted-upper",
        "security",
        RAISE_ON_HELD.format("query.upper().replace(' ', '.')"),
        said=("*raised ValueError: a held-out unit",),
        ret=1,
    ),
    Hostile(
        "raise-no-separator",
        "security",
        RAISE_ON_HELD.format("'key=' + query.replace(' ', '')"),
        said=("*raised ValueError: key=a held-out unit",),
        ret=1,
    ),
    Hostile(
        "raise-tb-long-traceback",
        "security",
        "    def deeper(q):\n        raise ValueError(q.upper())\n    if i == 4:\n        deeper(query)",
        args=("--tb=long", "-v"),
        said=("ValueError: a held-out unit",),
        ret=1,
    ),
    Hostile(
        "raise-naming-another-held-out-query",
        "clear",
        "    if i == 3:\n        raise ValueError('unlike ask zeta4x')",
        said=(
            "*[[]query q03]: retriever held_app:retrieve raised ValueError: unlike a held-out unit",
        ),
        ret=1,
    ),
    Hostile(
        "raise-one-word-query-of-its-own-unit",
        "security",
        RAISE_ON_Q04.format("f'cannot search {query.upper()}'"),
        texts=((4, "join"),),
        said=("*raised ValueError: cannot search a held-out unit",),
        ret=1,
    ),
    Hostile(
        "print-one-word-query",
        "security",
        "    print(f'searching {query}')",
        texts=((4, "join"),),
        said=("searching join",),
        # docs/baselines.md, "The holdout": a short held-out text is masked only where a message
        # is about its own unit; "join" elsewhere stays "join".
        allowed=("join",),
    ),
    Hostile(
        "raise-base64",
        "security",
        RAISE_ON_HELD.format("base64.b64encode(query.encode()).decode()"),
        said=("*raised ValueError: YXNrIHpldGEweA==",),  # "ask zeta0x", the first held out
        ret=1,
    ),
    Hostile(
        "raise-reversed",
        "security",
        RAISE_ON_HELD.format("query[::-1]"),
        said=("*raised ValueError: x0atez ksa",),
        ret=1,
    ),
    Hostile(
        "returned-doc-id-is-the-query",
        "security",
        "    if i == 4:\n        hits = [(query.replace(' ', '_'), 3.0), *hits]",
        corpus=True,
        said=(
            "*1 returned ids are not in the corpus*(1 of them returned only for held-out queries: not shown)*",
        ),
    ),
    Hostile(
        "visible-query-holds-the-held-out-text",
        "security",
        "    print(f'searching {query}')",
        texts=((3, "ask zeta4x then zeta3x"),),
        said=("searching ask zeta4x then zeta3x", "searching a held-out unit"),
        allowed=("ask zeta4x then zeta3x",),
    ),
    Hostile(
        "huge-held-out-text",
        "security",
        "    print(query)",
        texts=((4, " ".join(f"word{n}" for n in range(5000))),),
        said=("a held-out unit",),
    ),
    Hostile(
        "k-selects-a-held-out-query-by-id",
        "clear",
        "    print(query)",
        args=("-k", "q04"),
        said=("*nothing ran: 1 gate item deselected by -k 'q04'*",),
        ids_allowed=("q04",),
        ret=5,
    ),
    Hostile(
        "held-out-ids-with-regex-metacharacters",
        "clear",
        RAISE_ON_HELD.format("f'cannot search {query}'"),
        ids="q({})+.*?[x]|^",
        said=(
            "*[[]query a held-out unit]: retriever held_app:retrieve raised ValueError: "
            "cannot search a held-out unit",
        ),
        ret=1,
    ),
    Hostile(
        "held-out-id-is-a-judged-document-id",
        "clear",
        # A visible query ranks first the document whose id is the next query's, held out.
        "    if i not in HELD and (i + 1) % QUERIES in HELD:\n"
        "        hits = [(DOC.format((i + 1) % QUERIES), 3.0)]",
        ids="document-{:04d}",
        docs="document-{:04d}",
        ids_are_documents=True,
        check=lambda root: ranks_a_held_out_id_as_a_document(root),
    ),
    Hostile(
        "regression-and-holdout-fail-together",
        "security",
        "    print(f'searching {query}')",
        saved=(),
        spoiled=("q03", "q04"),
        args=("--rg-record",),
        said=("*regression::P@1*", "*holdout::P@1*", "*q03*"),
        ret=1,
    ),
    Hostile(
        "rg-plan-after-a-baseline",
        "clear",
        "    pass",
        saved=(),
        args=("--rg-plan",),
        said=("*heldout*",),
    ),
    Hostile(
        "rg-suggest-floors-on-the-terminal",
        "security",
        "    print(query)",
        saved=(),
        spoiled=("q04",),
        args=("--rg-suggest-floors", "-"),
        said=("*P@1*",),
        ret=1,
    ),
    Hostile(
        "rg-suggest-floors-to-a-file",
        "security",
        "    pass",
        saved=(),
        args=("--rg-suggest-floors", "floors.diff"),
        # Two lines of context, not three: the third is the held-out "- id: q00".
        said=("*floors.diff; review, then git apply it",),
        files=(("floors.diff", "@@ -2,5 +2,5 @@\n k: [1]\n gates:\n-  P@1: 0.5\n+  P@1: 0.77\n"),),
    ),
    Hostile(
        "rg-suggest-floors-beside-a-held-out-query",
        "security",
        "    pass",
        saved=(),
        floors_last=True,
        args=("--rg-suggest-floors", "floors.diff"),
        said=(
            "*review, then git apply --unidiff-zero it (no context: the lines around a floor "
            "name a held-out unit)",
        ),
        files=(("floors.diff", "@@ -65 +65 @@\n-gates: {P@1: 0.5}\n+gates: {P@1: 0.77}\n"),),
    ),
    Hostile(
        "step-summary",
        "security",
        "    warnings.warn(query)",
        saved=(),
        spoiled=("q04", "q09"),
        env=(("GITHUB_STEP_SUMMARY", "summary.md"),),
        files=(("summary.md", "holdout"),),
        ret=1,
    ),
    Hostile(
        "baseline-and-history-keep-no-held-out-value",
        "security",
        "    pass",
        saved=("--rg-save-baseline",),
        args=("--rg-save-baseline",),
        check=lambda root: keeps_no_held_out_value(root),
    ),
]


def keeps_no_held_out_value(root: Path) -> None:
    """The baseline and the history keep the holdout's aggregates, never a unit's value (they
    kept each held-out unit's values under a key anyone can compute from the suite file)."""
    baseline = json.loads((root / "retrieval-baseline.json").read_text())
    held = baseline["runs"]["heldout::held"]["holdout"]
    assert set(held) == {"fraction", "n", "digest", "keys", "aggregates"}
    assert held["aggregates"]["P@1"] == 1.0 and held["n"] == 7
    lines = (root / ".retrieval-gate/history/heldout.jsonl").read_text().splitlines()
    for line in lines:
        assert set(json.loads(line)["holdout"]) == {"digest", "n", "decisions"}


def ranks_a_held_out_id_as_a_document(root: Path) -> None:
    """A document whose id is a held-out query's is shown as the document it is, in a visible
    query's ranking (docs/baselines.md: ids the suite judges as documents are not masked)."""
    hidden = holdout_ids(load_suite(root / "heldout.retrieval.yaml"), 0)
    report = json.loads((root / "out/report.json").read_text())
    ranked = [doc for q in report["runs"][0]["queries"] for doc in q["ranking"] if doc in hidden]
    assert ranked, report["runs"][0]["queries"]
    markdown = (root / "out/report.md").read_text()
    assert all(doc in markdown for doc in ranked)


def hostile_project(project: pytest.Pytester, row: Hostile) -> dict[str, str]:
    """The row's project; its held-out queries' ids -> texts."""
    texts = {i: text_of(f"q{i:02d}") for i in range(QUERIES)}
    texts.update(dict(row.texts))
    ids = {i: row.ids.format(i) for i in texts}
    project.makefile(".toml", pyproject=HOSTILE_SETTINGS)
    lines = ["name: heldout", "k: [1]", "gates:", "  P@1: 0.5", "holdout: 0.3", "queries:"]
    if row.floors_last:
        lines = ["name: heldout", "k: [1]", "holdout: 0.3", "queries:"]
    for i, text in sorted(texts.items(), key=lambda item: row.floors_last and item[0] == 18):
        lines += [
            f"  - id: {json.dumps(ids[i])}",
            f"    relevant: [{json.dumps(row.docs.format(i))}]",
            f"    query: {json.dumps(text)}",
        ]
    if row.floors_last:
        lines.append("gates: {P@1: 0.5}")
    suite = project.path / "heldout.retrieval.yaml"
    suite.write_text("\n".join(lines) + "\n", "utf-8")
    hidden = holdout_ids(load_suite(suite), 0)
    held = {i for i in texts if ids[i] in hidden}
    body = HOSTILE.format(
        texts={t: i for i, t in texts.items()},
        queries=QUERIES,
        held=held,
        doc=row.docs,
        body=row.body,
    )
    (project.path / "held_app.py").write_text(body, encoding="utf-8")
    spoil(project)
    if row.corpus:
        with_corpus(project)
    project.syspathinsert()
    return {ids[i]: texts[i] for i in held}


def leaked(shown: str, texts: Sequence[str]) -> list[str]:
    """The ``texts`` ``shown`` holds in any case and separator, URL- or HTML-escaped: written
    here independently of display/held.py, by letters and digits alone."""
    import html
    from urllib.parse import unquote

    def bare(text: str) -> str:
        return "".join(c for c in text.casefold() if c.isalnum())

    forms = [shown, unquote(shown), html.unescape(shown)]
    with contextlib.suppress(UnicodeDecodeError):
        forms.append(shown.encode("latin-1", "backslashreplace").decode("unicode_escape"))
    found = {bare(form) for form in forms}
    return [text for text in texts if any(bare(text) in form for form in found)]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_a_hostile_retriever_names_no_held_out_query(
    pytester: pytest.Pytester, row: Hostile
) -> None:
    """Every output of the run (terminal, every file it wrote) holds no held-out query's id or
    text in any case and separator, URL- or HTML-escaped (:func:`leaked`), and says what the row
    says it must."""
    held = hostile_project(pytester, row)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in row.env:
            patch.setenv(name, str(pytester.path / value))
        if row.saved is not None:
            first = pytester.runpytest("--retrieval-gate", "--rg-save-baseline", *row.saved)
            assert first.ret == 0, first.stdout.str()
            spoil(pytester, *row.spoiled)
        result = pytester.runpytest(
            "--retrieval-gate",
            "-rA",
            "--rg-json=out/report.json",
            "--rg-report=out/report.md",
            "--junitxml=out/junit.xml",
            *row.args,
        )
    shown = everything_shown(pytester, result)
    for path, holds in row.files:
        assert holds in (pytester.path / path).read_text(), path
    if row.check is not None:
        row.check(pytester.path)
    assert result.ret == row.ret, result.stdout.str()
    for line in row.said:
        assert fnmatch.fnmatch(shown, f"*{line}*") if "*" in line else line in shown, line
    for text in row.unsaid:
        assert text not in shown, text
    for text in row.allowed:
        shown = shown.replace(text, "")
    assert leaked(shown, list(held.values())) == []
    for qid in held:
        if qid not in row.ids_allowed and not row.ids_are_documents:
            assert not re.search(rf"(?<![A-Za-z0-9]){re.escape(qid)}(?![0-9])", shown), qid


def test_a_run_file_that_skips_held_out_queries_counts_them(held: pytest.Pytester) -> None:
    # Hostile row "run-file-coverage-warning" (65934fb: security): the warning gave up to three
    # unanswered query ids as examples, held-out ones among them ("e.g. 'q00', 'q03', 'q04'").
    answered = {
        f"q{i:02d}": {f"d{i}": 1.0}
        for i in range(QUERIES)
        if f"q{i:02d}" not in {"q00", "q03", "q04"}
    }
    (held.path / "run.json").write_text(json.dumps(answered))
    path = held.path / "pyproject.toml"
    path.write_text(path.read_text().replace('retriever = "held_app:retrieve"', 'run = "run.json"'))
    result = held.runpytest("--retrieval-gate", "--rg-json=out.json", "--rg-report=out.md")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*run.json answers 17 of the suite's 20 queries; the 3 it does not answer score 0 "
            "(e.g. 'q03'; 2 held-out queries, not shown)*"
        ]
    )
    shown = everything_shown(held, result)
    assert "q00" not in shown and "q04" not in shown


def test_notes_on_held_out_units_are_counted(held: pytest.Pytester) -> None:
    # Hostile row "suite-notes-name-a-held-out-unit" (65934fb: security): what preparing a suite
    # changed ("q04: T:1 is an alternative id of T:2", an ontology suite's) went to the report's
    # notes by unit id.
    import dataclasses

    from retrieval_gate.suites.holdout import seal

    suite = load_suite(held.path / "heldout.retrieval.yaml")
    noted = dataclasses.replace(
        suite, notes=("q03: T:1 mapped to T:2", "q04: T:5 mapped to T:6", "q09: T:7 obsolete")
    )
    try:
        assert seal(noted, 0).notes == (
            "q03: T:1 mapped to T:2",
            "2 notes on held-out queries not shown (the holdout shows only pass or fail)",
        )
    finally:
        from retrieval_gate.display import unseal_held_out

        unseal_held_out()


def test_the_transport_carries_no_held_out_unit_value() -> None:
    # Hostile row "transport-carries-unit-values" (65934fb: security): an item's payload, which
    # travels on its test report (and into any file a plugin writes reports to, such as
    # pytest-reportlog's), held each held-out unit's values.
    import dataclasses

    from retrieval_gate.records import HoldoutRecord, ItemPayload
    from tests.test_records import RUN

    held = HoldoutRecord(0.3, ("k1", "k2"), {"P@1": (1.0, 0.0)}, "h", {"P@1": 0.5})
    payload = ItemPayload(runs=(dataclasses.replace(RUN, holdout=held),))
    sent = json.loads(json.dumps(payload.to_json()))
    assert sent["runs"][0]["holdout"] == {
        "fraction": 0.3,
        "n": 2,
        "digest": "h",
        "keys": ["k1", "k2"],
        "aggregates": {"P@1": 0.5},
    }
    back = ItemPayload.from_json(sent).runs[0].holdout
    assert back is not None and back.aggregates == {"P@1": 0.5} and back.values == {}
