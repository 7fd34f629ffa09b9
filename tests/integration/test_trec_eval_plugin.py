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


def test_plugin_matches_trec_eval_per_query(pytester: pytest.Pytester, shared_data: Path) -> None:
    folder = shared_data / "trec_eval"
    qrels = read_trec_qrels(folder / "qrels.test")
    run: dict[str, dict[str, float]] = {}
    for line in (folder / "results.test").read_text().splitlines():
        qid, _, doc, _rank, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    suite = {
        "name": "trec-eval-conformance",
        "k": CUTOFFS,
        "queries": [{"id": q, "query": q, "relevant": qrels[q]} for q in sorted(qrels)],
    }
    (pytester.path / "conformance.retrieval.json").write_text(json.dumps(suite))
    (pytester.path / "run.json").write_text(json.dumps(run))
    # The retriever hands back results.test in its file order (the rank column is ignored, as
    # trec_eval ignores it): the plugin must rank by score with trec_eval's tie order.
    pytester.makepyfile(
        trec_run="""
        import json, pathlib
        RUN = json.loads((pathlib.Path(__file__).parent / "run.json").read_text())
        def retrieve(query, k):
            return list(RUN[query].items())
        """
    )
    pytester.makefile(
        ".toml",
        pyproject="""
        [tool.retrieval_gate.system.trec]
        retriever = "trec_run:retrieve"
        depth = 1000
        """,
    )
    pytester.syspathinsert()
    pytester.runpytest("--retrieval-gate").assert_outcomes(passed=1)
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    got = {q["id"]: q["metrics"] for q in report["runs"][0]["queries"]}
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
