"""retrieval_gate.metrics against trec_eval's own expected outputs and against pytrec_eval.

The trec_eval files are vendored under ``tests/data/trec_eval`` (public domain, NIST; see its
README.md), so a fresh clone runs these tests. trec_eval prints 4 decimals, so values are compared to
half a unit of the last printed digit. Generated runs are compared with pytrec_eval to 1e-9.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.metrics import (
    REGISTRY,
    Metric,
    compute,
    cutoff_metrics,
    evaluate,
    judge,
    rank_scored,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
PRINTED = 5e-5  # trec_eval prints %.4f
EXACT = 1e-9

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


def _need(name: str) -> Path:
    # Vendored with the tests: a missing file is a broken checkout, not a reason to skip.
    path = DATA / name
    if not path.is_file():
        raise FileNotFoundError(f"trec_eval conformance file missing: {path} (see its README.md)")
    return path


def read_qrels(path: Path) -> Qrels:
    qrels: Qrels = {}
    for line in path.read_text().splitlines():
        if line.strip():
            qid, _, doc, grade = line.split()
            qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


def read_run(path: Path) -> Run:
    # The rank column (4th) is ignored on purpose: trec_eval ranks by score only. Text after the
    # run tag is ignored as trec_eval does (results.trunc has some).
    run: Run = {}
    for line in path.read_text().splitlines():
        if line.strip():
            qid, _, doc, _rank, score = line.split()[:5]
            run.setdefault(qid, {})[doc] = float(score)
    return run


def read_expected(path: Path) -> dict[tuple[str, str], float]:
    expected: dict[tuple[str, str], float] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        measure, qid, value = parts
        try:
            expected[(measure, qid)] = float(value)
        except ValueError:  # relstring, runid
            continue
    return expected


_CUT = {"P": "P", "recall": "R", "ndcg_cut": "nDCG", "map_cut": "MAP", "success": "Hit"}
_PLAIN = {"recip_rank": "MRR", "Rprec": "R-Prec", "map": "MAP", "ndcg": "nDCG", "set_recall": "R"}


def ours(trec_name: str) -> str | None:
    """Our metric name for a trec_eval measure name, None if we have no equivalent."""
    m = re.fullmatch(r"(P|recall|ndcg_cut|map_cut|success)_(\d+)", trec_name)
    if m:
        return f"{_CUT[m[1]]}@{m[2]}"
    return _PLAIN.get(trec_name)


def at_level(qrels: Qrels, level: int) -> Qrels:
    """Binary qrels equivalent to trec_eval ``-l level`` for every measure but nDCG."""
    return {q: {d: int(g >= level) for d, g in docs.items()} for q, docs in qrels.items()}


def compare(
    expected: Mapping[tuple[str, str], float],
    qrels: Qrels,
    run: Run,
    *,
    level: int = 1,
) -> int:
    wanted = sorted({(m, ours(m)) for m, _ in expected if ours(m) is not None})
    names = [name for _, name in wanted if name is not None]
    # nDCG ignores trec_eval's -l (it uses the grades as gains); the others only see relevance.
    graded = evaluate(qrels, run, [n for n in names if n.startswith("nDCG")])
    binary = evaluate(at_level(qrels, level), run, [n for n in names if not n.startswith("nDCG")])
    got = {q: {**graded[q], **binary[q]} for q in qrels}
    compared = 0
    mismatches = []
    for trec_name, name in wanted:
        assert name is not None
        per_query = [got[q][name] for q in qrels]
        for qid in [*qrels, "all"]:
            if (trec_name, qid) not in expected:
                continue
            value = float(np.mean(per_query)) if qid == "all" else got[qid][name]
            if abs(value - expected[(trec_name, qid)]) > PRINTED:
                mismatches.append(
                    f"{trec_name}/{name} {qid}: {value} != {expected[(trec_name, qid)]}"
                )
            compared += 1
    assert not mismatches, "\n".join(mismatches)
    return compared


@pytest.mark.parametrize(
    ("expected_file", "qrels_file", "run_file", "level", "min_compared"),
    [
        # -m all_trec -q: 9 cutoffs x 4 families, success_1/5/10, recip_rank, Rprec, map, ndcg,
        # set_recall, for 3 queries and "all".
        ("out.test.aq", "qrels.test", "results.test", 1, 4 * (36 + 3 + 5)),
        # parameterised cutoffs: P_3,5,7 recall_20,2000 ndcg_cut_10,20,23 success_2,5,20.
        ("out.test.meas_params", "qrels.test", "results.test", 1, 4 * 11),
        # -c on a truncated run where query 302 retrieved nothing: it scores 0 and counts in "all".
        ("out.test.aqc", "qrels.test", "results.trunc", 1, 4 * (36 + 3 + 5)),
        # -l2 on graded qrels with grades -1..4: nDCG uses the grades, the rest relevance >= 2.
        ("out.test.aql", "qrels.rel_level", "results.test", 2, 4 * (36 + 3 + 5)),
        ("out.test", "qrels.test", "results.test", 1, 12),
        ("out.test.a", "qrels.test", "results.test", 1, 36 + 3 + 5),
    ],
)
def test_matches_trec_eval_output(
    expected_file: str, qrels_file: str, run_file: str, level: int, min_compared: int
) -> None:
    expected = read_expected(_need(expected_file))
    qrels = read_qrels(_need(qrels_file))
    run = read_run(_need(run_file))
    compared = compare(expected, qrels, run, level=level)
    assert compared >= min_compared


def test_counts_match_trec_eval() -> None:
    expected = read_expected(_need("out.test.aqc"))
    qrels = read_qrels(_need("qrels.test"))
    run = read_run(_need("results.trunc"))
    qids = list(qrels)
    judged = judge(qrels, qids, [rank_scored(run.get(q, {})) for q in qids])
    for i, qid in enumerate(qids):
        assert judged.lengths[i] == expected[("num_ret", qid)]
        assert judged.n_rel[i] == expected[("num_rel", qid)]


def test_tie_order_matters_on_results_test() -> None:
    # results.test has a rank column that contradicts its scores and tied scores; ranking by
    # the rank column, or by score with ties in file order, must not reproduce trec_eval.
    expected = read_expected(_need("out.test.aq"))
    qrels = read_qrels(_need("qrels.test"))
    run = read_run(_need("results.test"))
    scores = [s for docs in run.values() for s in docs.values()]
    assert len(scores) - len(set(scores)) > 0
    got = evaluate(qrels, run, ["P@5", "P@10", "nDCG@10", "MAP@10", "MRR"])
    trec = {"P@5": "P_5", "P@10": "P_10", "nDCG@10": "ndcg_cut_10", "MAP@10": "map_cut_10"}
    for name, trec_name in trec.items():
        for qid in qrels:
            assert got[qid][name] == pytest.approx(expected[(trec_name, qid)], abs=PRINTED)


def test_plugin_path_equals_evaluate_on_trec_data() -> None:
    qrels = read_qrels(_need("qrels.rel_level"))
    run = read_run(_need("results.test"))
    qids = list(qrels)
    metrics = [
        *cutoff_metrics([1, 5, 10, 100, 1000]),
        *(Metric(f) for f in ("R", "MRR", "nDCG", "MAP")),
    ]
    via_judge = compute(judge(qrels, qids, [rank_scored(run[q]) for q in qids]), metrics)
    via_evaluate = evaluate(qrels, run, metrics)
    for name, values in via_judge.items():
        for i, qid in enumerate(qids):
            assert values[i] == via_evaluate[qid][name]


# --- pytrec_eval on generated runs -------------------------------------------------------------

CUTOFFS = (1, 3, 5, 10, 20, 100, 150)


def generated(seed: int = 7) -> tuple[Qrels, Run]:
    """200 judged queries x 100 results with many ties and every awkward case.

    Scores are rounded to 1e-3 (ties everywhere, but no two distinct scores collapse in
    pytrec_eval's 32-bit floats); doc ids are unpadded so string order differs from numeric order;
    grades are -1..3; some queries have no relevant document, some no retrieved relevant one,
    some judged documents are never retrieved, one query is missing from the run and the run has a
    query nobody judged.
    """
    rng = np.random.default_rng(seed)
    qrels: Qrels = {}
    run: Run = {}
    for q in range(200):
        qid = f"q{q}"
        pool = [f"d{j}" for j in rng.permutation(400)[:200].tolist()]
        retrieved = pool[:100]
        judged_docs = rng.choice(pool, size=int(rng.integers(1, 30)), replace=False).tolist()
        grades = rng.choice([-1, 0, 0, 1, 1, 2, 3], size=len(judged_docs)).tolist()
        if q % 17 == 0:
            grades = [min(g, 0) for g in grades]  # nothing relevant
        if q % 13 == 0:
            judged_docs = pool[100:130]  # relevant ones exist but none is retrieved
            grades = [1 + j % 3 for j in range(30)]
        qrels[qid] = dict(zip(judged_docs, grades, strict=True))
        # A weakly informative retriever, so that the top ranks hold relevant documents.
        boost = np.array([max(qrels[qid].get(d, 0), 0) for d in retrieved]) * 0.15
        scores = np.round(np.minimum(rng.random(100) + boost, 1.0), 3)
        run[qid] = dict(zip(retrieved, scores.tolist(), strict=True))
    run["unjudged"] = {"d1": 0.5}
    del run["q5"]
    return qrels, run


def pytrec(qrels: Qrels, run: Run, measures: set[str]) -> dict[str, dict[str, float]]:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    result: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(
        run
    )
    return result


def _cut(name: str) -> str:
    return f"{name}." + ",".join(map(str, CUTOFFS))


TREC_CUT = {"P": "P", "R": "recall", "nDCG": "ndcg_cut", "MAP": "map_cut", "Hit": "success"}


def assert_close(
    ours_: Mapping[str, Mapping[str, float]],
    theirs: Mapping[str, Mapping[str, float]],
    pairs: list[tuple[str, str]],
) -> None:
    assert theirs
    mismatches = [
        f"{qid} {name}: {ours_[qid][name]!r} != {values[trec]!r} ({trec})"
        for qid, values in theirs.items()
        for name, trec in pairs
        if abs(ours_[qid][name] - values[trec]) > EXACT
    ]
    assert not mismatches, "\n".join(mismatches[:20])


def test_every_family_matches_pytrec_eval() -> None:
    qrels, run = generated()
    measures = {_cut(t) for t in TREC_CUT.values()} | {
        "recip_rank",
        "Rprec",
        "map",
        "ndcg",
        "set_recall",
    }
    theirs = pytrec(qrels, run, measures)
    pairs = [(f"{f}@{k}", f"{t}_{k}") for f, t in TREC_CUT.items() for k in CUTOFFS]
    pairs += [
        ("MRR", "recip_rank"),
        ("R-Prec", "Rprec"),
        ("MAP", "map"),
        ("nDCG", "ndcg"),
        ("R", "set_recall"),
    ]
    got = evaluate(qrels, run, [name for name, _ in pairs])
    assert set(theirs) == set(qrels) - {"q5"}
    assert_close(got, theirs, pairs)
    # Not vacuous: the run has ties on judged documents and non-trivial values.
    assert np.mean([got[q]["nDCG@10"] for q in theirs]) > 0.05
    assert sum(got[q]["R-Prec"] > 0 for q in theirs) > 20


def test_missing_query_scores_zero_where_pytrec_eval_drops_it() -> None:
    qrels, run = generated()
    got = evaluate(qrels, run, ["P@5", "nDCG@10", "MRR", "R-Prec"])
    assert "q5" in got and "unjudged" not in got
    assert got["q5"] == {"P@5": 0.0, "nDCG@10": 0.0, "MRR": 0.0, "R-Prec": 0.0}
    assert len(got) == len(qrels) == 200


def test_mrr_at_k_matches_recip_rank_on_cut_ranking() -> None:
    qrels, run = generated()
    for k in (1, 3, 10):
        cut = {q: {d: docs[d] for d in rank_scored(docs)[:k]} for q, docs in run.items()}
        theirs = pytrec(qrels, cut, {"recip_rank"})
        assert_close(evaluate(qrels, run, [f"MRR@{k}"]), theirs, [(f"MRR@{k}", "recip_rank")])


def test_exponential_gain_matches_trec_eval_with_exponential_grades() -> None:
    # trec_eval's gain is the grade, so qrels holding 2**g - 1 give the exponential-gain nDCG.
    qrels, run = generated()
    exp_qrels = {
        q: {d: (2**g - 1 if g > 0 else g) for d, g in docs.items()} for q, docs in qrels.items()
    }
    theirs = pytrec(exp_qrels, run, {_cut("ndcg_cut"), "ndcg"})
    pairs = [(f"nDCG@{k}", f"ndcg_cut_{k}") for k in CUTOFFS] + [("nDCG", "ndcg")]
    got = evaluate(qrels, run, [name for name, _ in pairs], gain="exponential")
    assert_close(got, theirs, pairs)
    linear = evaluate(qrels, run, ["nDCG@10"])
    assert any(abs(got[q]["nDCG@10"] - linear[q]["nDCG@10"]) > 1e-3 for q in theirs)


@pytest.mark.parametrize("family", [f for f in REGISTRY if REGISTRY[f].input == "ranking"])
def test_plugin_path_equals_evaluate(family: str) -> None:
    qrels, run = generated(seed=11)
    qids = list(qrels)
    judged = judge(qrels, qids, [rank_scored(run.get(q, {})) for q in qids])
    spec = REGISTRY[family]
    metrics = [Metric(family, k) for k in (1, 10, 150)] if spec.takes_k else []
    if not spec.needs_k:
        metrics.append(Metric(family))
    via_judge = compute(judged, metrics)
    table = evaluate(qrels, run, metrics)
    for name, values in via_judge.items():
        assert values.tolist() == [table[q][name] for q in qids]
