"""Speed of retrieval_gate.metrics against pytrec_eval (and ranx if installed), run by hand.

    python benchmarks/bench_metrics.py [--queries 10000 100000] [--repeats 3]

For each size it generates a seeded run (100 results per query, scores rounded to 1e-6 so that
pytrec_eval's 32-bit scores keep every distinct score distinct) and graded qrels (about 10 judged
documents per query, grades 0..3, some judged documents not retrieved), then times, in the same
process, best of N repeats:

* ``evaluate``: retrieval_gate.evaluate from the dicts, end to end;
* ``judge+compute``: the plugin path from already ordered rankings;
* ``compute``: the metric kernel alone, on a pre-built Judged;
* ``pytrec_eval``: RelevanceEvaluator construction + evaluate, from the same dicts;
* ``ranx``: Qrels/Run construction from the dicts + evaluate (skipped when not installed).

Before printing anything it checks that every value equals pytrec_eval's to 1e-9. The ratio
column is pytrec_eval's time divided by the row's time (higher is faster than pytrec_eval).
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval_gate.metrics import Metric, compute, evaluate, judge, rank_scored

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]

CUTOFFS = (5, 10, 100)
FAMILIES = {"P": "P", "R": "recall", "nDCG": "ndcg_cut", "MAP": "map_cut", "Hit": "success"}
RANX_NAMES = {"P": "precision", "R": "recall", "nDCG": "ndcg", "MAP": "map", "Hit": "hit_rate"}


def metrics() -> list[Metric]:
    out = [Metric(family, k) for family in FAMILIES for k in CUTOFFS]
    return [*out, Metric("MRR"), Metric("R-Prec")]


def trec_names() -> dict[str, str]:
    names = {f"{f}@{k}": f"{t}_{k}" for f, t in FAMILIES.items() for k in CUTOFFS}
    return {**names, "MRR": "recip_rank", "R-Prec": "Rprec"}


def generate(n_queries: int, depth: int = 100, seed: int = 0) -> tuple[Qrels, Run]:
    rng = np.random.default_rng(seed)
    vocab_size = 1_000_000
    vocab = [f"doc{i}" for i in range(vocab_size)]
    base = rng.integers(0, vocab_size, n_queries)[:, None]
    # Strictly increasing offsets give distinct documents within a query without a per-query
    # sampling call.
    ids = (base + np.cumsum(rng.integers(1, 8, (n_queries, depth)), axis=1)) % vocab_size
    scores = rng.random((n_queries, depth))
    judged_cols = rng.random((n_queries, depth)).argpartition(7, axis=1)[:, :7]
    judged_grades = rng.integers(0, 4, (n_queries, 7))
    rows = np.arange(n_queries)[:, None]
    # A weakly informative retriever: judged documents score a little higher by grade.
    scores[rows, judged_cols] += 0.1 * judged_grades
    scores = np.round(scores, 6)
    missing_ids = (base + depth * 8 + np.arange(3)) % vocab_size
    missing_grades = rng.integers(0, 4, (n_queries, 3))

    ids_list = ids.tolist()
    scores_list = scores.tolist()
    cols_list = judged_cols.tolist()
    grades_list = judged_grades.tolist()
    missing_list = missing_ids.tolist()
    missing_grades_list = missing_grades.tolist()
    qrels: Qrels = {}
    run: Run = {}
    for q in range(n_queries):
        qid = f"q{q}"
        docs = [vocab[i] for i in ids_list[q]]
        run[qid] = dict(zip(docs, scores_list[q], strict=True))
        judged = {docs[c]: g for c, g in zip(cols_list[q], grades_list[q], strict=True)}
        for i, g in zip(missing_list[q], missing_grades_list[q], strict=True):
            judged[vocab[i]] = g
        qrels[qid] = judged
    return qrels, run


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best = float("inf")
    result: Any = None
    for _ in range(repeats):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def check(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, float]]) -> None:
    names = trec_names()
    if set(ours) != set(theirs):
        raise SystemExit("query sets differ from pytrec_eval")
    worst = 0.0
    for qid, values in theirs.items():
        for name, trec in names.items():
            worst = max(worst, abs(ours[qid][name] - values[trec]))
    if worst > 1e-9:
        raise SystemExit(f"values differ from pytrec_eval by up to {worst}")


def bench(n_queries: int, repeats: int) -> list[tuple[str, float]]:
    import pytrec_eval

    qrels, run = generate(n_queries)
    wanted = metrics()
    qids = list(qrels)
    rankings = [rank_scored(run[q]) for q in qids]
    judged = judge(qrels, qids, rankings)

    measures = {f"{t}.{','.join(map(str, CUTOFFS))}" for t in FAMILIES.values()}
    measures |= {"recip_rank", "Rprec"}

    def run_pytrec() -> dict[str, dict[str, float]]:
        result: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(
            qrels, measures
        ).evaluate(run)
        return result

    t_pytrec, theirs = best_of(repeats, run_pytrec)
    t_eval, ours = best_of(repeats, lambda: evaluate(qrels, run, wanted))
    check(ours, theirs)
    via_judge = compute(judged, wanted)
    for name, values in via_judge.items():
        if values.tolist() != [ours[q][name] for q in qids]:
            raise SystemExit(f"judge+compute differs from evaluate on {name}")
    del theirs, ours, via_judge
    t_judge, _ = best_of(repeats, lambda: compute(judge(qrels, qids, rankings), wanted))
    t_compute, _ = best_of(repeats, lambda: compute(judged, wanted))
    rows = [
        ("pytrec_eval (dicts)", t_pytrec),
        ("retrieval_gate evaluate (dicts)", t_eval),
        ("retrieval_gate judge+compute (rankings)", t_judge),
        ("retrieval_gate compute (arrays)", t_compute),
    ]
    try:
        import ranx
    except ImportError:
        return rows
    ranx_metrics = [f"{RANX_NAMES[f]}@{k}" for f in FAMILIES for k in CUTOFFS] + [
        "mrr",
        "r-precision",
    ]

    def run_ranx() -> object:
        return ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), ranx_metrics, return_mean=False)

    run_ranx()  # numba compiles on first use; that is not what is measured
    t_ranx, _ = best_of(repeats, run_ranx)
    rows.append(("ranx (dicts)", t_ranx))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--queries", type=int, nargs="+", default=[10_000, 100_000], metavar="N")
    parser.add_argument("--repeats", type=int, default=3, metavar="N")
    args = parser.parse_args(argv)
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{platform.system()}; 100 results per query, {len(metrics())} metrics, "
        f"best of {args.repeats}",
        file=sys.stderr,
    )
    print("| queries | implementation | seconds | pytrec_eval / this |")
    print("|---:|---|---:|---:|")
    for n in args.queries:
        rows = bench(n, args.repeats)
        reference = rows[0][1]
        for name, seconds in rows:
            print(f"| {n:,} | {name} | {seconds:.3f} | {reference / seconds:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
