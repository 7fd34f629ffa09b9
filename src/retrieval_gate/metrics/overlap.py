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

from collections.abc import Sequence

DEFAULT_P = 0.9


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
