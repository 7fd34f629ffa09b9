"""The default regression rule end to end (issue 18): an item fails when the observed drop is
larger than its tolerance, whatever else is in the session, and says how far to trust that.

The scenario a new user tried: a 35-query suite, three systems, a baseline saved, then one system
changed on purpose to drop its top hit on a third of the queries. That system's regression items
fail, with and without three more unchanged systems, serially and under xdist; the unchanged
systems pass; an unchanged run passes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from .conftest import lit

# Six systems over one generated corpus. Query "topic N" has two relevant documents: dN, which
# each system ranks first, and eN, which it ranks third (after one filler). A system listed in
# broken.json under its name loses its top hit on the topics listed there: dN goes missing, and
# eN moves up to rank 2. The systems differ only by their fillers, so every one is deterministic
# and its metrics can be worked out by hand.
APP = """
import json
import pathlib
import re

HERE = pathlib.Path(__file__).parent


def _ranking(name, query, k):
    n = int(re.search(r"[0-9]+", query).group())
    broken_file = HERE / "broken.json"
    broken = json.loads(broken_file.read_text()).get(name, []) if broken_file.exists() else []
    ranking = [f"d{n}", f"{name}-f0", f"e{n}"] + [f"{name}-f{j}" for j in range(1, 10)]
    if n in broken:
        ranking = ranking[1:]
    return [(doc, float(100 - i)) for i, doc in enumerate(ranking)][:k]


def bm25(query, k):
    return _ranking("bm25", query, k)


def minilm(query, k):
    return _ranking("minilm", query, k)


def m2v(query, k):
    return _ranking("m2v", query, k)


def extra1(query, k):
    return _ranking("extra1", query, k)


def extra2(query, k):
    return _ranking("extra2", query, k)


def extra3(query, k):
    return _ranking("extra3", query, k)
