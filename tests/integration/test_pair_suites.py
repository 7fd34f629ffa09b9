"""Pair suites end to end: `kind: pairs` suites run through `pytest --retrieval-gate` with an
embedder whose cosines are known (vectors at set angles), so every figure is hand arithmetic."""

from __future__ import annotations

import json
import math
import textwrap
from typing import Any

import numpy as np
import pytest

from retrieval_gate.metrics.pairs import pearson, spearman

CONFTEST = """
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder

class Angles:
    # A text's vector is the unit vector at its angle (degrees), read from the file the system's
    # model names: a pair's cosine is the cosine of the difference of their angles.
    dim = 2

    def __init__(self, model):
        self.identity = f"test-angles/{model}/" + os.environ.get("ANGLES_VERSION", "1")
        self.angles = json.loads(Path(model).read_text())

    def encode_documents(self, texts, *, progress=False):
        time.sleep(float(os.environ.get("ANGLES_SLEEP", "0")))  # a slow model: progress shows
        rad = [math.radians(self.angles[t]) for t in texts]
        return np.array([[math.cos(a), math.sin(a)] for a in rad], dtype=np.float32)

    def encode_queries(self, texts):
        return self.encode_documents(texts)


register_embedder(EmbedderBackend("angles", "test", {}, lambda s, c, e: Angles(s.model), "test"))


def pytest_unconfigure(config):
    EMBEDDERS.pop("angles", None)
"""

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate.system.angles]
embedder = "angles"
model = "angles.json"
index = "exact"
"""

# Pairs: (a, b, gold). Angles put each pair's cosine where the gold score roughly says.
PAIRS = [
    ("a cat", "a kitten", 5.0),
    ("a cat", "a dog", 3.0),
    ("a car", "a truck", 4.5),
    ("a cat", "a car", 0.0),
    ("a dog", "the sea", 1.0),
    ("a kitten", "a dog", 2.5),
]
ANGLES: dict[str, float] = {
    "a cat": 0,
    "a kitten": 10,
    "a dog": 40,
    "a car": 90,
    "a truck": 80,
    "the sea": 60,
}


def _cosines(angles: dict[str, float]) -> np.ndarray:
    # float32 vectors, as the embedder returns them, then the cosine in float64.
    out = []
    for a, b, _ in PAIRS:
        va, vb = (
            np.array(
                [math.cos(math.radians(angles[t])), math.sin(math.radians(angles[t]))],
                dtype=np.float32,
            ).astype(np.float64)
            for t in (a, b)
        )
        out.append(float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb))))
    return np.array(out)


GOLD = np.array([g for _, _, g in PAIRS])


def suite(gates: str = "{pearson: 0.5, spearman: 0.5}", extra: str = "") -> str:
    rows = "\n".join(f"  - [{a}, {b}, {g}]" for a, b, g in PAIRS)
    return f"name: sim\nkind: pairs\ngates: {gates}\n{extra}pairs:\n{rows}\n"


@pytest.fixture
def proj(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "angles.json").write_text(json.dumps(ANGLES))
    return pytester


def write_suite(pytester: pytest.Pytester, text: str) -> None:
    (pytester.path / "sim.retrieval.yaml").write_text(textwrap.dedent(text), encoding="utf-8")


def run_json(pytester: pytest.Pytester) -> dict[str, Any]:
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text(encoding="utf-8"))
    (run,) = data["runs"]
    return {"run": run, "gates": data["gates"]}


def test_pearson_and_spearman_of_known_cosines_gate_and_report(proj: pytest.Pytester) -> None:
    write_suite(proj, suite())
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=2)
    cos = _cosines(ANGLES)
    out = run_json(proj)
    run = out["run"]
    assert run["kind"] == "pairs"
    assert run["k"] == []  # a pair suite has no cutoffs (it listed [1, 3, 5, 10])
    assert run["metrics"]["pearson"] == pytest.approx(pearson(cos, GOLD), abs=1e-12)
    assert run["metrics"]["spearman"] == pytest.approx(spearman(cos, GOLD), abs=1e-12)
    scipy_stats = pytest.importorskip("scipy.stats")
    assert run["metrics"]["pearson"] == pytest.approx(
        scipy_stats.pearsonr(cos, GOLD).statistic, abs=1e-12
    )
    assert run["metrics"]["spearman"] == pytest.approx(
        scipy_stats.spearmanr(cos, GOLD).statistic, abs=1e-12
    )
    # Per pair: its cosine and gold score, and both texts, so a reader can recompute; no
    # "pearson" of one pair (there is none: it was the pair's cosine), and no time (none taken).
    first = run["queries"][0]
    assert (first["text"], first["text_b"]) == ("a cat", "a kitten")
    assert first["metrics"] == {
        "cosine": pytest.approx(math.cos(math.radians(10)), abs=1e-7),
        "gold_score": 5.0,
    }
    assert first["latency_ms"] is None
    lo, hi = run["intervals"]["pearson"]
    assert lo <= run["metrics"]["pearson"] <= hi
    assert run["stats"]["latency_measured"] is False
    assert run["stats"]["embedded_texts"] == len(ANGLES)  # each distinct text once
    text = "\n".join(result.outlines)
    assert "sim (6 pairs)" in text
    # No latency column: a pair suite times nothing, and a "-" would read as a missing figure.
    result.stdout.re_match_lines(
        [r"^  system +pearson +spearman$", r"^  angles +-?\d\.\d{4} +-?\d\.\d{4}$"]
    )
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "6 pairs from `sim.retrieval.yaml`" in markdown
    assert "### Pairs furthest from the gold order" in markdown
    assert "### Latency" not in markdown  # a pair suite times no queries


def test_a_missed_floor_fails_with_one_line(proj: pytest.Pytester) -> None:
    write_suite(proj, suite("{pearson: 0.99}"))
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=1)
    value = pearson(_cosines(ANGLES), GOLD)
    result.stdout.fnmatch_lines(
        [f"*pearson over suite (sim x angles): FAILED: {value:.4f} (needs >= 0.99 floor, n=6)"]
    )
    assert "worst queries" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_a_retriever_system_on_a_pair_suite_is_one_clear_line(proj: pytest.Pytester) -> None:
    proj.makepyfile(app="def search(query, k):\n    return []\n")
    proj.syspathinsert()
    (proj.path / "pyproject.toml").write_text(
        SETTINGS + '\n[tool.retrieval_gate.system.app]\nretriever = "app:search"\n'
    )
    write_suite(proj, suite())
    result = proj.runpytest("--retrieval-gate", "--rg-system=app")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*pair suites need an embedding system*system app is kind 'retriever'*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_worse_model_regresses_against_the_baseline_by_the_paired_bootstrap(
    proj: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    many = [(f"t{i}", f"u{i}", float(i % 11)) for i in range(60)]
    # Then: angle difference shrinks as the gold score grows (a good model).
    good = {f"t{i}": 0.0 for i in range(60)} | {f"u{i}": 90.0 - 8.0 * (i % 11) for i in range(60)}
    rows = "\n".join(f"  - [{a}, {b}, {g}]" for a, b, g in many)
    write_suite(proj, f"name: sim\nkind: pairs\ntolerance: {{pearson: 0.02}}\npairs:\n{rows}\n")
    (proj.path / "angles.json").write_text(json.dumps(good))
    proj.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=1)
    # Now: a model that scrambles a third of the pairs.
    bad = dict(good) | {f"u{i}": float((i * 37) % 90) for i in range(0, 60, 3)}
    (proj.path / "angles.json").write_text(json.dumps(bad))
    monkeypatch.setenv("ANGLES_VERSION", "2")  # a new model identity: nothing read from cache
    result = proj.runpytest("--retrieval-gate")
    # The run item (no floors) passes; the regression item fails.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*FAILED sim.retrieval.yaml::angles::regression::pearson: regressed: pearson dropped "
            "* > tolerance 0.02 (this run's resolution +-* at 95 %)"
        ]
    )
    (gate,) = [g for g in run_json(proj)["gates"] if "::regression::" in g["nodeid"]]
    assert gate["verdict"] == "regressed"
    # The resolution of a correlation comes from the paired bootstrap of its difference.
    assert gate["resolution"] > 0
    assert gate["baseline"] - gate["value"] > 0.02
    assert any("over 60 shared pairs" in d for d in gate["detail"])
    # The pairs that lowered pearson are explained by their error against their gold scores.
    assert any(
        d.startswith("p-") and ", gold " in d and "): pearson -" in d for d in gate["detail"]
    )
    # The same model again: nothing changed, the verdict is ok.
    (proj.path / "angles.json").write_text(json.dumps(good))
    monkeypatch.setenv("ANGLES_VERSION", "1")
    proj.runpytest("--retrieval-gate").assert_outcomes(passed=2)
    (gate,) = [g for g in run_json(proj)["gates"] if "::regression::" in g["nodeid"]]
    assert gate["verdict"] == "ok"


def _spearman_change(
    proj: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    gold: list[float],
    then: list[float],
    now: list[float],
) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Six pairs t_i-u_i with these gold scores, u_i at ``then`` degrees from t_i for the
    baseline and at ``now`` for the rerun (a Spearman suite at tolerance 0.01), which fails its
    regression item; the rerun's result and JSON report."""
    rows = "\n".join(f"  - [t{i}, u{i}, {g}]" for i, g in enumerate(gold))
    write_suite(proj, f"name: sim\nkind: pairs\ntolerance: {{spearman: 0.01}}\npairs:\n{rows}\n")

    def angles(of: list[float]) -> str:
        return json.dumps({f"t{i}": 0.0 for i in range(6)} | {f"u{i}": a for i, a in enumerate(of)})

    (proj.path / "angles.json").write_text(angles(then))
    proj.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=1)
    (proj.path / "angles.json").write_text(angles(now))
    monkeypatch.setenv("ANGLES_VERSION", "2")
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=1, failed=1)
    return result, run_json(proj)


