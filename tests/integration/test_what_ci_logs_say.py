"""What a team reads on a pull request, in a project of three kinds in one folder: a ranking suite
with a coarse category and a weaker candidate system with its own floors, a second ranking suite
whose corpus lost relevant documents, an ontology suite over the tiny OBO fixture and a pair suite
whose model changed. Assertions are on the lines a user reads: one resolution figure per item,
the same in the failure text, the summary, the JSON and ``--rg-plan``'s plan; no figure beyond a
[0, 1] metric's range and each scope named; the stale labels listed at once while the other
suites run; the model change named old -> new; each system judged by its own floors; a deltas
plot for each regressed metric. Everything runs on hand-made retrievers and an embedder at set
angles, so it takes seconds."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest

from .conftest import lit
from .test_mixed_project import CASES, ONTOLOGY, TINY
from .test_pair_suites import ANGLES, CONFTEST, PAIRS

pytest.importorskip("pronto")

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate]
regression_scopes = ["suite", "category"]

[tool.retrieval_gate.system.keyword]
retriever = "ci_app:{keyword}"

[tool.retrieval_gate.system.weak]
retriever = "ci_app:weak"

[tool.retrieval_gate.system.terms]
retriever = "mixed_app:terms"

[tool.retrieval_gate.system.angles]
embedder = "angles"
model = "{model}"
index = "exact"
"""

# Twelve documents, one per query. ``keyword`` finds each; ``keyword_v2`` (the change under
# review) lost the words of d0 and d1; ``weak`` (the candidate) finds only the even ones.
APP = """
DOCS = {f"d{i}.md": f"alpha{i} words" for i in range(12)}
CHANGED = DOCS | {"d0.md": "nothing", "d1.md": "nothing"}


def _overlap(query, docs, k):
    words = set(query.split())
    scored = {doc: float(len(words & set(text.split()))) for doc, text in docs.items()}
    return sorted(((d, s) for d, s in scored.items() if s > 0), key=lambda x: (-x[1], x[0]))[:k]


def keyword(query, k):
    return _overlap(query, DOCS, k)


def keyword_v2(query, k):
    return _overlap(query, CHANGED, k)


def weak(query, k):
    return [] if int(query.removeprefix("alpha")) % 2 else _overlap(query, DOCS, k)
"""

QUERIES = "".join(
    f"  - {{id: q{i}, query: alpha{i}, relevant: [d{i}.md], "
    f"category: {'rare' if i >= 9 else 'common'}}}\n"
    for i in range(12)
)

# The weaker candidate keeps its own floors; the suite's apply to keyword. Three rare queries.
DOCS_SUITE = f"""name: docs
systems: [keyword, weak]
reference: weak
corpus: corpus
k: [3]
gates: {{Hit@3: 0.8}}
categories:
  rare: {{Hit@3: 0.5}}
system_floors:
  weak: {{gates: {{Hit@3: 0.3}}, categories: {{rare: {{Hit@3: 0.3}}}}}}
queries:
{QUERIES}"""

FAQ_SUITE = """name: faq
systems: [keyword]
corpus: faq-corpus
k: [3]
gates: {Hit@3: 0.5}
queries:
  - {id: f5, query: alpha5, relevant: [d5.md]}
  - {id: f6, query: alpha6, relevant: [d6.md]}
  - {id: f7, query: alpha7, relevant: [d7.md]}
"""

PAIRS_SUITE = (
    "name: sim\nkind: pairs\nsystems: angles\ngates: {spearman: 0.1}\n"
    "tolerance: {spearman: 0.01}\npairs:\n" + "".join(f"  - [{a}, {b}, {g}]\n" for a, b, g in PAIRS)
)

MIXED_APP = """
TERMS = {"kurzer Arm": ["T:0000008", "T:0000007"], "Mikrozephalie": ["T:0000010"]}


def terms(query, k):
    found = TERMS.get(query, [])
    return [(term, 1.0 - i / 10) for i, term in enumerate(found)][:k]
"""


