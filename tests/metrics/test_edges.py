"""Metric edges where an off-by-one would go unnoticed elsewhere: the MRR@k cutoff and R-Prec
when fewer documents are retrieved than there are relevant ones.

Through the public ``retrieval_gate.evaluate`` only, so the tests hold whatever the kernel looks
like. Each expected value is hand arithmetic on a ranking small enough to read.
"""

from __future__ import annotations

import pytest

import retrieval_gate

# Ranked a, b, c, d, e (scores descending); nothing tied, so the order is unambiguous.
RUN = {"q": {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "e": 0.5}}


def mrr(relevant: str, k: int) -> float:
    """MRR@k for one relevant document, asked alone and beside no-cutoff MRR.

    Alone, an implementation may look only at the first k ranks; beside MRR it must see the whole
    ranking and still apply the cutoff itself. Both must agree.
    """
    alone = retrieval_gate.evaluate({"q": {relevant: 1}}, RUN, [f"MRR@{k}"])["q"][f"MRR@{k}"]
    full = retrieval_gate.evaluate({"q": {relevant: 1}}, RUN, [f"MRR@{k}", "MRR"])["q"][f"MRR@{k}"]
    assert alone == full
    return full


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_mrr_at_k_counts_a_first_relevant_exactly_at_rank_k(k: int) -> None:
    first_relevant = "abcde"[k - 1]  # at rank k
    assert mrr(first_relevant, k) == 1 / k


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_mrr_at_k_ignores_a_first_relevant_at_rank_k_plus_one(k: int) -> None:
    first_relevant = "abcde"[k]  # at rank k + 1
    assert mrr(first_relevant, k) == 0.0
    assert mrr(first_relevant, k + 1) == 1 / (k + 1)


def test_mrr_at_k_cutoff_holds_for_each_query_of_a_batch() -> None:
    # Three queries in one call, first relevant at ranks 2, 3 and 4; MRR@3 keeps 1/2 and 1/3 and
    # drops the third. A cutoff applied to the batch instead of each row would show here.
    qrels = {"two": {"b": 1}, "three": {"c": 1}, "four": {"d": 1}}
    run = {q: RUN["q"] for q in qrels}
    got = retrieval_gate.evaluate(qrels, run, ["MRR@3", "MRR"])
    assert {q: v["MRR@3"] for q, v in got.items()} == {"two": 1 / 2, "three": 1 / 3, "four": 0.0}
    assert {q: v["MRR"] for q, v in got.items()} == {"two": 1 / 2, "three": 1 / 3, "four": 1 / 4}


def test_mrr_at_k_beyond_the_ranking_length_is_plain_mrr() -> None:
    # 5 retrieved, k = 10: the first relevant at rank 5 counts, 1/5.
    assert mrr("e", 10) == 1 / 5


def test_r_prec_with_fewer_retrieved_than_relevant() -> None:
    # R = 5 relevant (a, c, x, y, z); 3 retrieved a, b, c of which a and c relevant.
    # R-Prec = relevant in the top R / R = 2 / 5, not 2 / 3 (the ranking's length) nor 2 / R-capped.
    qrels = {"q": {"a": 1, "c": 1, "x": 1, "y": 1, "z": 1}}
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7}}
    assert retrieval_gate.evaluate(qrels, run, ["R-Prec"])["q"]["R-Prec"] == 2 / 5


def test_r_prec_when_r_exceeds_the_ranking_in_a_batch_of_longer_rankings() -> None:
    # "short": R = 5, 3 retrieved (a, c relevant): 2 / 5, even beside a 6-long ranking that widens
    # the batch. "long": R = 2, ranked a b c d e f with relevant b and f: top 2 hold b, 1 / 2.
    # "all": R = 4, 2 retrieved, both relevant: 2 / 4. "none": R = 3, nothing retrieved: 0.
    qrels = {
        "short": {"a": 1, "c": 1, "x": 1, "y": 1, "z": 1},
        "long": {"b": 1, "f": 2},
        "all": {"a": 1, "b": 1, "x": 1, "y": 1},
        "none": {"a": 1, "b": 1, "c": 1},
    }
    run = {
        "short": {"a": 0.9, "b": 0.8, "c": 0.7},
        "long": {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "e": 0.5, "f": 0.4},
        "all": {"a": 0.9, "b": 0.8},
        "none": {},
    }
    got = retrieval_gate.evaluate(qrels, run, ["R-Prec"])
    assert {q: v["R-Prec"] for q, v in got.items()} == {
        "short": 2 / 5,
        "long": 1 / 2,
        "all": 2 / 4,
        "none": 0.0,
    }


def test_r_prec_counts_only_grades_of_at_least_one_in_r() -> None:
    # Judged non-relevant (0) and unjudged-in-pool (-1) documents are not part of R: R = 2 (a, c),
    # ranked a b c: top 2 hold a, so 1 / 2. Counting b (0) or d (-1) in R would give 1/3 or 2/4.
    qrels = {"q": {"a": 1, "b": 0, "c": 3, "d": -1}}
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7}}
    assert retrieval_gate.evaluate(qrels, run, ["R-Prec"])["q"]["R-Prec"] == 1 / 2
