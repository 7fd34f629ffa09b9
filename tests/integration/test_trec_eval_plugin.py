"""The plugin's per-query values against trec_eval's own expected output, through a real run.

trec_eval's conformance files (qrels.test, results.test, out.test.aq) become a suite and a
retriever that returns results.test's scores, and `pytest --retrieval-gate` must report what
trec_eval printed, to its 4 decimals.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_gate.corpus import read_trec_qrels

CUTOFFS = [5, 10, 15, 20, 30, 100, 200, 500, 1000]
# Vendored with the tests (public domain, NIST; see its README.md).
TREC_EVAL = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def _expected(path: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        name, qid, value = line.split()
        if qid != "all":
            try:
                out.setdefault(qid, {})[name] = float(value)
            except ValueError:
                continue
    return out


def _per_query_through_the_gate(
    pytester: pytest.Pytester,
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    k: list[int],
) -> dict[str, dict[str, float]]:
    """Each query's metrics as `pytest --retrieval-gate` reports them, for a fixed run.

    The retriever hands back each query's results in the run's own order (results.test's order,
    its rank column ignored as trec_eval ignores it): the plugin must rank by score with
    trec_eval's tie order.
    """
    suite = {
        "name": "conformance",
        "k": k,
        "queries": [{"id": q, "query": q, "relevant": qrels[q]} for q in sorted(qrels)],
    }
    (pytester.path / "conformance.retrieval.json").write_text(json.dumps(suite))
    (pytester.path / "run.json").write_text(json.dumps(run))
    pytester.makepyfile(
        fixed_run="""
        import json, pathlib
        RUN = json.loads((pathlib.Path(__file__).parent / "run.json").read_text())
        def retrieve(query, k):
            return list(RUN[query].items())
        """
    )
    pytester.makefile(
        ".toml",
        pyproject='[tool.retrieval_gate.system.fixed]\nretriever = "fixed_run:retrieve"\n',
    )
    pytester.syspathinsert()
    pytester.runpytest("--retrieval-gate").assert_outcomes(passed=1)
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return {q["id"]: q["metrics"] for q in report["runs"][0]["queries"]}


def test_plugin_matches_trec_eval_per_query(pytester: pytest.Pytester) -> None:
    folder = TREC_EVAL
    qrels = read_trec_qrels(folder / "qrels.test")
    run: dict[str, dict[str, float]] = {}
    for line in (folder / "results.test").read_text().splitlines():
        qid, _, doc, _rank, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    got = _per_query_through_the_gate(pytester, qrels, run, CUTOFFS)
    expected = _expected(folder / "out.test.aq")
    assert sorted(got) == sorted(expected) == ["301", "302", "303"]
    names = {"R-Prec": "Rprec", "MRR@1000": "recip_rank"}
    for k in CUTOFFS:
        names |= {f"P@{k}": f"P_{k}", f"R@{k}": f"recall_{k}", f"nDCG@{k}": f"ndcg_cut_{k}"}
        names |= {f"MAP@{k}": f"map_cut_{k}"}
    names |= {f"Hit@{k}": f"success_{k}" for k in (5, 10)}
    compared = 0
    for qid, values in got.items():
        for ours, theirs in names.items():
            assert values[ours] == pytest.approx(expected[qid][theirs], abs=5e-5), (qid, ours)
            compared += 1
    assert compared == 3 * len(names)


def test_plugin_matches_pytrec_eval_on_a_run_with_ties_and_grades(
    pytester: pytest.Pytester,
) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    import numpy as np

    rng = np.random.default_rng(7)
    docs = [f"d{i:03d}" for i in range(60)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(40):
        qid = f"q{q:02d}"
        judged = rng.choice(docs, size=12, replace=False)
        grades = rng.integers(0, 4, size=12)
        grades[0] = max(1, int(grades[0]))  # every suite query needs a relevant document
        qrels[qid] = {str(d): int(g) for d, g in zip(judged, grades, strict=True)}
        retrieved = rng.choice(docs, size=30, replace=False)
        # Scores on a coarse grid: many ties, broken by doc id as trec_eval does.
        run[qid] = {
            str(d): float(s) for d, s in zip(retrieved, rng.integers(0, 8, 30) / 4, strict=True)
        }
    got = _per_query_through_the_gate(pytester, qrels, run, [1, 3, 5, 10, 20])

    cut = "1,3,5,10,20"
    measures = {
        f"P.{cut}",
        f"recall.{cut}",
        f"ndcg_cut.{cut}",
        f"map_cut.{cut}",
        "success.1,3,5,10",
        "Rprec",
    }
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    names = {"R-Prec": "Rprec"}
    for k in (1, 3, 5, 10, 20):
        names |= {f"P@{k}": f"P_{k}", f"R@{k}": f"recall_{k}", f"nDCG@{k}": f"ndcg_cut_{k}"}
        names |= {f"MAP@{k}": f"map_cut_{k}"}
    names |= {f"Hit@{k}": f"success_{k}" for k in (1, 3, 5, 10)}
    assert sorted(got) == sorted(expected)
    for qid, values in got.items():
        for ours, theirs in names.items():
            assert values[ours] == pytest.approx(expected[qid][theirs], abs=1e-9), (qid, ours)