def _settings(pytester: pytest.Pytester, keyword: str, model: str) -> None:
    text = SETTINGS.replace("{keyword}", keyword).replace("{model}", model)
    (pytester.path / "pyproject.toml").write_text(text, encoding="utf-8")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    _settings(pytester, "keyword", "angles.json")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(ci_app=APP, mixed_app=MIXED_APP)
    pytester.syspathinsert()
    (pytester.path / "angles.json").write_text(json.dumps(ANGLES))
    # The new model: the truck far from the car, the sea near the dog: two pairs out of order.
    (pytester.path / "angles-v2.json").write_text(
        json.dumps(ANGLES | {"a truck": 170.0, "the sea": 45.0})
    )
    shutil.copy(TINY, pytester.path / "tiny.obo")
    (pytester.path / "cases").mkdir()
    (pytester.path / "cases" / "phentrieve-cases.json").write_text(json.dumps(CASES))
    for folder in ("corpus", "faq-corpus"):
        (pytester.path / folder).mkdir()
        for i in range(12):
            (pytester.path / folder / f"d{i}.md").write_text(f"alpha{i} words")
    for name, text in (
        ("docs", DOCS_SUITE),
        ("faq", FAQ_SUITE),
        ("terms", ONTOLOGY),
        ("sim", PAIRS_SUITE),
    ):
        (pytester.path / f"{name}.retrieval.yaml").write_text(text, encoding="utf-8")
    return pytester


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (pytester.path / "retrieval-gate-report.json").read_text(encoding="utf-8")
    )
    return data


def _junit_properties(pytester: pytest.Pytester, classname: str, name: str) -> set[tuple[str, str]]:
    import xml.etree.ElementTree as ET

    root = ET.parse(pytester.path / "junit.xml").getroot()
    (case,) = [
        c for c in root.iter("testcase") if (c.get("classname"), c.get("name")) == (classname, name)
    ]
    return {(p.get("name", ""), p.get("value", "")) for p in case.iter("property")}


def _gate(data: dict[str, Any], nodeid: str) -> dict[str, Any]:
    (found,) = [g for g in data["gates"] if g["nodeid"] == nodeid]
    gate: dict[str, Any] = found
    return gate


