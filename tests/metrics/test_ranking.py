"""The one tie policy: evaluate()'s rank counting (_judge_scored) equals rank_scored + judge."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_gate.metrics import judge, rank_scored
from retrieval_gate.metrics.ranking import _judge_scored

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


def random_case(seed: int) -> tuple[Qrels, Run]:
    """Queries whose scores take only a few values, so most documents are tied with others."""
    rng = np.random.default_rng(seed)
    qrels: Qrels = {}
    run: Run = {}
    for q in range(int(rng.integers(1, 30))):
        qid = f"q{q}"
        pool = [f"d{i}" for i in range(int(rng.integers(1, 40)))]
        n_ret = int(rng.integers(0, len(pool) + 1))
        retrieved = rng.choice(pool, size=n_ret, replace=False).tolist()
        levels = rng.integers(1, 5)  # 1 to 4 distinct scores: ties everywhere
        scores = rng.integers(0, levels, size=n_ret) / 4.0
        if rng.random() < 0.9:  # some queries are missing from the run
            run[qid] = dict(zip(retrieved, scores.tolist(), strict=True))
        judged = rng.choice(pool, size=int(rng.integers(0, len(pool) + 1)), replace=False)
        grades = rng.integers(-1, 4, size=judged.size).tolist()
        qrels[qid] = dict(zip(judged.tolist(), grades, strict=True))
    return qrels, run


@pytest.mark.parametrize("seed", range(40))
def test_judge_scored_equals_judge_on_rank_scored(seed: int) -> None:
    qrels, run = random_case(seed)
    qids = list(qrels)
    expected = judge(qrels, qids, [rank_scored(run.get(q, {})) for q in qids])
    got = _judge_scored(qrels, run, qids)
    assert got.grades.tolist() == expected.grades.tolist()
    assert got.lengths.tolist() == expected.lengths.tolist()
    assert got.n_rel.tolist() == expected.n_rel.tolist()
    assert got.ideal.tolist() == expected.ideal.tolist()
    assert got.qids == expected.qids


def test_all_documents_tied() -> None:
    # One score for all: doc id descending, so z, m, b, a and the relevant b is 3rd.
    qrels = {"q": {"b": 2, "a": 1}}
    run = {"q": {"a": 0.5, "b": 0.5, "m": 0.5, "z": 0.5}}
    assert rank_scored(run["q"]) == ["z", "m", "b", "a"]
    assert _judge_scored(qrels, run, ["q"]).grades.tolist() == [[0.0, 0.0, 2.0, 1.0]]
