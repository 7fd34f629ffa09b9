"""A fifth suite kind from outside the package: a project installs a distribution whose
``retrieval_gate.suites`` entry point names its kind, and the gate runs it end to end (items,
floors, baseline, regression, report) with no file of the plugin changed.

The kind here: questions and their answer (``qa``). A passage is relevant when it contains the
answer, worked out against the suite's passages when collected; the trec_eval family judges the
rankings; a regressed question says where its first answer passage went.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import lit

QA_KIND = '''
"""Question answering: which passages hold a question's answer."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from retrieval_gate.errors import SuiteError
from retrieval_gate.metrics import Metric, rank_scored
from retrieval_gate.records import Section, Table
from retrieval_gate.suites.kind import SuiteKind, UnitRecord
from retrieval_gate.suites.result import RunResult, fingerprint
from retrieval_gate.suites.units import Unit
from retrieval_gate.systems import open_configured


@dataclass(frozen=True)
class Question(Unit):
    answer: str = ""

    def digest_extra(self):
        return (self.answer,)


@dataclass(frozen=True)
class Answer:
    answer: str

    def to_json(self):
        return {"answer": self.answer}


class QAKind(SuiteKind):
    name = "qa"
    unit = "question"
    units = "questions"
    units_key = "questions"
    keys = frozenset({"questions", "passages"})
    inputs = ("ranking",)

    def parse(self, data, path):
        if not isinstance(data.get("passages"), str):
            raise SuiteError("a qa suite needs 'passages' (a JSONL file)", path=path,
                             entry="passages")
        questions = []
        for i, item in enumerate(data.get("questions") or []):
            if not isinstance(item, dict) or not item.get("answer"):
                raise SuiteError("a question needs 'answer'", path=path,
                                 entry=f"questions[{i}]")
            questions.append(Question(id=str(item["id"]), text=item["question"], relevant={},
                                      answer=str(item["answer"]), position=i))
        return questions, (path.parent / data["passages"]).resolve()

    def digest_payload(self, suite):
        return {"k": list(suite.k), "kind": self.name, "units": [q.digest for q in suite.queries]}

    def corpus_path(self, suite):
        return suite.spec

    def prepare(self, suite, resources):
        corpus = resources.corpus(suite.spec)
        questions = []
        for q in suite.queries:
            holding = {d.id: 1 for d in corpus.documents if q.answer.lower() in d.text.lower()}
            if not holding:
                raise SuiteError(f"no passage holds the answer {q.answer!r}", path=suite.path,
                                 entry=f"questions[{q.position}] (id {q.id})")
            questions.append(dataclasses.replace(q, relevant=holding))
        return dataclasses.replace(suite, queries=tuple(questions))

    def run(self, suite, system, context):
        opened = open_configured(system, context)
        try:
            found = opened.retrieve([(q.id, q.text) for q in suite.queries], max(suite.k))
            identity = dict(opened.identity())
        finally:
            opened.close()
        rankings = [tuple(rank_scored(r.hits)) for r in found]
        return RunResult(
            suite=suite, system=system, qids=tuple(q.id for q in suite.queries),
            rankings=tuple(rankings),
            scores=tuple(tuple(r.hits[d] for d in rk) for r, rk in zip(found, rankings)),
            latencies_ms=tuple(r.latency_ms for r in found),
            fingerprint={**fingerprint(suite, system), "system": identity},
        )

    def default_metrics(self, suite):
        return [Metric(family, k) for k in suite.k for family in ("Hit", "MRR")]

    def unit_record(self, run, index):
        question = run.suite.queries[index]
        return UnitRecord(ranking=run.rankings[index][: max(run.suite.k)],
                          extras=Answer(question.answer))

    def decode_extras(self, data):
        return Answer(data["answer"]) if "answer" in data else None

    def explain(self, qid, now, then, metric):
        def first(q):
            found = [r for r in q.relevant_ranks.values() if r is not None]
            return min(found) if found else "-"
        return f"{qid}: first answer passage {first(then)} -> {first(now)}"

    def headline(self, run):
        return ("Hit@1", f"MRR@{max(run.k)}")

    def sections(self, runs, metrics):
        rows = tuple((f"`{q.id}`", q.extras.answer, run.system) for run in runs
                     for q in run.queries if q.metrics.get("Hit@1") == 0.0)
        return [Section(title="Questions whose answer is not first",
                        tables=(Table(header=("question", "answer", "system"), rows=rows),))]


