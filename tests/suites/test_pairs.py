"""Pair suites: loading the pairs, the correlation metrics, their bootstrap intervals and the
bootstrap margin test that judges regressions of an aggregate that is not a mean."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from retrieval_gate.errors import SuiteError
from retrieval_gate.gates.stats import bootstrap_margin_test, detectable_drop_bootstrap
from retrieval_gate.metrics import Metric
from retrieval_gate.metrics.bootstrap import bootstrap_ci
from retrieval_gate.metrics.pairs import average_ranks, pearson, spearman
from retrieval_gate.suites.suite import parse_suite


def _suite(tmp_path: Path, pairs: object, **extra: object) -> object:
    return parse_suite(
        {"name": "sim", "kind": "pairs", "pairs": pairs, **extra}, tmp_path / "s.yaml"
    )


# -- loading -----------------------------------------------------------------------------------


def test_inline_pairs_become_units_with_the_second_text_and_gold(tmp_path: Path) -> None:
    suite = parse_suite(
        {"kind": "pairs", "pairs": [["a cat", "a kitten", 5], {"a": "x", "b": "y", "score": 0.5}]},
        tmp_path / "sim.yaml",
    )
    assert suite.kind == "pairs"
    first, second = suite.queries
    assert (first.text, first.text_b, first.gold) == ("a cat", "a kitten", 5.0)  # type: ignore[attr-defined]
    assert (second.text, second.text_b, second.gold) == ("x", "y", 0.5)  # type: ignore[attr-defined]
    assert first.relevant == {}
    # Ids come from the texts, so inserting a pair does not rename the others.
    again = parse_suite(
        {"kind": "pairs", "pairs": [["new", "pair", 1], ["a cat", "a kitten", 5]]},
        tmp_path / "sim.yaml",
    )
    assert again.queries[1].id == first.id


def test_tsv_json_and_jsonl_files_load_the_same_pairs(tmp_path: Path) -> None:
    (tmp_path / "p.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1.5\n\nc\td\t0\n")
    (tmp_path / "p.json").write_text(
        json.dumps([{"a": "a", "b": "b", "score": 1.5}, ["c", "d", 0]])
    )
    (tmp_path / "p.jsonl").write_text(
        '{"text_a": "a", "text_b": "b", "gold": 1.5}\n["c", "d", 0]\n'
    )
    loaded = [
        [
            (q.id, q.text, q.text_b, q.gold)  # type: ignore[attr-defined]
            for q in parse_suite({"kind": "pairs", "pairs": name}, tmp_path / "s.yaml").queries
        ]
        for name in ("p.tsv", "p.json", "p.jsonl")
    ]
    assert loaded[0] == loaded[1] == loaded[2]
    assert [(t, b, g) for _, t, b, g in loaded[0]] == [("a", "b", 1.5), ("c", "d", 0.0)]


@pytest.mark.parametrize(
    ("pairs", "files", "message", "entry"),
    [
        ("p.tsv", {"p.tsv": "a\tb\t1\nc\td\n"}, "expected 3 tab-separated fields", "line 2"),
        ("p.tsv", {"p.tsv": "a\tb\t1\nc\td\tlots\n"}, "finite number, got 'lots'", "line 2"),
        ("p.tsv", {"p.tsv": "a\tb\tnan\n"}, "finite number", "line 1"),
        (
            "p.jsonl",
            {"p.jsonl": '{"a": "x", "b": "y", "score": 1}\n{"a": "x"\n'},
            "invalid JSON",
            "line 2",
        ),
        ("p.json", {"p.json": '{"a": 1}'}, "a JSON pairs file is a list", None),
        ("p.csv", {"p.csv": "a,b,1"}, "must be .tsv, .json or .jsonl", "pairs"),
        ("missing.tsv", {}, "pairs file not found", "pairs"),
        ([["a", "", 1]], {}, "pair text b must be non-empty", "pairs[0]"),
        ([["a", "b"]], {}, "a pair is [text_a, text_b, score]", "pairs[0]"),
        ([{"a": "x", "b": "y", "score": 1, "weight": 2}], {}, "unknown key 'weight'", "pairs[0]"),
        ([{"a": "x", "b": "y", "score": True}], {}, "finite number, got True", "pairs[0]"),
        (
            [
                {"id": "p1", "a": "x", "b": "y", "score": 1},
                {"id": "p1", "a": "u", "b": "v", "score": 2},
            ],
            {},
            "duplicate pair id 'p1' (first at pairs[0])",
            "pairs[1]",
        ),
        ({"a": "x"}, {}, "invalid 'pairs': {'a': 'x'}; expected list or string", None),
    ],
)
def test_bad_pairs_are_one_line_errors_naming_file_and_entry(
    tmp_path: Path, pairs: object, files: dict[str, str], message: str, entry: str | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(SuiteError) as info:
        _suite(tmp_path, pairs)
    assert message in str(info.value)
    assert info.value.entry == entry
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("extra", "message", "entry"),
    [
        ({"gates": {"nDCG@10": 0.5}}, "nDCG@10 does not apply to a pairs suite", "gates.nDCG@10"),
        (
            {"gates": {"latency_p95_ms": 10}},
            "does not apply to a pairs suite",
            "gates.latency_p95_ms",
        ),
        ({"tolerance": {"nDCG@10": 0.1}}, "does not apply to a pairs suite", "tolerance.nDCG@10"),
        ({"queries": []}, "'queries' belongs to ranking suites; this suite is kind", "queries"),
        ({"k": [1]}, "'k' does not apply to a pairs suite", "k"),
    ],
)
def test_what_a_pair_suite_cannot_have_is_refused(
    tmp_path: Path, extra: dict[str, object], message: str, entry: str
) -> None:
    with pytest.raises(SuiteError) as info:
        _suite(tmp_path, [["a", "b", 1], ["c", "d", 2]], **extra)
    assert message in str(info.value)
    assert info.value.entry == entry


def test_pair_metrics_on_a_ranking_suite_say_which_kind_they_need(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="pearson does not apply to a ranking suite"):
        parse_suite(
            {"gates": {"pearson": 0.5}, "queries": [{"query": "q", "relevant": ["d"]}]},
            tmp_path / "s.yaml",
        )
    with pytest.raises(SuiteError, match=r"'pairs' belongs to pairs suites.*add 'kind: pairs'"):
        parse_suite({"pairs": [["a", "b", 1]]}, tmp_path / "s.yaml")
    with pytest.raises(SuiteError, match="a pairs suite needs 'pairs'"):
        parse_suite({"kind": "pairs"}, tmp_path / "s.yaml")
    with pytest.raises(SuiteError, match="unknown kind 'pair'; known kinds: ranking"):
        parse_suite({"kind": "pair", "pairs": []}, tmp_path / "s.yaml")


def test_a_pair_digest_changes_with_the_second_text_and_the_gold_score(tmp_path: Path) -> None:
    one, two, three = (
        _suite(tmp_path, [{"id": "p", "a": "x", "b": b, "score": s}]).queries[0]  # type: ignore[attr-defined]
        for b, s in (("y", 1), ("z", 1), ("y", 2))
    )
    assert len({one.digest, two.digest, three.digest}) == 3


# -- the metrics -------------------------------------------------------------------------------


def test_pearson_and_spearman_by_hand() -> None:
    # x = [1, 2, 3], y = [1, 3, 2]: centred [-1, 0, 1] and [-1, 1, 0]; r = 1 / sqrt(2 * 2) = 0.5.
    assert pearson(np.array([1.0, 2, 3]), np.array([1.0, 3, 2])) == pytest.approx(0.5, abs=1e-15)
    assert spearman(np.array([10.0, 20, 30]), np.array([1.0, 9, 4])) == pytest.approx(
        0.5, abs=1e-15
    )
    # Ties: x = [1, 2, 2, 3] ranks [1, 2.5, 2.5, 4]; y ranks [1, 2, 3, 4]. Centred (mean 2.5):
    # [-1.5, 0, 0, 1.5] and [-1.5, -0.5, 0.5, 1.5]: 4.5 / sqrt(4.5 * 5).
    assert average_ranks(np.array([1.0, 2, 2, 3])).tolist() == [1.0, 2.5, 2.5, 4.0]
    rho = spearman(np.array([1.0, 2, 2, 3]), np.array([1.0, 2, 3, 4]))
    assert rho == pytest.approx(4.5 / math.sqrt(4.5 * 5), abs=1e-15)


def test_pearson_of_gold_scores_near_the_float64_limit_is_a_number() -> None:
    # The by-hand case above with y scaled by 2**1020 (exact): the centred squares, near
    # 2**2040, would overflow to inf and r to nan; r does not change with scale: 0.5.
    big = np.ldexp(np.array([1.0, 3, 2]), 1020)
    assert pearson(np.array([1.0, 2, 3]), big) == pytest.approx(0.5, abs=1e-15)
    assert pearson(big, np.array([1.0, 2, 3])) == pytest.approx(0.5, abs=1e-15)


def test_correlations_are_zero_where_undefined() -> None:
    assert pearson(np.array([1.0]), np.array([2.0])) == 0.0
    assert pearson(np.array([1.0, 1.0, 1.0]), np.array([1.0, 2, 3])) == 0.0
    assert spearman(np.array([1.0, 2, 3]), np.array([5.0, 5, 5])) == 0.0
    assert pearson(np.array([]), np.array([])) == 0.0


def test_pearson_and_spearman_equal_scipy_on_random_pairs_with_ties() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    for n in (2, 3, 10, 257):
        x = rng.normal(size=n)
        y = np.round(x + rng.normal(size=n), 1)  # rounding makes ties
        assert pearson(x, y) == pytest.approx(scipy_stats.pearsonr(x, y).statistic, abs=1e-12)
        assert spearman(x, y) == pytest.approx(scipy_stats.spearmanr(x, y).statistic, abs=1e-12)


def test_the_registry_aggregates_pearson_with_the_gold_component() -> None:
    sims = np.array([0.9, 0.1, 0.5])
    gold = np.array([5.0, 1.0, 2.0])
    assert Metric("pearson").aggregate(sims, {"gold_score": gold}) == pytest.approx(
        pearson(sims, gold), abs=0
    )
    with pytest.raises(ValueError, match="needs the per-query values of gold_score"):
        Metric("pearson").aggregate(sims)


# -- bootstrap ---------------------------------------------------------------------------------


def test_bootstrap_interval_is_seeded_and_covers_the_estimate() -> None:
    rng = np.random.default_rng(1)
    sims = rng.uniform(size=200)
    gold = sims + rng.normal(scale=0.3, size=200)
    parts = {"gold_score": gold}
    metric = Metric("pearson")
    first = bootstrap_ci(metric, sims, parts, seed=3)
    assert bootstrap_ci(metric, sims, parts, seed=3) == first
    assert bootstrap_ci(metric, sims, parts, seed=4) != first
    lo, hi = first
    assert lo < pearson(sims, gold) < hi
    assert 0.0 < hi - lo < 0.3


def test_bootstrap_interval_of_a_mean_by_hand_edge_cases() -> None:
    metric = Metric("cosine")
    assert bootstrap_ci(metric, np.array([]), {}) == (0.0, 0.0)
    # One unit: every resample is that unit.
    assert bootstrap_ci(metric, np.array([0.25]), {}) == (0.25, 0.25)
    # All units equal: so is every resampled mean.
    assert bootstrap_ci(metric, np.full(5, 0.5), {}) == pytest.approx((0.5, 0.5), abs=1e-15)


def _series(sims: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]:
    return {"pearson": sims, "gold_score": gold}


def test_bootstrap_margin_test_verdict_evidence() -> None:
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, size=300)
    then = gold / 5 + rng.normal(scale=0.1, size=300)
    metric = Metric("pearson")
    # Nothing changed: p = 1 both ways, whatever the tolerance.
    same = bootstrap_margin_test(metric, _series(then, gold), _series(then, gold), 0.05)
    assert (same.p_worse, same.p_within, same.improved, same.degraded) == (1.0, 1.0, 0, 0)
    # A much noisier system: the correlation falls far more than a 0.02 tolerance.
    worse = then + rng.normal(scale=0.4, size=300)
    test = bootstrap_margin_test(metric, _series(worse, gold), _series(then, gold), 0.02)
    assert test.now == pytest.approx(pearson(worse, gold), abs=0)
    assert test.then == pytest.approx(pearson(then, gold), abs=0)
    assert test.then - test.now > 0.2
    assert test.p_worse < 0.001 and test.p_within > 0.999
    # A tiny perturbation with a wide tolerance: shown to be within it.
    close = then + rng.normal(scale=0.005, size=300)
    near = bootstrap_margin_test(metric, _series(close, gold), _series(then, gold), 0.1)
    assert near.p_within < 0.001 and near.p_worse > 0.999
    # Seeded: the same inputs give the same p on every call.
    again = bootstrap_margin_test(metric, _series(worse, gold), _series(then, gold), 0.02)
    assert again == test


def test_bootstrap_detectable_drop_grows_as_units_shrink() -> None:
    rng = np.random.default_rng(2)
    gold = rng.uniform(0, 5, size=400)
    sims = gold / 5 + rng.normal(scale=0.2, size=400)
    metric = Metric("pearson")
    small = detectable_drop_bootstrap(metric, _series(sims[:40], gold[:40]), 0.02, 0.05)
    large = detectable_drop_bootstrap(metric, _series(sims, gold), 0.02, 0.05)
    assert small is not None and large is not None
    assert 0.02 < large < small
    assert detectable_drop_bootstrap(metric, _series(sims[:1], gold[:1]), 0.02, 0.05) is None


# -- which pairs moved a correlation ---------------------------------------------------------


def test_a_pair_whose_cosine_fell_into_its_gold_order_is_better_not_worse() -> None:
    # Gold ranks ascend 0.2 < 1 < 2 < 3 < 4 < 5 (t5, t4, t3, t2, t1, t0). Then: t4 and t5 out of
    # order (d = 1 each), rho = 1 - 6 * 2 / 210. Now: t5's cosine falls (60 -> 70 degrees) into
    # its gold order and t4 follows (d = 0), while t0/t1 and t2/t3 swap (d = 1 each):
    # rho = 1 - 6 * 4 / 210, a drop of 12 / 210 = 0.057143. Each swapped pair lowers rho by
    # 6 / 210 = 0.028571 and each mended one raises it by as much: 4 worse, 2 better. Raw cosine
    # change would call t0, t2 and t5 worse (their cosines fell) and t1 better. (The regression
    # item that words these shares runs in tests/integration/test_pair_suites.py.)
    from retrieval_gate.suites.pairs import KIND
    from tests.ledger import entry

    ids = [f"t{i}" for i in range(6)]
    gold = [5.0, 4.0, 3.0, 2.0, 1.0, 0.2]

    cos_then = np.cos(np.radians([10.0, 20.0, 30.0, 40.0, 65.0, 60.0]))
    cos_now = np.cos(np.radians([20.0, 10.0, 45.0, 40.0, 65.0, 70.0]))
    assert spearman(cos_then, np.array(gold)) == pytest.approx(1 - 12 / 210)
    assert spearman(cos_now, np.array(gold)) == pytest.approx(1 - 24 / 210)
    then, now = (
        entry(queries=ids, values={"cosine": list(cos), "gold_score": gold}).run
        for cos in (cos_then, cos_now)
    )
    found = KIND.contributions("spearman", ids, now, then)
    assert found is not None
    shares = {qid: share for qid, (share, _) in found.items()}
    assert shares == pytest.approx(
        {
            "t0": -6 / 210,
            "t1": -6 / 210,
            "t2": -6 / 210,
            "t3": -6 / 210,
            "t4": 6 / 210,
            "t5": 6 / 210,
        }
    )
    # Similarity ranks ascend with the cosine: t0 was 6th (as its gold), is 5th now; t4 was 1st
    # against its gold 2nd, and is 2nd now.
    assert found["t0"][1] == (
        "t0: similarity rank 6 -> 5 of 6, gold rank 6 (displacement 0 -> 1): spearman -0.0286"
    )
    assert found["t4"][1] == (
        "t4: similarity rank 1 -> 2 of 6, gold rank 2 (displacement 1 -> 0): spearman +0.0286"
    )