"""

THREE = ("bm25", "minilm", "m2v")
SIX = (*THREE, "extra1", "extra2", "extra3")
METRICS = ("MRR@10", "R@10", "nDCG@10")


def settings(systems: tuple[str, ...], extra: str = "") -> str:
    tables = "\n".join(
        f'[tool.retrieval_gate.system.{s}]\nretriever = "rule_app:{s}"\n' for s in systems
    )
    names = ", ".join(f'"{s}"' for s in systems)
    return (
        '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n\n'
        f"[tool.retrieval_gate]\nsystems = [{names}]\n{extra}\n\n{tables}"
    )


def suite(n: int, header: str = "") -> str:
    lines = ["name: docstrings", "k: [10]", "gates: {MRR@10: 0.1, R@10: 0.1, nDCG@10: 0.1}"]
    lines += [header, "queries:"]
    for i in range(n):
        lines += [f"  - id: q{i:02d}", f"    query: topic {i}", f"    relevant: [d{i}, e{i}]"]
    return "\n".join(lines) + "\n"


def make(pytester: pytest.Pytester, systems: tuple[str, ...], extra: str = "") -> None:
    pytester.makefile(".toml", pyproject=settings(systems, extra))
    pytester.makepyfile(rule_app=APP)
    pytester.syspathinsert()


def write_suite(pytester: pytest.Pytester, text: str) -> Path:
    path = pytester.path / "docstrings.retrieval.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def break_top_hits(pytester: pytest.Pytester, system: str, topics: list[int]) -> None:
    (pytester.path / "broken.json").write_text(json.dumps({system: topics}), encoding="utf-8")


def regression_gates(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text(encoding="utf-8"))
    return {
        g["nodeid"].removeprefix("docstrings.retrieval.yaml::"): g
        for g in data["gates"]
        if "::regression::" in g["nodeid"]
    }


# A third of 35: every third topic.
THIRD = list(range(0, 35, 3))  # 12 topics


def healthy() -> dict[str, float]:
    # dN at 1, eN at 3: MRR 1; R@10 1; nDCG@10 (1 + 1/log2(4)) / (1 + 1/log2(3)) = 1.5 / 1.63093.
    return {"MRR@10": 1.0, "R@10": 1.0, "nDCG@10": 1.5 / (1 + 1 / math.log2(3))}


def broken() -> dict[str, float]:
    # dN gone, eN at rank 2: MRR 1/2; R@10 1/2; nDCG@10 (1/log2(3)) / (1 + 1/log2(3)).
    ideal = 1 + 1 / math.log2(3)
    return {"MRR@10": 0.5, "R@10": 0.5, "nDCG@10": (1 / math.log2(3)) / ideal}


@pytest.mark.parametrize("systems", [THREE, SIX], ids=["three systems", "six systems"])
def test_a_broken_system_fails_its_regression_items_only(
    pytester: pytest.Pytester, systems: tuple[str, ...]
) -> None:
    # Under xdist: test_the_same_figures_with_and_without_xdist (its one xdist session).
    make(pytester, systems)
    write_suite(pytester, suite(35))
    saved = pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    assert saved.ret == 0, saved.stdout.str()
    break_top_hits(pytester, "bm25", THIRD)
    result = pytester.runpytest("--retrieval-gate")
    # Floors (3 per system) all hold; only bm25's three regression items fail.
    result.assert_outcomes(passed=3 * len(systems) + 3 * (len(systems) - 1), failed=3)
    gates = regression_gates(pytester)
    failed = sorted(name for name, g in gates.items() if not g["passed"])
    assert failed == [f"bm25::regression::{m}" for m in sorted(METRICS)]
    good, bad = healthy(), broken()
    for metric in METRICS:
        gate = gates[f"bm25::regression::{metric}"]
        # 12 of 35 queries fall from the healthy value to the broken one.
        drop = 12 * (good[metric] - bad[metric]) / 35
        assert gate["baseline"] - gate["value"] == pytest.approx(drop)
        assert (gate["verdict"], gate["policy"], gate["reliability"]) == (
            "regressed",
            "tolerance",
            0.95,
        )
        assert gate["resolution"] > 0
        for other in systems[1:]:
            unchanged = gates[f"{other}::regression::{metric}"]
            assert (unchanged["verdict"], unchanged["passed"]) == ("ok", True)
            assert unchanged["value"] == unchanged["baseline"]
    # MRR@10: 12 * 0.5 / 35 = 0.1714 over the tolerance 0.01.
    result.stdout.fnmatch_lines(
        [
            "*FAILED docstrings.retrieval.yaml::bm25::regression::MRR@10: regressed: MRR@10 "
            "dropped 0.1714 > tolerance 0.01 (this run's resolution +-* at 95 %)*"
        ]
    )


def test_one_more_worse_query_is_one_query(pytester: pytest.Pytester) -> None:
    # 6 queries got worse: five explained, the sixth named as one query, not "1 more ... queries".
    make(pytester, ("bm25",))
    write_suite(pytester, suite(12))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    break_top_hits(pytester, "bm25", [0, 2, 4, 6, 8, 10])
    pytester.runpytest("--retrieval-gate")
    gate = regression_gates(pytester)["bm25::regression::MRR@10"]
    assert "1 more worse query not explained here: q10 (-0.5000)" in gate["detail"]


def test_every_worse_query_of_a_regression_is_named(pytester: pytest.Pytester) -> None:
    # 12 queries got worse; five are explained rank by rank, the other seven are still named
    # (in the failure text and the report's "Regressed queries"), not silently left out.
    make(pytester, THREE)
    write_suite(pytester, suite(35))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    break_top_hits(pytester, "bm25", THIRD)
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=15, failed=3)
    gate = regression_gates(pytester)["bm25::regression::MRR@10"]
    # Every broken query falls from 1 to 1/2; the ties keep the suite's order.
    explained = [line.split(":")[0] for line in gate["detail"] if line.startswith("q")]
    assert explained == ["q00", "q03", "q06", "q09", "q12"]
    rest = "q15 (-0.5000), q18 (-0.5000), q21 (-0.5000), q24 (-0.5000), q27 (-0.5000), "
    rest += "q30 (-0.5000), q33 (-0.5000)"
    line = f"7 more worse queries not explained here: {rest}"
    assert line in gate["detail"]
    result.stdout.fnmatch_lines(["q12: MRR@10 1 -> 0.5; *", line])
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert f"- q12: MRR@10 1 -> 0.5; d12 1 -> - (displaced by bm25-f0); e12 3 -> 2\n- {line}\n" in (
        markdown
    )


def test_adding_unchanged_systems_widens_the_resolution_and_changes_no_verdict(
    pytester: pytest.Pytester,
) -> None:
    make(pytester, THREE)
    write_suite(pytester, suite(35))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    break_top_hits(pytester, "bm25", THIRD)
    pytester.runpytest("--retrieval-gate")
    three = regression_gates(pytester)
    make(pytester, SIX)
    (pytester.path / "broken.json").unlink()
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    break_top_hits(pytester, "bm25", THIRD)
    pytester.runpytest("--retrieval-gate")
    six = regression_gates(pytester)
    for name, gate in three.items():
        assert (six[name]["verdict"], six[name]["passed"]) == (gate["verdict"], gate["passed"])
        # 3 blocks -> 6 blocks: the session's delta is shared more ways.
        assert six[name]["resolution"] > gate["resolution"]


def test_an_unchanged_run_passes_and_states_its_resolution(pytester: pytest.Pytester) -> None:
    make(pytester, THREE)
    write_suite(pytester, suite(35))
    saved = pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    result = pytester.runpytest("--retrieval-gate", "--junitxml=junit.xml")
    result.assert_outcomes(passed=18)
    gates = regression_gates(pytester)
    gate = gates["bm25::regression::MRR@10"]
    assert (gate["verdict"], gate["passed"]) == ("ok", True)
    assert gate["detail"][0].startswith(
        "ok: MRR@10: no compared query changed (tolerance 0.01) (this run's resolution +-"
    )
    # Nothing changed: the spread of the drops is 0 and the resolution is its small-sample part,
    # c * sqrt(w / (34 + w)) / sqrt(35), w = c^2 / 4. c is the max-|t| over the block's three
    # metrics (34 df) at the level 1 - 0.95^(1/3) of one of three blocks; drops that do not vary
    # tell nothing of their correlation, so the metrics count as independent: Sidak again,
    # 1 - (1 - level)^(1/3) = 1 - 0.95^(1/9) = 0.0056830 per metric: c = 2.9522870,
    # w = 2.1789996, resolution 0.1224686.
    from retrieval_gate.gates.resolution import block_level, t_quantile

    c = t_quantile(1 - block_level(block_level(0.05, 3), 3) / 2, 34)
    assert c == pytest.approx(2.952287, abs=1e-6)
    assert gate["resolution"] == pytest.approx(c * math.sqrt(c * c / 4 / (34 + c * c / 4) / 35))
    assert gate["resolution"] == pytest.approx(0.1224686, abs=1e-6)
    # The suite's advice is the baseline's: every value of the baseline is the same (1), so it
    # has no spread of its own and its resolution is the pseudo-query's, the figure above.
    assert gate["planned_resolution"] == pytest.approx(0.1224686, abs=1e-6)
    # Wider than the tolerance: said once, by the session that saved the baseline, counted by
    # scope, its widest item named with the advice every later run states, and what would fix
    # it: first the tolerance the baseline's 35 queries resolve. The unchanged run after it,
    # against the same suite and tolerances, does not repeat it.
    needed = gate["queries_needed"]
    assert saved.stdout.str().count("WARNING") == 1
    saved.stdout.fnmatch_lines(
        [
            "WARNING: 9 regression checks resolve more coarsely than the tolerance, so changes "
            "with no real effect may fail (each is listed in the report):",
            "  docstrings (the baseline saved now): 9 at the suite scope; widest: bm25 MRR@10: "
            "+-0.1225 at 95 % against tolerance 0.01: set a tolerance of at least 0.1225 (what "
            f"the baseline's 35 queries resolve), or grow the suite to about {needed:,} queries "
            "for 0.01",
        ]
    )
    assert "WARNING" not in result.stdout.str()
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "### Resolution of the regression checks" in markdown
    assert "**The resolution is wider than the tolerance" not in markdown
    assert (
        "The suite's advice, as when the baseline was saved (a warning only where the suite, a "
        "tolerance or the baseline changes): these checks resolve more coarsely than their "
        "tolerance:\n\n- bm25 MRR@10: +-0.1225 at 95 % against tolerance 0.01: set a tolerance "
        "of at least 0.1225" in markdown
    )
    junit = (pytester.path / "junit.xml").read_text(encoding="utf-8")
    assert '<property name="resolution" value="' in junit
    assert '<property name="reliability" value="0.95"' in junit


def test_a_drop_within_the_tolerance_passes(pytester: pytest.Pytester) -> None:
    make(pytester, THREE)
    write_suite(pytester, suite(35, header="tolerance: {MRR@10: 0.2, R@10: 0.2, nDCG@10: 0.2}"))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    # MRR@10 drops 12 * 0.5 / 35 = 0.171, within 0.2: passes, however wide the resolution.
    break_top_hits(pytester, "bm25", THIRD)
    pytester.runpytest("--retrieval-gate").assert_outcomes(passed=18)
    gate = regression_gates(pytester)["bm25::regression::MRR@10"]
    assert gate["verdict"] == "ok"
    assert gate["detail"][0].startswith(
        "ok: MRR@10 dropped 0.1714 <= tolerance 0.2 (this run's resolution"
    )


def test_the_failure_text_explains_each_regressed_query(pytester: pytest.Pytester) -> None:
    make(pytester, THREE)
    write_suite(pytester, suite(35))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    break_top_hits(pytester, "bm25", THIRD)
    result = pytester.runpytest("--retrieval-gate", "docstrings.retrieval.yaml::bm25")
    # Only bm25's items are collected: one block. The drops of the three metrics move together
    # (correlation 1), so c is one metric's t_{0.975, 34} = 2.032, w = c^2 / 4 = 1.0325;
    # SS = 12 * 0.5^2 - 35 * 0.1714^2 = 1.9714, s = sqrt((1.9714 + 1.0325) / (34 + 1.0325)) =
    # 0.29282. The drops are skewed (12 at 0.5, 23 at 0): m3 = (12 * 0.32857^3 - 23 * 0.17143^3)
    # / 35 = 0.0088514, g = m3 / s^3 = 0.35252, skewness term g (2 c^2 + 1) / (6 sqrt(35)) =
    # 0.09194; resolution (2.032 + 0.0919) * 0.29282 / sqrt(35) = 0.1051.
    # The advice is the baseline's: its three metrics are 1 (or one constant) on every query, so
    # none varies, they count as independent (Sidak: each at 1 - 0.95^(1/3)), c =
    # t_{1 - 0.0084755, 34} = 2.51112, w = 1.57643, and the spread is the pseudo-query's:
    # 2.51112 x sqrt(1.57643 / 35.57643) / sqrt(35) = 0.0893.
    result.stdout.fnmatch_lines(
        [
            lit(
                "MRR@10 regression over suite (docstrings x bm25): FAILED: regressed: 0.8286 vs "
                "baseline 1 (drop 0.1714, tolerance 0.01, this run's resolution +-"
            )
            + "0.1051 at 95 %, n=35)",
            "regressed: MRR@10 dropped 0.1714 > tolerance 0.01 (this run's resolution +-0.1051 "
            "at 95 %)",
            "baseline 1 -> now 0.8286 (drop 0.1714, tolerance 0.01) over 35 shared queries; "
            "12 worse, 0 better",
            "this run's resolution +-0.1051 at 95 % reliability, shared over the session's 1 "
            "suite x system scope (c 2.032): a true drop above 0.1151 fails and a true gain "
            "above 0.0951 passes",
            "coarse: changes with no real effect on MRR@10 will often fail over this suite; set a "
            "tolerance of at least 0.0893 (what the baseline's 35 queries resolve), or grow the "
            "suite to about * queries for 0.01",
            "q00: MRR@10 1 -> 0.5; d0 1 -> - (displaced by bm25-f0); e0 3 -> 2",
        ]
    )
    # The report lists the same queries, the most dropped first, then the seven others by name,
    # then the "stale labels?" line.
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    listed = markdown.split("Regressed queries for MRR@10 (regression):\n\n")[1].split("\n\n")[0]
    lines = listed.splitlines()
    assert lines[-2].startswith("- 7 more worse queries not explained here: q15 (-0.5000), ")
    assert [line.split(":")[0] for line in lines[:-2]] == [
        "- q00",
        "- q03",
        "- q06",
        "- q09",
        "- q12",
    ]
    assert lines[-1].startswith("- stale labels? 12 unjudged documents entered the top 10")


def test_plan_prints_the_resolution_and_runs_nothing(pytester: pytest.Pytester) -> None:
    make(pytester, THREE, extra="resolution = 0.5")
    write_suite(pytester, suite(35))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    result = pytester.runpytest("--retrieval-gate", "--rg-plan")
    assert result.ret == 0
    result.assert_outcomes()
    result.stdout.fnmatch_lines(
        [
            "*retrieval gate plan*",
            "resolution at 95 % over the session's 3 suite x system scopes, from the baseline's "
            "per-query values*",
            "suite*system*metric*queries*tolerance*resolution*for tolerance*max resolution*for it",
            "docstrings*bm25*MRR@10*35*0.01*+-*",
        ]
    )
    # A suite too coarse for the setting is marked in the plan, not a collection error there.
    make(pytester, THREE, extra="resolution = 0.03")
    coarse = pytester.runpytest("--retrieval-gate", "--rg-plan")
    assert coarse.ret == 0
    coarse.stdout.fnmatch_lines(["docstrings*bm25*MRR@10*35*0.01*+-*0.03 (too coarse)*"])
    # The plan is made while collecting: not under xdist, whose controller does not collect.
    pytest.importorskip("xdist")
    parallel = pytester.runpytest("--retrieval-gate", "--rg-plan", "-n", "2")
    assert parallel.ret == pytest.ExitCode.USAGE_ERROR
    parallel.stderr.fnmatch_lines(["*--rg-plan collects in this process: add -n 0 (or drop -n)*"])


def test_a_suite_too_small_for_the_resolution_setting_is_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    make(pytester, THREE, extra="resolution = 0.03")
    write_suite(pytester, suite(35))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*docstrings.retrieval.yaml [[]resolution[]]: MRR@10 over suite (bm25) resolves "
            "+-0.* at 95 % with 35 shared queries, wider than the 'resolution' setting 0.03: it "
            "needs about * queries, or a larger 'resolution' (8 other checks too coarse as "
            "well, none needing more; --rg-plan lists them)"
        ]
    )


def test_a_handful_of_lost_queries_in_a_large_suite_fails_and_says_how_far_to_trust_it(
    pytester: pytest.Pytester,
) -> None:
    from .test_rg_baseline import RETRIEVER, SETTINGS, damage, suite_text

    pytester.makefile(
        ".toml",
        pyproject=SETTINGS.format(extra="").replace(
            'regression_scopes = ["suite", "category"]', ""
        ),
    )
    pytester.makepyfile(gen_app=RETRIEVER)
    pytester.syspathinsert()
    (pytester.path / "topics.retrieval.yaml").write_text(suite_text(160), encoding="utf-8")
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    # Three of 160 queries lose their document: MRR@10 drops 3/160 = 0.01875 > 0.01, and the
    # item fails (the margin rule called this "underpowered" and passed it). One block of one
    # metric: c = t_{0.975, 159} = 1.97500, w = c^2 / 4 = 0.97515; SS = 3 - 160 * 0.01875^2 =
    # 2.94375; s = sqrt((2.94375 + w) / (159 + w)) = 0.15652. Three losses in 160 are skewed
    # drops: m3 = (3 / 160)(1 - 3 / 160)(1 - 6 / 160) = 0.017709, g = m3 / s^3 = 4.618, skewness
    # term g (2 c^2 + 1) / (6 sqrt(160)) = 0.5356; resolution (1.975 + 0.5356) * s / sqrt(160)
    # = 0.031065: wider than the tolerance, and it says so.
    damage(pytester, {3: 12, 50: 12, 77: 12})
    result = pytester.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "regressed: MRR@10 dropped 0.0188 > tolerance 0.01 (this run's resolution +-0.0311 "
            "at 95 %)",
        ]
    )

    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text(encoding="utf-8"))
    (gate,) = [g for g in data["gates"] if "::regression::" in g["nodeid"]]
    assert gate["resolution"] == pytest.approx(0.031065, abs=1e-6)
    # The suite's advice, from the baseline, is a little wider than the tolerance: the item's
    # coarse line names it (not this run's figure), and the pull request repeats no warning
    # (the session that saved the baseline said it).
    assert gate["planned_resolution"] == pytest.approx(0.01219, abs=1e-5)
    (coarse,) = [line for line in gate["detail"] if line.startswith("coarse")]
    assert "set a tolerance of at least 0.0122 (what the baseline's 160 queries resolve)" in coarse
    assert "WARNING" not in result.stdout.str()


def test_the_same_figures_with_and_without_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    make(pytester, SIX)
    write_suite(pytester, suite(35))
    other = pytester.path / "other.retrieval.yaml"
    other.write_text(suite(12).replace("name: docstrings", "name: other"), encoding="utf-8")
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    break_top_hits(pytester, "bm25", THIRD)
    pytester.runpytest("--retrieval-gate")
    serial = regression_gates(pytester)
    result = pytester.runpytest("--retrieval-gate", "-n", "2", "-p", "no:benchmark")
    parallel = regression_gates(pytester)
    # A broken system fails its regression items only under xdist too: bm25's three in each
    # suite (4 of the other suite's 12 topics are in THIRD: MRR@10 drops 4 * 0.5 / 12), every
    # floor (2 suites x 6 systems x 3) and every other system's regression item passes.
    result.assert_outcomes(passed=36 + 36 - 6, failed=6)
    failed = sorted(name for name, g in parallel.items() if not g["passed"])
    assert failed == sorted(
        f"{suite_name}bm25::regression::{m}"
        for suite_name in ("", "other.retrieval.yaml::")
        for m in METRICS
    )
    good, bad = healthy(), broken()
    for metric in METRICS:
        gate = parallel[f"bm25::regression::{metric}"]
        assert gate["baseline"] - gate["value"] == pytest.approx(
            12 * (good[metric] - bad[metric]) / 35
        )
        assert (gate["verdict"], gate["policy"]) == ("regressed", "tolerance")
        for other_system in SIX[1:]:
            unchanged = parallel[f"{other_system}::regression::{metric}"]
            assert (unchanged["verdict"], unchanged["value"]) == ("ok", unchanged["baseline"])
    result.stdout.fnmatch_lines(
        [
            "*FAILED docstrings.retrieval.yaml::bm25::regression::MRR@10: regressed: MRR@10 "
            "dropped 0.1714 > tolerance 0.01 (this run's resolution +-* at 95 %)*"
        ]
    )
    # Two suites x six systems: 12 blocks, known to every worker from collection alone.
    assert len(serial) == 2 * 6 * 3
    assert all("12 suite x system scopes" in g["detail"][2] for g in serial.values())
    strip = {"nodeid"}
    assert json.dumps(
        {k: {f: v for f, v in g.items() if f not in strip} for k, g in sorted(serial.items())}
    ) == json.dumps(
        {k: {f: v for f, v in g.items() if f not in strip} for k, g in sorted(parallel.items())}
    )


def test_the_coarse_resolution_warning_counts_only_the_checks_that_ran(
    pytester: pytest.Pytester,
) -> None:
    # A pull request that edits the tolerances warns of 9 checks (3 systems x 3 metrics); one
    # that -k narrows to one regression item decided one, and one that deselects them all
    # decided none.
    make(pytester, THREE)
    write_suite(pytester, suite(35))
    pytester.runpytest("--retrieval-gate", "--rg-save-baseline")
    write_suite(pytester, suite(35, header="tolerance: {MRR@10: 0.02, R@10: 0.02, nDCG@10: 0.02}"))
    one = pytester.runpytest("--retrieval-gate", "-k", "bm25 and regression and MRR")
    one.assert_outcomes(passed=1)
    one.stdout.fnmatch_lines(
        [
            "WARNING: 1 regression check resolves more coarsely than the tolerance, so changes "
            "with no real effect may fail (each is listed in the report):",
            "  docstrings (tolerance changed since the baseline: MRR@10 0.01 -> 0.02, R@10 0.01 "
            "-> 0.02, nDCG@10 0.01 -> 0.02): 1 at the suite scope; widest: bm25 MRR@10: *",
        ]
    )
    report = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    # The report's list of coarse checks: the one that ran (each line "- system metric: ...").
    listed = report.split("**The resolution is wider than the tolerance", 1)[1].split("\n\n")[1]
    assert [line.split(":")[0] for line in listed.splitlines()] == ["- bm25 MRR@10"]
    none = pytester.runpytest("--retrieval-gate", "-k", "not regression")
    none.assert_outcomes(passed=9)
    assert "WARNING" not in none.stdout.str()