def test_a_pull_request_with_a_coarse_category_a_changed_model_and_a_deleted_document(
    project: pytest.Pytester,
) -> None:
    project.runpytest("--retrieval-gate", "--rg-save-baseline").assert_outcomes(passed=7)
    # The change under review: keyword_v2, the new pair model, two documents deleted.
    _settings(project, "keyword_v2", "angles-v2.json")
    for doc in ("d5.md", "d6.md"):
        (project.path / "faq-corpus" / doc).unlink()

    plan = project.runpytest("--retrieval-gate", "--rg-plan")
    plan_text = plan.stdout.str()
    assert "these are the suite's advice, the same in every run against this baseline" in plan_text
    ((planned, planned_needed),) = re.findall(
        r"^docs\s+keyword\s+Hit@3\s+12\s+0\.01\s+\+-(\S+)\s+(\S+)", plan_text, re.M
    )
    ((weak_planned, weak_needed),) = re.findall(
        r"^docs\s+weak\s+Hit@3\s+12\s+0\.01\s+\+-(\S+)\s+(\S+)", plan_text, re.M
    )

    result = project.runpytest("--retrieval-gate", "--rg-plots", "plots", "--junitxml=junit.xml")
    text = result.stdout.str()
    data = _report(project)
    # docs: 4 floors and 4 regression items (keyword fails its Hit@3 regression); faq: its two
    # items fail on the stale labels; sim: the run item passes, the regression fails; terms: 2.
    result.assert_outcomes(passed=10, failed=4)
    failed = {line.split(" ")[1] for line in result.outlines if line.startswith("FAILED ")}
    assert failed == {
        "docs.retrieval.yaml::keyword::regression::Hit@3",
        "faq.retrieval.yaml::keyword::suite::Hit@3",
        "faq.retrieval.yaml::keyword::regression::Hit@3",
        "sim.retrieval.yaml::angles::regression::spearman",
    }

    # The stale labels: one error listing both missing ids with their queries, at faq's items
    # only; every other suite ran and the report was written, faq marked as failed.
    stale = (
        "faq.retrieval.yaml [queries[0] (id f5) and 1 more]: 2 relevant ids of 2 queries not in "
        "corpus *faq-corpus (f5: d5.md; f6: d6.md); fix the labels, or count them as misses "
        "with 'missing_relevant: miss'"
    )
    result.stdout.fnmatch_lines(["*" + lit(stale)])
    assert {run["suite"] for run in data["runs"]} == {"docs", "terms-de", "sim"}
    assert [e["suite"] for e in data["errors"]] == ["faq"]
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "## Runs that failed" in markdown
    assert "- `faq` x `keyword`: " in markdown and "(f5: d5.md; f6: d6.md)" in markdown
    result.stdout.fnmatch_lines(["run failed: faq x keyword: *(f5: d5.md; f6: d6.md)*"])

    # Each system judged by its own floors: the suite's 0.8 for keyword, weak's own 0.3.
    weak = _gate(data, "docs.retrieval.yaml::weak::suite::Hit@3")
    assert (weak["value"], weak["threshold"], weak["passed"]) == (0.5, 0.3, True)
    keyword = _gate(data, "docs.retrieval.yaml::keyword::suite::Hit@3")
    # keyword_v2 finds 10 of 12: 0.8333 >= 0.8.
    assert (keyword["value"], keyword["threshold"], keyword["passed"]) == (10 / 12, 0.8, True)
    # The rare category too: weak finds q10 of q9..q11, 1 / 3 >= its own 0.3 (the suite's 0.5
    # would fail it); keyword keeps the suite's 0.5 and finds all three.
    weak_rare = _gate(data, "docs.retrieval.yaml::weak::category:rare::Hit@3")
    assert (weak_rare["value"], weak_rare["threshold"], weak_rare["passed"]) == (1 / 3, 0.3, True)
    keyword_rare = _gate(data, "docs.retrieval.yaml::keyword::category:rare::Hit@3")
    assert (keyword_rare["value"], keyword_rare["threshold"]) == (1.0, 0.5)

    # The regressed item: Hit@3 dropped 2 / 12 = 0.1667. This run's figure, and the same words,
    # in the failure text and the JSON; its advice is the plan's, from the baseline, and the
    # report's "from the baseline".
    item = _gate(data, "docs.retrieval.yaml::keyword::regression::Hit@3")
    epsilon, needed = item["resolution"], item["queries_needed"]
    shown = f"{epsilon:.4f}".rstrip("0").rstrip(".")
    assert item["planned_resolution"] == pytest.approx(float(planned), abs=5e-5)
    assert needed == int(planned_needed.replace(",", ""))
    # weak did not change: its drops show no spread beyond the baseline's, so the run's figures
    # are the plan's, the queries its tolerance needs included.
    weak_item = _gate(data, "docs.retrieval.yaml::weak::regression::Hit@3")
    assert weak_item["planned_resolution"] == pytest.approx(float(weak_planned), abs=5e-5)
    assert weak_item["queries_needed"] == int(weak_needed.replace(",", ""))
    advice = (
        f"set a tolerance of at least {planned} (what the baseline's 12 queries resolve), or "
        f"grow the suite to about {needed:,} queries for 0.01"
    )
    result.stdout.fnmatch_lines(
        [
            "regressed: Hit@3 dropped 0.1667 > tolerance 0.01 (this run's resolution +-"
            + shown
            + " at 95 %)",
            "baseline 1 -> now 0.8333 (drop 0.1667, tolerance 0.01) over 12 shared queries; "
            "2 worse, 0 better",
            "changed since the baseline: system: retriever 'ci_app:keyword' -> 'ci_app:keyword_v2'",
            "coarse: changes with no real effect on Hit@3 will often fail over this suite; "
            + advice,
        ]
    )
    # JUnit XML carries the same figure as a property of the item.
    assert _junit_properties(project, "docs_retrieval_yaml.keyword.regression", "Hit@3") >= {
        ("resolution", str(epsilon)),
        ("tolerance", "0.01"),
        ("verdict", "regressed"),
    }
    # The summary: the change named where CI logs are read, and one warning block for the
    # session, counted by suite and scope, its widest suite-scope item with the same figure.
    result.stdout.fnmatch_lines(
        [
            "  keyword vs baseline: system changed since the baseline: retriever "
            "'ci_app:keyword' -> 'ci_app:keyword_v2'",
            "  angles vs baseline: system changed since the baseline: model 'angles.json' -> "
            "'angles-v2.json'",
        ]
    )
    # The suites and their tolerances are the baseline's: the coarse advice is the one said
    # when the baseline was saved, not warned again (the change is a system's, not the suite's).
    assert "WARNING" not in text
    plan.stdout.fnmatch_lines(
        [
            "WARNING: * regression checks resolve more coarsely than the tolerance, so changes "
            "with no real effect may fail (each is listed in the report):",
            "  docs (--rg-plan): 2 in categories, 2 at the suite scope (2 resolving no drop); "
            f"widest: weak Hit@3: +-{weak_planned} at 95 % against tolerance 0.01: set a "
            f"tolerance of at least {weak_planned} (what the baseline's 12 queries resolve), or "
            f"grow the suite to about {weak_needed} queries for 0.01",
        ]
    )

    # The coarse category: three queries resolve no drop of a [0, 1] metric, said in words;
    # no figure above the range anywhere a user reads, and no "-0.0000".
    rare = _gate(data, "docs.retrieval.yaml::keyword::regression::category:rare::Hit@3")
    assert rare["resolution"] >= 1.0 and rare["queries_needed"] is None
    assert (
        "this run's resolution: with 3 queries category:rare cannot resolve any drop of Hit@3 "
        "at 95 % reliability" in "\n".join(rare["detail"])
    )
    # Every resolution or suggested tolerance a user reads, in the terminal, the plan, the
    # markdown and the JSON's details: within its metric's range (width 1; 2 for a correlation).
    details = "\n".join(d for g in data["gates"] for d in g["detail"])
    figures = re.compile(r"(?:\+-|tolerance of at least )(\d[\d,]*(?:\.\d+)?)")
    for output in (text, plan_text, markdown, details):
        for line in output.splitlines():
            width = 2.0 if "spearman" in line or "pearson" in line else 1.0
            for figure in figures.findall(line):
                assert float(figure.replace(",", "")) <= width, f"beyond the range: {line}"
        assert "-0.0000" not in output
    assert figures.findall(plan_text) and figures.findall(details)
    assert "with 3 queries category:rare cannot resolve any drop of Hit@3" in markdown
    # In JUnit too, with the metric's range beside it, never a figure above the range.
    rare_junit = _junit_properties(
        project, "docs_retrieval_yaml.keyword.regression.category:rare", "Hit@3"
    )
    assert {("resolution", "none (range)"), ("width", "1.0")} <= rare_junit
    assert f"| +-{shown} | +-{planned} | {needed:,} |" in markdown
    # The shelf-life table states the same planned figure as the item's fresh resolution, not
    # a third figure for the same item. The baseline's session revealed docs' 4 floor verdicts
    # (two systems, the suite and its rare category), each a decision the ledger counts.
    shelf = [ln for ln in markdown.splitlines() if ln.startswith("| `keyword` | Hit@3 | 12 | 4 |")]
    assert shelf and all(f"| +-{planned} |" in line for line in shelf), shelf

    # The pair model changed: the failing item names the change, old and new.
    sim = _gate(data, "sim.retrieval.yaml::angles::regression::spearman")
    assert sim["verdict"] == "regressed"
    assert (
        "changed since the baseline: system: model 'angles.json' -> 'angles-v2.json'"
        in sim["detail"]
    )
    assert (
        "changed since the baseline: model_identity: 'test-angles/angles.json/1' -> "
        "'test-angles/angles-v2.json/1'" in sim["detail"]
    )

    # The suite's own reference; a deltas plot for each regressed metric.
    assert "### Against the reference system `weak`" in markdown
    plots = {p.name for p in (project.path / "plots").glob("*--deltas-*.png")}
    assert {"docs--keyword--deltas-Hit@3.png", "sim--angles--deltas-spearman.png"} <= plots
    assert "Traceback" not in text


def test_an_accepted_coarse_suite_is_reported_and_not_repeated(project: pytest.Pytester) -> None:
    text = DOCS_SUITE.replace("name: docs\n", "name: docs\nresolution: accept\n")
    (project.path / "docs.retrieval.yaml").write_text(text, encoding="utf-8")
    saved = project.runpytest("--retrieval-gate", "--rg-save-baseline")
    # Said where the baseline is saved, on one line, not repeated.
    saved.stdout.fnmatch_lines(
        ["  accepted by the suite (resolution: accept), not repeated here: docs 4"]
    )
    markdown = (project.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert (
        "**The resolution is wider than the tolerance (the baseline saved now): changes with no "
        "real effect will often fail these checks (accepted by the suite: resolution: "
        "accept):**" in markdown
    )
    assert "- keyword Hit@3: +-" in markdown
    result = project.runpytest("--retrieval-gate", "docs.retrieval.yaml")
    result.assert_outcomes(passed=8)  # 4 floors, 4 regression items of docs
    assert "WARNING" not in result.stdout.str()
    data = _report(project)
    rows = data["runs"][0]["baseline"]["metrics"]
    assert rows["Hit@3"]["accepted"] is True
