"""--rg-save-baseline and --rg-baseline end to end: saving, regressions, alignment, safety."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import lit

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate]
systems = ["gen"]
# Category regressions are items here (by default they are diagnostics in the report only).
regression_scopes = ["suite", "category"]
{extra}

[tool.retrieval_gate.system.gen]
retriever = "gen_app:retrieve"
"""

# Query "topic N" has one relevant document, dN, which a healthy retriever ranks first, ahead of
# ten shared fillers. damage.json in the project maps N to how many "spamN-j" documents to put
# ahead of dN, so a test degrades exactly the queries it names, by an amount it can work out.
# The file is read on every call, so in-process reruns see the damage of the moment.
RETRIEVER = """
import json
import pathlib
import re

HERE = pathlib.Path(__file__).parent


def retrieve(query, k):
    if "interrupt" in query:
        raise KeyboardInterrupt
    n = int(re.search(r"[0-9]+", query).group())
    damage_file = HERE / "damage.json"
    damage = json.loads(damage_file.read_text()) if damage_file.exists() else {}
    shift = damage.get(str(n), 0)
    ranking = [f"spam{n}-{j}" for j in range(shift)] + [f"d{n}"] + [f"f{j}" for j in range(10)]
    return [(doc, float(100 - i)) for i, doc in enumerate(ranking)][:k]
"""


def suite_text(
    n: int,
    *,
    name: str = "topics",
    header: str = "",
    text: str = "topic {i}",
    skip: tuple[int, ...] = (),
) -> str:
    """A generated suite: queries t00.. over topics 0..n-1, the first half category alpha."""
    lines = [
        f"name: {name}",
        "k: [1, 5, 10]",
        "gates:",
        "  MRR@10: 0.1",
        "categories:",
        "  alpha: {MRR@10: 0.1}",
        "  beta: {MRR@10: 0.1}",
        header,
        "queries:",
    ]
    for i in range(n):
        if i in skip:
            continue
        lines += [
            f"  - id: t{i:03d}",
            f"    query: {text.format(i=i)}",
            f"    relevant: [d{i}]",
            f"    category: {'alpha' if i < n // 2 else 'beta'}",
        ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def gen(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS.format(extra=""))
    pytester.makepyfile(gen_app=RETRIEVER)
    pytester.syspathinsert()
    return pytester


@pytest.fixture
def margin(gen: pytest.Pytester) -> pytest.Pytester:
    """The project under the margin rule (docs/verdicts.md), whose p-values these tests state."""
    gen.makefile(".toml", pyproject=SETTINGS.format(extra='verdicts = "margin"'))
    return gen


def write(pytester: pytest.Pytester, text: str, name: str = "topics.retrieval.yaml") -> Path:
    path = pytester.path / name
    path.write_text(text, encoding="utf-8")
    return path


def damage(pytester: pytest.Pytester, shifts: dict[int, int]) -> None:
    (pytester.path / "damage.json").write_text(json.dumps(shifts), encoding="utf-8")


def report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (pytester.path / "retrieval-gate-report.json").read_text(encoding="utf-8")
    )
    return data