KIND = QAKind()
'''

DIST_INFO = {
    "METADATA": "Metadata-Version: 2.1\nName: qa-kind\nVersion: 1.0\n",
    "entry_points.txt": "[retrieval_gate.suites]\nqa = qa_kind:KIND\n",
}

PASSAGES = [
    {"id": "p1", "text": "The capital of France is Paris, on the Seine."},
    {"id": "p2", "text": "Mount Everest is the highest mountain above sea level."},
    {"id": "p3", "text": "Water boils at 100 degrees Celsius at sea level."},
    {"id": "p4", "text": "The Seine flows through Paris into the English Channel."},
]

SEARCH = """
import json
from pathlib import Path

PASSAGES = [json.loads(line) for line in Path(__file__).with_name("passages.jsonl").open()]
BROKEN = Path(__file__).with_name("BROKEN").exists()


def retrieve(query, k):
    words = set(query.lower().rstrip("?").split())
    scored = [(p["id"], float(len(words & set(p["text"].lower().rstrip(".").split()))))
              for p in PASSAGES]
    scored.sort(key=lambda kv: (-kv[1], kv[0]))
    if BROKEN:  # the top hit goes missing
        scored = scored[1:]
    return scored[:k]
"""

SUITE = """
kind: qa
passages: passages.jsonl
k: [1, 3]
gates: {Hit@3: 0.9}
tolerance: {MRR@3: 0.05}
questions:
  - {id: q1, question: "What is the capital of France?", answer: Paris}
  - {id: q2, question: "What is the highest mountain above sea level?", answer: Everest}
  - {id: q3, question: "At what degrees does water boil?", answer: 100 degrees}
"""


@pytest.fixture
def qa_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(qa_kind=QA_KIND, search_app=SEARCH)
    dist = pytester.path / "qa_kind-1.0.dist-info"
    dist.mkdir()
    for name, text in DIST_INFO.items():
        (dist / name).write_text(text)
    (pytester.path / "passages.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PASSAGES))
    pytester.makefile(".retrieval.yaml", qa=SUITE)
    pytester.makefile(
        ".toml",
        pyproject=textwrap.dedent(
            """
            [tool.pytest.ini_options]
            addopts = "-p no:cacheprovider"

            [tool.retrieval_gate]
            corpus = "passages.jsonl"

            [tool.retrieval_gate.system.words]
            retriever = "search_app:retrieve"
            """
        ),
    )
    return pytester


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return data


def test_a_kind_from_an_entry_point_runs_end_to_end(qa_project: pytest.Pytester) -> None:
    """Three sessions, each a fresh process: the registries read the entry points once per
    process (registry.py), so an in-process session would find the suite kinds this test
    process loaded before the kind's distribution was on its path, without ``qa``."""
    saved = qa_project.runpytest_subprocess("--retrieval-gate", "-v", "--rg-save-baseline")
    saved.assert_outcomes(passed=1)
    saved.stdout.fnmatch_lines(["*qa.retrieval.yaml::words::suite::Hit@3 PASSED*"])
    report = _report(qa_project)
    (run,) = report["runs"]
    assert run["kind"] == "qa"
    # Word overlap ranks each question's answer passage first: q1 p1 (5 words shared), q2 p2
    # (7), q3 p3 (3).
    assert run["metrics"]["Hit@1"] == 1.0
    assert run["metrics"]["MRR@3"] == 1.0
    assert [q["answer"] for q in run["queries"]] == ["Paris", "Everest", "100 degrees"]
    # p1 and p4 both hold "Paris": both are relevant for q1 (p4 shares one word: rank 3).
    assert run["queries"][0]["relevant_ranks"] == {"p1": 1, "p4": 3}
    baseline = json.loads((qa_project.path / "retrieval-baseline.json").read_text())
    assert baseline["runs"]["qa::words"]["kind"] == "qa"

    # Unchanged: the regression items pass against the saved baseline.
    again = qa_project.runpytest_subprocess("--retrieval-gate", "-v")
    again.assert_outcomes(passed=3)
    again.stdout.fnmatch_lines(["*qa.retrieval.yaml::words::regression::MRR@3 PASSED*"])

    # Broken: every top hit goes missing. q1's other Paris passage comes second (MRR 1/2),
    # q2 and q3 lose their only answer passage: Hit@3 1/3, MRR@3 (0.5 + 0 + 0) / 3. The floor
    # and both regression items fail, and the kind explains each question that fell.
    (qa_project.path / "BROKEN").write_text("")
    broken = qa_project.runpytest_subprocess("--retrieval-gate", "-v")
    broken.assert_outcomes(failed=3)
    broken.stdout.fnmatch_lines(
        [
            "*qa.retrieval.yaml::words::regression::MRR@3 FAILED*",
            "regressed: MRR@3 dropped 0.8333 > tolerance 0.05 (this run resolves no drop at 95 %)",
            "*over 3 shared questions; 3 worse, 0 better*",
            "q2: first answer passage 1 -> -",
            "q3: first answer passage 1 -> -",
            "q1: first answer passage 1 -> 2",
        ]
    )
    assert _report(qa_project)["runs"][0]["metrics"]["MRR@3"] == pytest.approx(0.5 / 3)
    markdown = (qa_project.path / "retrieval-gate-report.md").read_text()
    assert "### Questions whose answer is not first" in markdown
    assert "| `q2` | Everest | words |" in markdown


def test_a_kind_package_that_fails_to_load_is_named(qa_project: pytest.Pytester) -> None:
    """A fresh process: the entry points are loaded once per process (see the test above)."""
    (qa_project.path / "qa_kind.py").write_text("raise RuntimeError('half installed')\n")
    result = qa_project.runpytest_subprocess("--retrieval-gate")
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        ["*entry point 'qa' (qa_kind:KIND) of group retrieval_gate.suites cannot be loaded*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_suite_of_an_unknown_kind_lists_the_installed_ones(qa_project: pytest.Pytester) -> None:
    """A fresh process: the installed kinds listed include the entry point's, loaded once per
    process (see the first test)."""
    Path(qa_project.path / "qa.retrieval.yaml").write_text(SUITE.replace("kind: qa", "kind: quiz"))
    result = qa_project.runpytest_subprocess("--retrieval-gate")
    known = "ranking, ontology, extraction, pairs, qa"
    message = f"qa.retrieval.yaml [kind]: unknown kind 'quiz'; known kinds: {known}"
    result.stdout.fnmatch_lines(["*" + lit(message)])
