"""Drift without labels: how much a run's rankings moved from the baseline's, by overlap.

A judged metric sees only the judged documents. When the rankings churn among unjudged ones (a
new embedder, a changed chunker), nDCG may not move while users see different results. This
module compares each query's top k now with the baseline's top k, without any judgment:

Rank-biased overlap (Webber, Moffat and Zobel 2010, "A similarity measure for indefinite
rankings", eq. 32), extrapolated, for two prefixes S (length s) and L (length l >= s; the longer
one) with persistence p:

    X_d      = |S[:d] ∩ L[:d]|   (for d > s: |S ∩ L[:d]|)
    RBO_ext  = (1 - p) / p * ( sum_{d=1..l} X_d / d * p^d
                               + sum_{d=s+1..l} X_s * (d - s) / (s * d) * p^d )
               + ( (X_l - X_s) / l + X_s / s ) * p^l

It assumes the agreement seen at the end of the prefixes holds below them. With s = l = k the
second sum is empty and the tail is X_k / k * p^k. p = 0.9 puts about 86 % of the weight on the
first 10 ranks. Identical rankings give 1, disjoint ones 0; a ranking that is a prefix of the
other gives 1 (nothing seen disagrees).

Jaccard@k = |A[:k] ∩ B[:k]| / |A[:k] union B[:k]|: every rank counts the same, order ignored.

Edge cases: two empty rankings are identical (1 for both); one empty and one not: 0. Rankings are
strict (no document twice), as every ranking of the plugin is.

A scope's figure is the mean over the queries both runs hold. :func:`check_drift` turns the
means into a pass or fail against floors (``min_rbo``, ``min_jaccard``), listing the queries that
moved most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from retrieval_gate.records import Outcome, RunRecord, format_value

__all__ = ["DEFAULT_P", "DriftFloors", "check_drift", "jaccard_at_k", "rbo_ext"]

DEFAULT_P = 0.9
#: How many of the most changed queries a drift outcome lists.
SHOWN = 5


def rbo_ext(first: Sequence[str], second: Sequence[str], p: float = DEFAULT_P) -> float:
    """Extrapolated rank-biased overlap of two rankings (see the module docstring), in [0, 1]."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p}")
    short, long_ = (first, second) if len(first) <= len(second) else (second, first)
    s, n_long = len(short), len(long_)
    if n_long == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = 0
    total = 0.0
    x_s = 0
    for d in range(1, n_long + 1):
        if d <= s:
            doc = short[d - 1]
            overlap += doc in seen_long
            seen_short.add(doc)
        doc = long_[d - 1]
        # Counted once: the short side's document was looked up among L[:d-1], this one among
        # S[:d], so a document at the same rank in both adds 1 here and 0 above.
        overlap += doc in seen_short
        seen_long.add(doc)
        total += overlap / d * p**d
        if d == s:
            x_s = overlap
        elif d > s:
            total += x_s * (d - s) / (s * d) * p**d
    x_l = overlap
    return (1.0 - p) / p * total + ((x_l - x_s) / n_long + x_s / s) * p**n_long


def jaccard_at_k(first: Sequence[str], second: Sequence[str], k: int) -> float:
    """|A[:k] ∩ B[:k]| / |A[:k] union B[:k]|; 1 when both are empty."""
    a, b = set(first[:k]), set(second[:k])
    union = a | b
    return len(a & b) / len(union) if union else 1.0


@dataclass(frozen=True)
class DriftFloors:
    """A suite's drift floors: the least mean RBO / Jaccard@k over the compared queries (None:
    not gated), the cutoff k both read and RBO's persistence p."""

    k: int
    min_rbo: float | None = None
    min_jaccard: float | None = None
    p: float = DEFAULT_P


def check_drift(
    record: RunRecord,
    base: RunRecord,
    shared: Sequence[str],
    floors: DriftFloors,
    texts: Mapping[str, str] | None = None,
) -> list[Outcome]:
    """One outcome per floor: the mean RBO_ext / Jaccard@k of the current top k against the
    baseline's top k over ``shared`` queries. Needs no judgments: each query's stored ranking
    (the top max(k) in both records) is all it reads."""
    rbo = {
        q: rbo_ext(record.query(q).ranking[: floors.k], base.query(q).ranking[: floors.k], floors.p)
        for q in shared
    }
    jac = {
        q: jaccard_at_k(record.query(q).ranking, base.query(q).ranking, floors.k) for q in shared
    }
    wanted = [
        (f"RBO@{floors.k}", floors.min_rbo, rbo),
        (f"Jaccard@{floors.k}", floors.min_jaccard, jac),
    ]
    outcomes = []
    for name, floor, values in wanted:
        if floor is None:
            continue
        mean = sum(values.values()) / len(values) if values else 1.0
        moved = sorted(values.items(), key=lambda item: item[1])[:SHOWN]
        moved = [(q, v) for q, v in moved if v < 1.0]
        how = f"p = {floors.p:g}, extrapolated" if name.startswith("RBO") else "order ignored"
        outcomes.append(
            Outcome(
                suite=record.suite,
                system=record.system,
                scope="drift",
                metric=name,
                value=mean,
                threshold=floor,
                passed=mean >= floor - 1e-9,
                n=len(values),
                worst=tuple(moved),
                texts={q: t for q, t in (texts or {}).items() if q in dict(moved)},
                detail=(
                    f"top {floors.k} now against the baseline's top {floors.k} over {len(values)} "
                    f"queries ({how}): mean {format_value(mean)}, floor {format_value(floor)}",
                ),
            )
        )
    return outcomes