def test_the_worse_pairs_of_a_spearman_regression_are_those_that_lowered_it(
    proj: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Six pairs whose similarity order matches the gold order exactly (spearman 1). The new model
    # lowers every cosine (each angle grows by 5 to 15 degrees) and swaps the order of two pairs
    # (gold 3 and gold 2). Raw cosine change would call all six worse; what lowered Spearman is
    # the two swapped pairs, each displaced by one rank: d = (0, 0, 1, 1, 0, 0), so
    # rho = 1 - 6 * 2 / (6 * 35) = 0.942857, a drop of 2 / 35 = 0.057143, 1 / 35 = 0.028571 each.
    gold = [5.0, 4.0, 3.0, 2.0, 1.0, 0.2]
    then = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    now = [15.0, 25.0, 45.0, 35.0, 55.0, 65.0]
    result, data = _spearman_change(proj, monkeypatch, gold, then, now)
    ids = {q["text"]: q["id"] for q in data["run"]["queries"]}
    (gate,) = [g for g in data["gates"] if "::regression::" in g["nodeid"]]
    assert gate["value"] == pytest.approx(1 - 12 / 210)
    assert {w["id"] for w in gate["worst"]} == {ids["t2"], ids["t3"]}
    assert [w["value"] for w in gate["worst"]] == [pytest.approx(-1 / 35)] * 2
    assert sum(w["value"] for w in gate["worst"]) == pytest.approx(gate["value"] - 1)
    # Similarity ranks ascend with the cosine: t2 was 4th (as its gold), is 3rd now; t3 the
    # other way round.
    result.stdout.fnmatch_lines(
        [
            "baseline 1 -> now 0.9429 (drop 0.0571, tolerance 0.01) over 6 shared pairs; "
            "2 worse, 0 better",
        ]
    )
    shown = {line for line in result.outlines if ": similarity rank " in line}
    assert shown == {
        f"{ids['t2']}: similarity rank 4 -> 3 of 6, gold rank 4 (displacement 0 -> 1): "
        "spearman -0.0286",
        f"{ids['t3']}: similarity rank 3 -> 4 of 6, gold rank 3 (displacement 0 -> 1): "
        "spearman -0.0286",
    }


def test_pair_suites_under_xdist_give_the_same_report(proj: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    write_suite(proj, suite())
    proj.runpytest("--retrieval-gate").assert_outcomes(passed=2)
    alone = run_json(proj)["run"]
    proj.runpytest("--retrieval-gate", "-n", "2").assert_outcomes(passed=2)
    spread = run_json(proj)["run"]
    assert spread["metrics"] == alone["metrics"]
    assert spread["intervals"] == alone["intervals"]


@pytest.mark.usefixtures("minilm_in_process")
def test_the_pairs_example_passes_with_minilm(pytester: pytest.Pytester) -> None:
    import shutil
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "pairs"
    target = pytester.path / "pairs"
    shutil.copytree(
        example, target, ignore=shutil.ignore_patterns(".retrieval-gate-cache", "retrieval-gate-*")
    )
    result = pytester.runpytest("--retrieval-gate", "--rg-system=minilm", str(target))
    result.assert_outcomes(passed=2)
    data = json.loads((target / "retrieval-gate-report.json").read_text(encoding="utf-8"))
    (run,) = data["runs"]
    assert run["n"] == 40
    # What docs/pairs.md reports for this example.
    assert round(run["metrics"]["pearson"], 3) == 0.238
    assert round(run["metrics"]["spearman"], 3) == 0.241


def test_a_second_system_is_compared_with_the_reference_by_its_correlation(
    proj: pytest.Pytester,
) -> None:
    # The same angles except two texts moved: the second system's cosines differ on 4 pairs.
    moved = ANGLES | {"a kitten": 70, "a truck": 20}
    (proj.path / "moved.json").write_text(json.dumps(moved))
    (proj.path / "pyproject.toml").write_text(
        SETTINGS + '\n[tool.retrieval_gate.system.moved]\nembedder = "angles"\n'
        'model = "moved.json"\nindex = "exact"\n'
    )
    write_suite(proj, suite("{pearson: -1, spearman: -1}"))
    proj.runpytest("--retrieval-gate", "--rg-reference=angles").assert_outcomes(passed=4)
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "### Against the reference system `angles`" in markdown
    assert "per metric over the same pairs; * marks p < 0.05. Better/worse count pairs." in markdown
    good, bad = pearson(_cosines(ANGLES), GOLD), pearson(_cosines(moved), GOLD)
    row = next(line for line in markdown.splitlines() if line.startswith("| `moved` | pearson"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # The aggregates themselves, not means of per-pair cosines.
    assert cells[2:5] == [f"{good:.4f}", f"{bad:.4f}", f"{bad - good:+.4f}"]


def test_a_failing_pair_floor_shows_the_pairs_furthest_from_the_gold_order(
    proj: pytest.Pytester,
) -> None:
    write_suite(proj, suite("{spearman: 0.99}"))
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(failed=1)
    # The report's "furthest from the gold order" table, in the terminal: each pair's texts,
    # gold score and cosine, largest rank gap first (the gaps are worked out in the test above's
    # numbers: ranks of the cosines against ranks of the gold scores).
    cos = _cosines(ANGLES)
    from retrieval_gate.metrics.pairs import average_ranks

    gaps = np.abs(average_ranks(cos) - average_ranks(GOLD))
    first = max(range(len(PAIRS)), key=lambda i: (gaps[i], -i))
    a, b, gold = PAIRS[first]
    result.stdout.fnmatch_lines(
        [
            "spearman over suite (sim x angles): FAILED: *",
            "pairs furthest from the gold order (rank gap among the pairs):",
            f'* "{a}" / "{b}": gold {gold:g}, cosine *(rank gap {gaps[first]:g})',
        ]
    )


def test_a_baseline_and_slow_drift_of_a_pair_suite_count_shared_pairs(
    proj: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two merges, each saving a baseline (a history of two records), then a run compared with
    the baseline and the drift anchor: both say pairs, never queries."""
    write_suite(proj, suite(extra="tolerance: {pearson: 0.02}\n"))
    for step in range(2):
        monkeypatch.setenv("GITHUB_SHA", f"{0xABC0000 + step:07x}" + "0" * 33)
        assert proj.runpytest("--retrieval-gate", "--rg-save-baseline").ret == 0
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=6)  # two floors, two regression and two drift items
    result.stdout.fnmatch_lines(["  angles vs baseline: 6 shared pairs"])
    assert "shared queries" not in result.stdout.str()
    markdown = (proj.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "Compared on 6 pairs shared with `retrieval-baseline.json`." in markdown
    assert (
        "| system | metric | pairs | tolerance | this run's resolution | from the baseline "
        "(--rg-plan) | pairs for the tolerance (--rg-plan) |" in markdown
    )
    assert "queries" not in markdown
    gates = run_json(proj)["gates"]
    (drift,) = [g for g in gates if g["scope"] == "history-drift" and g["metric"] == "pearson"]
    # Not "over 6 paired pairs": the unit noun once, as the regression item says it.
    assert " over 6 shared pairs; drift tolerance 0.04 " in drift["detail"][1]


def test_the_progress_line_names_the_suite_once(
    proj: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the 2 s a step stays quiet, the embedding of the pairs' texts says how far it is.
    monkeypatch.setenv("ANGLES_SLEEP", "2.2")
    write_suite(proj, suite())
    result = proj.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["retrieval gate: sim x angles: pairs: embedding 6/6 (100%)*"])
    assert not [line for line in result.outlines if "sim: pairs" in line]