def regression_gates(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    return {
        g["nodeid"].split("::regression::", 1)[1]: g
        for g in report(pytester)["gates"]
        if "::regression::" in g["nodeid"]
    }


def save(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    result = pytester.runpytest("--retrieval-gate", "--rg-save-baseline", *args)
    assert result.ret == 0, result.stdout.str()
    return result


BASELINE = "retrieval-baseline.json"
REGRESSION_ITEMS = [
    "topics.retrieval.yaml::gen::regression::MRR@10",
    "topics.retrieval.yaml::gen::regression::category:alpha::MRR@10",
    "topics.retrieval.yaml::gen::regression::category:beta::MRR@10",
]


def test_save_then_unchanged_rerun_passes(gen: pytest.Pytester) -> None:
    write(gen, suite_text(40))
    first = save(gen)
    # No baseline yet: only the three floors.
    first.assert_outcomes(passed=3)
    first.stdout.fnmatch_lines([f"*saved retrieval gate baseline: {gen.path / BASELINE}*"])
    saved = json.loads((gen.path / BASELINE).read_text(encoding="utf-8"))
    run = saved["runs"]["topics::gen"]
    assert run["metrics"]["MRR@10"] == 1.0
    assert len(run["queries"]) == 40
    assert run["queries"]["t007"]["relevant_ranks"] == {"d7": 1}
    assert run["queries"]["t007"]["ranking"][:2] == ["d7", "f0"]
    assert set(run["fingerprint"]) >= {"plugin_version", "suite_digest", "metric_definitions"}

    again = gen.runpytest("--retrieval-gate", "-v")
    again.assert_outcomes(passed=6)
    again.stdout.fnmatch_lines([lit(name) + " PASSED*" for name in REGRESSION_ITEMS])
    assert "saved retrieval gate baseline" not in again.stdout.str()
    gates = regression_gates(gen)
    assert gates["MRR@10"]["value"] == gates["MRR@10"]["baseline"] == 1.0
    # Nothing changed: ok, under the default rule, with its resolution stated.
    assert (gates["MRR@10"]["verdict"], gates["MRR@10"]["policy"]) == ("ok", "tolerance")
    assert gates["MRR@10"]["resolution"] > 0
    assert gates["MRR@10"]["n"] == 40


def test_degraded_retriever_fails_the_regressed_scopes_and_explains_them(
    margin: pytest.Pytester,
) -> None:
    write(margin, suite_text(40))
    save(margin)
    # Ten alpha queries lose rank 1 to two spam documents: MRR 1 -> 1/3 on each.
    damage(margin, {i: 2 for i in range(10)})
    before = (margin.path / BASELINE).read_bytes()
    result = margin.runpytest("--retrieval-gate", "-rf")
    # Floors (0.1) still hold; the suite and category:alpha regressions fail, beta passes.
    result.assert_outcomes(passed=4, failed=2)
    # Suite: mean 30/40 + 10/3/40 = 0.8333, drop 0.1667 over 0.01; 10 of 40 worse. Shifted
    # differences x: ten -2/3 + 0.01 = -0.65667, thirty +0.01: T = -6.5667 + 0.3 = -6.2667,
    # sum x^2 = 10 * 0.431211 + 30 * 0.0001 = 4.31511, z = -6.2667 / 2.07728 = -3.0168,
    # p = Phi(z) = 0.001277. The family: suite (40), alpha (20), beta (20) all can reach 0.05 / 3.
    result.stdout.fnmatch_lines(
        [
            "MRR@10 regression over suite (topics x gen): FAILED: regressed: 0.8333 vs baseline 1 "
            "(drop 0.1667, tolerance 0.01, n=40)",
            "most dropped: t000 (-0.6667), t001 (-0.6667), t002 (-0.6667), t003 (-0.6667), "
            "t004 (-0.6667)",
            "regressed: the drop (0.1667) is significantly larger than the tolerance (0.01)",
            "baseline 1 -> now 0.8333 (drop 0.1667, tolerance 0.01) over 40 shared queries; "
            "10 worse, 0 better",
            "paired test of the drop against the tolerance (sign-flip, normal approximation): "
            "p(drop > tolerance) = 0.001277, p(drop < tolerance) = 0.9987, each at level 0.01667 "
            "(alpha 0.05 / 3 regression items)",
            "smallest detectable drop (80 % power): 0.01",
            "6 of 40 queries must fall to 0 to fail",
            "t000: MRR@10 1 -> 0.3333; d0 1 -> 3 (displaced by spam0-0, spam0-1)",
            "t001: MRR@10 1 -> 0.3333; d1 1 -> 3 (displaced by spam1-0, spam1-1)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            lit(
                "MRR@10 regression over category:alpha (topics x gen): FAILED: regressed: 0.6667 "
                "vs baseline 1 (drop 0.3333, tolerance 0.01, n=20)"
            ),
            "t004: MRR@10 1 -> 0.3333; d4 1 -> 3 (displaced by spam4-0, spam4-1)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            lit("FAILED topics.retrieval.yaml::gen::regression::MRR@10 - ") + "*",
            lit("FAILED topics.retrieval.yaml::gen::regression::category:alpha::MRR@10 - ") + "*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    # Only five queries are explained per gate.
    assert "t005: MRR@10" not in result.stdout.str()

    gates = regression_gates(margin)
    assert {k: g["passed"] for k, g in gates.items()} == {
        "MRR@10": False,
        "category:alpha::MRR@10": False,
        "category:beta::MRR@10": True,
    }
    alpha = gates["category:alpha::MRR@10"]
    assert alpha["value"] == pytest.approx(10 / 20 + 10 / 3 / 20)
    assert (alpha["n"], alpha["degraded"], alpha["improved"]) == (20, 10, 0)
    # x: ten -0.65667, ten +0.01: T = -6.4667, sum x^2 = 4.31311, z = -3.1138, Phi(z) = 0.0009236.
    assert alpha["p_value"] == pytest.approx(0.0009236, abs=1e-7)
    assert alpha["p_adjusted"] == pytest.approx(3 * alpha["p_value"])
    assert alpha["verdict"] == "regressed"
    assert gates["category:beta::MRR@10"]["p_adjusted"] == 1.0

    markdown = (margin.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "### `gen` against the baseline" in markdown
    assert "Compared on 40 queries shared with `retrieval-baseline.json`." in markdown
    assert "Regressed queries for MRR@10 (regression category:alpha):" in markdown
    assert "- t003: MRR@10 1 -> 0.3333; d3 1 -> 3 (displaced by spam3-0, spam3-1)" in markdown
    assert "**REGRESSED**" in markdown
    json_run = report(margin)["runs"][0]["baseline"]
    assert json_run["metrics"]["MRR@10"]["passed"] is False
    assert json_run["metrics"]["MRR@10"]["degraded"] == 10
    assert json_run["metrics"]["category:beta::MRR@10"]["passed"] is True
    # Failing without --rg-save-baseline leaves the accepted baseline as it was, byte for byte.
    assert (margin.path / BASELINE).read_bytes() == before


def test_dropped_document_is_explained_as_not_retrieved(gen: pytest.Pytester) -> None:
    write(gen, suite_text(40))
    save(gen)
    # Twelve alpha queries push dN to rank 13, out of the top 10: MRR@10 1 -> 0.
    damage(gen, {i: 12 for i in range(12)})
    result = gen.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(
        ["t000: MRR@10 1 -> 0; d0 1 -> 13 (displaced by spam0-0, spam0-1, spam0-2 and 7 more)"]
    )


def test_small_degradation_within_tolerance_passes(margin: pytest.Pytester) -> None:
    write(margin, suite_text(40, header="tolerance: {MRR@10: 0.3}"))
    save(margin)
    # Ten alpha queries drop to rank 2 (MRR 0.5): suite drop 10 * 0.5 / 40 = 0.125, alpha drop
    # 10 * 0.5 / 20 = 0.25, both within 0.3. Suite: x = ten -0.2, thirty +0.3, T = 7, sum x^2 =
    # 3.1, z = 7 / 1.7607 = 3.976: p(within) = Phi(-3.976) = 3.5e-5, ok. Alpha: ten -0.2, ten +0.3,
    # T = 1, sum x^2 = 1.3, z = 0.877: p(within) = 0.19, underpowered (passes with a warning).
    damage(margin, {i: 1 for i in range(10)})
    margin.runpytest("--retrieval-gate").assert_outcomes(passed=6)
    gates = regression_gates(margin)
    assert gates["MRR@10"]["baseline"] - gates["MRR@10"]["value"] == pytest.approx(0.125)
    assert gates["category:alpha::MRR@10"]["value"] == pytest.approx(0.75)
    assert gates["MRR@10"]["verdict"] == "ok"
    assert gates["MRR@10"]["p_within"] == pytest.approx(3.5e-5, rel=0.02)
    assert gates["category:alpha::MRR@10"]["verdict"] == "underpowered"
    assert gates["category:alpha::MRR@10"]["p_within"] == pytest.approx(0.1902, abs=1e-4)
    assert gates["category:beta::MRR@10"]["verdict"] == "ok"
    assert gates["category:alpha::MRR@10"]["tolerance"] == 0.3


def test_settings_tolerance_applies_and_the_suite_overrides_it(gen: pytest.Pytester) -> None:
    gen.makefile(".toml", pyproject=SETTINGS.format(extra='tolerance = { "MRR@10" = 0.3 }'))
    write(gen, suite_text(40))
    save(gen)
    damage(gen, {i: 1 for i in range(10)})
    assert gen.runpytest("--retrieval-gate").ret == pytest.ExitCode.OK
    assert regression_gates(gen)["MRR@10"]["tolerance"] == 0.3
    # The suite's own tolerance wins over the setting; the queries are unchanged, so the
    # baseline is still comparable.
    write(gen, suite_text(40, header="tolerance: {MRR@10: 0.01}"))
    gen.runpytest("--retrieval-gate").assert_outcomes(passed=4, failed=2)
    assert regression_gates(gen)["MRR@10"]["tolerance"] == 0.01


def test_noise_on_a_handful_of_queries_in_a_large_suite_passes(margin: pytest.Pytester) -> None:
    write(margin, suite_text(160))
    save(margin)
    # Three queries lose their relevant document entirely, two gain nothing: the suite mean drops
    # 3/160 = 0.019 and category alpha's 3/80 = 0.0375, both beyond the default tolerance 0.01.
    # Suite: x = three -0.99, 157 +0.01: T = -1.4, sum x^2 = 2.956, z = -1.4 / 1.7193 = -0.8143,
    # p = Phi(z) = 0.2077; nor is the drop shown within 0.01 (p 0.79): underpowered, passes.
    # Three queries moving is what noise looks like, and the gate does not fail on it.
    damage(margin, {3: 12, 50: 12, 77: 12})
    margin.runpytest("--retrieval-gate").assert_outcomes(passed=6)
    gates = regression_gates(margin)
    suite = gates["MRR@10"]
    assert suite["baseline"] - suite["value"] == pytest.approx(3 / 160)
    assert suite["p_value"] == pytest.approx(0.2077, abs=1e-4)
    assert (suite["verdict"], suite["passed"]) == ("underpowered", True)
    # Alpha (80): three -0.99, 77 +0.01: T = -2.2, sum x^2 = 2.948, z = -1.2813, p = 0.1000, x 3.
    alpha = gates["category:alpha::MRR@10"]
    assert alpha["baseline"] - alpha["value"] == pytest.approx(3 / 80)
    assert alpha["p_adjusted"] == pytest.approx(0.3000, abs=3e-4)


def test_edited_suite_compares_on_shared_queries_and_reports_the_rest(
    gen: pytest.Pytester,
) -> None:
    write(gen, suite_text(40))
    save(gen)
    # t005 reworded (and now retrieved badly: not a regression, it is a different query),
    # t039 removed, t040 added.
    edited = suite_text(41, skip=(39,)).replace("query: topic 5\n", "query: about topic 5\n")
    write(gen, edited)
    damage(gen, {5: 12})
    result = gen.runpytest("--retrieval-gate", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(
        ["*gen vs baseline: 38 shared queries (1 added: t040; 1 removed: t039; 1 edited: t005)"]
    )
    base = report(gen)["runs"][0]["baseline"]
    assert (base["shared"], base["added"], base["removed"], base["edited"]) == (
        38,
        ["t040"],
        ["t039"],
        ["t005"],
    )
    gates = regression_gates(gen)
    assert gates["MRR@10"]["n"] == 38
    assert gates["MRR@10"]["value"] == 1.0
    markdown = (gen.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "Compared on 38 queries shared with `retrieval-baseline.json`." in markdown
    assert "- 1 added (not compared): `t040`" in markdown
    assert "- 1 removed (not compared): `t039`" in markdown
    assert "- 1 edited (not compared): `t005`" in markdown


def test_every_query_changed_is_not_comparable(gen: pytest.Pytester) -> None:
    write(gen, suite_text(20))
    save(gen)
    write(gen, suite_text(20, text="about topic {i}"))
    damage(gen, {i: 12 for i in range(20)})
    result = gen.runpytest("--retrieval-gate", "-rs")
    # The floors fail (MRR 0 under 0.1); the regressions are skipped, not failed.
    result.assert_outcomes(failed=3, skipped=3)
    result.stdout.fnmatch_lines(
        [lit("SKIPPED [3] ") + "*baseline not comparable: no query is unchanged since the baseline"]
    )
    assert "regression over" not in result.stdout.str()
    base = report(gen)["runs"][0]["baseline"]
    assert base["comparable"] is False
    assert base["reason"] == "no query is unchanged since the baseline"
    markdown = (gen.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert (
        "**Baseline not comparable**: no query is unchanged since the baseline "
        "(`retrieval-baseline.json`)." in markdown
    )


def test_changed_gain_is_not_comparable(gen: pytest.Pytester) -> None:
    write(gen, suite_text(20))
    save(gen)
    write(gen, suite_text(20, header="gain: exponential"))
    result = gen.runpytest("--retrieval-gate", "-rs")
    result.assert_outcomes(passed=3, skipped=3)
    result.stdout.fnmatch_lines(
        [
            lit("SKIPPED [3] ")
            + "*baseline not comparable: gain changed from 'linear' to 'exponential'"
        ]
    )


def test_stopping_early_leaves_the_baseline_unchanged(gen: pytest.Pytester) -> None:
    write(gen, suite_text(40))
    save(gen)
    before = (gen.path / BASELINE).read_bytes()
    # The floors hold, the first regression item fails and -x stops the session there.
    damage(gen, {i: 2 for i in range(10)})
    result = gen.runpytest("--retrieval-gate", "-x")
    result.assert_outcomes(passed=3, failed=1)
    assert (gen.path / BASELINE).read_bytes() == before


def test_collection_error_leaves_the_baseline_unchanged_even_when_saving(
    gen: pytest.Pytester,
) -> None:
    # The subprocess may import another checkout of the plugin: only settings every version knows.
    gen.makefile(
        ".toml",
        pyproject=SETTINGS.format(extra="").replace(
            'regression_scopes = ["suite", "category"]', ""
        ),
    )
    write(gen, suite_text(40))
    save(gen)
    before = (gen.path / BASELINE).read_bytes()
    damage(gen, {i: 12 for i in range(20)})
    write(gen, "queries: [{id: a, query: x}]\n", name="broken.retrieval.yaml")
    result = gen.runpytest("--retrieval-gate", "--rg-save-baseline")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*broken.retrieval.yaml*"])
    assert "saved retrieval gate baseline" not in result.stdout.str()
    assert (gen.path / BASELINE).read_bytes() == before


def test_keyboard_interrupt_leaves_the_baseline_unchanged_even_when_saving(
    gen: pytest.Pytester,
) -> None:
    write(gen, suite_text(40))
    save(gen)
    before = (gen.path / BASELINE).read_bytes()
    damage(gen, {i: 12 for i in range(20)})
    # "a" runs first and completes (its record reaches the session); "b" is interrupted.
    write(gen, suite_text(4, name="a"), name="a.retrieval.yaml")
    write(gen, suite_text(4, name="b", text="interrupt {i}"), name="b.retrieval.yaml")
    # In this process: the session's own handling of the interrupt is what is checked, so
    # pytester is told not to re-raise the KeyboardInterrupt into this session afterwards.
    result = gen.runpytest_inprocess(
        "--retrieval-gate", "--rg-save-baseline", no_reraise_ctrlc=True
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    # The session had a finished run to save (its report was written), and did not save it.
    result.stdout.fnmatch_lines(["*generated retrieval gate report*"])
    assert "saved retrieval gate baseline" not in result.stdout.str()
    assert (gen.path / BASELINE).read_bytes() == before


def test_failing_run_saved_on_request_replaces_only_its_runs(gen: pytest.Pytester) -> None:
    write(gen, suite_text(40))
    write(gen, suite_text(10, name="other"), name="other.retrieval.yaml")
    save(gen)
    first = json.loads((gen.path / BASELINE).read_text(encoding="utf-8"))
    damage(gen, {i: 2 for i in range(10)})
    # The user asks to accept this run although its regressions fail; only "topics" is run.
    result = gen.runpytest("--retrieval-gate", "--rg-save-baseline", "topics.retrieval.yaml")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(["*saved retrieval gate baseline*"])
    second = json.loads((gen.path / BASELINE).read_text(encoding="utf-8"))
    assert second["runs"]["other::gen"] == first["runs"]["other::gen"]
    assert second["runs"]["topics::gen"]["queries"]["t000"]["relevant_ranks"] == {"d0": 3}
    # Accepted: the next run compares against it and passes its regression items; the history
    # still holds the first baseline, so the slow-drift item (docs/baselines.md) fails.
    result = gen.runpytest("--retrieval-gate", "topics.retrieval.yaml")
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(["FAILED topics.retrieval.yaml::gen::history-drift::MRR@10*"])
    # "other" (topics 0-9, all damaged now) still compares against its kept baseline: every
    # query fell from 1 to 1/3, so the suite and both categories dropped 2/3 > 0.01 and fail.
    result = gen.runpytest("--retrieval-gate", "other.retrieval.yaml")
    result.assert_outcomes(passed=3, failed=3)
    assert [g for g, v in regression_gates(gen).items() if not v["passed"]] == [
        "MRR@10",
        "category:alpha::MRR@10",
        "category:beta::MRR@10",
    ]


def test_corrupt_baseline_is_a_usage_error_naming_the_file(gen: pytest.Pytester) -> None:
    write(gen, suite_text(10))
    (gen.path / BASELINE).write_text('{"version": 1, "runs": {"topics::gen": ', encoding="utf-8")
    result = gen.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {gen.path / BASELINE}: corrupt baseline (invalid JSON at line 1, column *"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_corrupt_baseline_is_replaced_when_saving(gen: pytest.Pytester) -> None:
    # The corrupt-baseline error says to save a new one: that must work for a baseline the
    # plugin wrote (here cut short); a file that is not one is never written over.
    write(gen, suite_text(10))
    (gen.path / BASELINE).write_text(
        '{\n "version": 1,\n "generator": "pytest-retrieval-gate 0.1.0",\n "runs": {"topics::gen',
        encoding="utf-8",
    )
    result = gen.runpytest("--retrieval-gate", "--rg-save-baseline")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            f"replaced an unreadable baseline: {gen.path / BASELINE}: corrupt baseline *",
            "*saved retrieval gate baseline*",
        ]
    )
    data = json.loads((gen.path / BASELINE).read_text(encoding="utf-8"))
    assert list(data["runs"]) == ["topics::gen"]


def test_a_corrupt_file_not_written_by_the_plugin_is_never_replaced(gen: pytest.Pytester) -> None:
    write(gen, suite_text(10))
    (gen.path / BASELINE).write_text("{broken", encoding="utf-8")
    result = gen.runpytest("--retrieval-gate", "--rg-save-baseline")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --rg-baseline {gen.path / BASELINE} exists and is not a JSON file of this *"]
    )
    assert (gen.path / BASELINE).read_text(encoding="utf-8") == "{broken"


def test_baseline_with_a_mangled_query_is_a_usage_error(gen: pytest.Pytester) -> None:
    write(gen, suite_text(10))
    save(gen)
    data = json.loads((gen.path / BASELINE).read_text(encoding="utf-8"))
    del data["runs"]["topics::gen"]["queries"]["t003"]["metrics"]
    (gen.path / BASELINE).write_text(json.dumps(data), encoding="utf-8")
    result = gen.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {gen.path / BASELINE} [topics::gen query t003]: "
            "corrupt baseline: query has no 'metrics' dict; restore it from version control or "
            "save a new one with --rg-save-baseline"
        ]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("where", ["query", "run"])
def test_a_metric_value_outside_its_bounds_is_refused_in_one_line(
    gen: pytest.Pytester, where: str
) -> None:
    write(gen, suite_text(10))
    save(gen)
    data = json.loads((gen.path / BASELINE).read_text(encoding="utf-8"))
    run = data["runs"]["topics::gen"]
    # A hand edit that would make every later run look like a drop of 4.
    (run["queries"]["t003"] if where == "query" else run)["metrics"]["P@10"] = 5.0
    (gen.path / BASELINE).write_text(json.dumps(data), encoding="utf-8")
    result = gen.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    entry = "topics::gen query t003" if where == "query" else "topics::gen"
    assert [x for x in result.stderr.lines if x.startswith("ERROR: ")] == [
        f"ERROR: {gen.path / BASELINE} [{entry}]: corrupt baseline: P@10 of suite 'topics', "
        "system 'gen' is 5.0, outside its bounds [0, 1]; restore it from version control "
        "or save a new one with --rg-save-baseline"
    ]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    # The advice, followed: saving replaces the file (the plugin's own), and the next run passes.
    save(gen)
    assert gen.runpytest("--retrieval-gate").ret == pytest.ExitCode.OK


def test_the_advice_for_a_file_not_written_by_the_plugin_works_when_followed_literally(
    gen: pytest.Pytester,
) -> None:
    import re
    import shlex
    import shutil

    write(gen, suite_text(10))
    (gen.path / BASELINE).write_text("{broken", encoding="utf-8")
    result = gen.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in result.stderr.lines if x.startswith("ERROR: ")]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    # "... move it away (mv PATH PATH.bad) and save a new one with --rg-save-baseline"
    found = re.search(
        r"move it away \((mv [^)]*)\) and save a new one with (--rg-save-baseline)$", line
    )
    assert found is not None, line
    _, source, target = shlex.split(found.group(1))
    shutil.move(source, target)
    result = gen.runpytest("--retrieval-gate", found.group(2))
    assert result.ret == pytest.ExitCode.OK
    assert (gen.path / f"{BASELINE}.bad").read_text(encoding="utf-8") == "{broken"
    assert gen.runpytest("--retrieval-gate").ret == pytest.ExitCode.OK


def test_rg_baseline_path_is_honoured(gen: pytest.Pytester) -> None:
    write(gen, suite_text(20))
    result = save(gen, "--rg-baseline", "accepted/base.json")
    custom = gen.path / "accepted" / "base.json"
    result.stdout.fnmatch_lines([f"*saved retrieval gate baseline: {custom}*"])
    assert custom.exists()
    assert not (gen.path / BASELINE).exists()
    # Compared only when pointed at it.
    gen.runpytest("--retrieval-gate").assert_outcomes(passed=3)
    gen.runpytest("--retrieval-gate", "--rg-baseline", str(custom)).assert_outcomes(passed=6)


def test_saving_under_xdist_writes_the_same_baseline(gen: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    write(gen, suite_text(30))
    write(gen, suite_text(12, name="other"), name="other.retrieval.yaml")
    damage(gen, {1: 2, 20: 12})
    save(gen, "--rg-baseline", "serial.json")
    save(gen, "--rg-baseline", "parallel.json", "-n", "2", "-p", "no:benchmark")
    serial = json.loads((gen.path / "serial.json").read_text(encoding="utf-8"))
    parallel = json.loads((gen.path / "parallel.json").read_text(encoding="utf-8"))
    assert list(parallel["runs"]) == list(serial["runs"]) == ["other::gen", "topics::gen"]
    for key, run in serial["runs"].items():
        assert parallel["runs"][key]["queries"] == run["queries"]
        assert parallel["runs"][key]["metrics"] == run["metrics"]
        assert parallel["runs"][key]["fingerprint"] == run["fingerprint"]
    assert serial["runs"]["topics::gen"]["queries"]["t020"]["relevant_ranks"] == {"d20": 13}
    # The baseline holds no timings, so the files are identical.
    assert (gen.path / "parallel.json").read_bytes() == (gen.path / "serial.json").read_bytes()


def test_metric_named_only_by_a_tolerance_is_compared(gen: pytest.Pytester) -> None:
    # nDCG@20 is not among the cutoffs [1, 5, 10]; the tolerance alone creates its regression item.
    write(gen, suite_text(40, header="tolerance: {nDCG@20: 0.01}"))
    save(gen)
    damage(gen, {i: 2 for i in range(10)})
    result = gen.runpytest("--retrieval-gate")
    gate = regression_gates(gen)["nDCG@20"]
    assert "not_compared" not in gate, gate["not_compared"]
    assert gate["n"] == 40
    result.assert_outcomes(passed=4, failed=3)
