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
from pathlib import Path
from typing import Any

from retrieval_gate.errors import SuiteError
from retrieval_gate.records import Outcome, RunRecord, format_value, query_digest

__all__ = [
    "DEFAULT_P",
    "DriftFloors",
    "check_drift",
    "drift_rankings",
    "jaccard_at_k",
    "parse_drift",
    "parse_unjudged",
    "rbo_ext",
    "unjudged_digest",
]

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

    @property
    def metrics(self) -> tuple[str, ...]:
        """The gated figures' names, as items and outcomes carry them."""
        names = [f"RBO@{self.k}"] if self.min_rbo is not None else []
        return (*names, *([f"Jaccard@{self.k}"] if self.min_jaccard is not None else []))


def drift_rankings(
    record: RunRecord, base: RunRecord, shared: Sequence[str]
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """(now, then) rankings of every query both runs hold unchanged: the judged ``shared`` ones
    and the unjudged (drift) queries whose id and text are the same in both."""
    now = {q: record.query(q).ranking for q in shared}
    then = {q: base.query(q).ranking for q in shared}
    for qid, (digest, ranking) in record.drift_rankings.items():
        before = base.drift_rankings.get(qid)
        if before is not None and before[0] == digest:
            now[qid], then[qid] = ranking, before[1]
    return now, then


def check_drift(
    record: RunRecord,
    base: RunRecord,
    shared: Sequence[str],
    floors: DriftFloors,
    texts: Mapping[str, str] | None = None,
) -> list[Outcome]:
    """One outcome per floor: the mean RBO_ext / Jaccard@k of the current top k against the
    baseline's top k over the queries :func:`drift_rankings` pairs. Needs no judgments: the
    stored rankings (the top max(k) in both records) are all it reads. No paired query: 1."""
    now, then = drift_rankings(record, base, shared)
    k = floors.k
    rbo = {q: rbo_ext(now[q][:k], then[q][:k], floors.p) for q in now}
    jac = {q: jaccard_at_k(now[q], then[q], k) for q in now}
    wanted = [(f"RBO@{k}", floors.min_rbo, rbo), (f"Jaccard@{k}", floors.min_jaccard, jac)]
    outcomes = []
    for name, floor, values in wanted:
        if floor is None:
            continue
        mean = sum(values.values()) / len(values) if values else 1.0
        moved = [(q, v) for q, v in sorted(values.items(), key=lambda item: item[1]) if v < 1.0]
        how = f"p = {floors.p:g}, extrapolated" if name.startswith("RBO") else "order ignored"
        shown = dict(moved[:SHOWN])
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
                worst=tuple(moved[:SHOWN]),
                texts={q: t for q, t in (texts or {}).items() if q in shown},
                detail=(
                    f"top {k} now against the baseline's top {k} over {len(values)} queries "
                    f"({how}), {len(moved)} of them changed: mean {format_value(mean)}, floor "
                    f"{format_value(floor)}",
                ),
            )
        )
    return outcomes


_DRIFT_KEYS = ("k", "min_rbo", "min_jaccard", "p")


def parse_unjudged(raw: Any, path: Path, taken: set[str]) -> tuple[tuple[str, str], ...]:
    """A suite's ``unjudged:`` list: query texts, or ``{id, query}`` mappings, as (id, text).

    The id defaults to the text, so inserting a query does not re-pair the others; ``taken``
    holds the judged queries' ids, which an unjudged query must not reuse.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise SuiteError(
            "'unjudged' must be a non-empty list of query texts or {id, query}", path=path,
            entry="unjudged",
        )  # fmt: skip
    out: list[tuple[str, str]] = []
    seen = set(taken)
    for i, item in enumerate(raw):
        entry = f"unjudged[{i}]"
        if isinstance(item, dict):
            unknown = sorted(str(key) for key in item if key not in ("id", "query", "text"))
            if unknown:
                raise SuiteError(
                    f"unknown key {unknown[0]!r}; an unjudged query has id and query", path=path,
                    entry=entry,
                )  # fmt: skip
            text, qid = item.get("query", item.get("text")), item.get("id")
        else:
            text, qid = item, None
        if not isinstance(text, str) or not text.strip():
            raise SuiteError("an unjudged query needs non-empty text", path=path, entry=entry)
        qid = text if qid is None else qid
        if not isinstance(qid, (str, int)) or isinstance(qid, bool):
            raise SuiteError(f"query id must be a string, got {qid!r}", path=path, entry=entry)
        qid = str(qid)
        if qid in seen:
            raise SuiteError(f"duplicate query id {qid!r}", path=path, entry=entry)
        seen.add(qid)
        out.append((qid, text))
    return tuple(out)


def parse_drift(raw: Any, path: Path, largest_k: int, unjudged: bool = False) -> DriftFloors | None:
    """A suite's ``drift:`` floors: ``{min_rbo: 0.8, min_jaccard: 0.5, k: 10, p: 0.9}``; at
    least one floor; k defaults to the suite's largest cutoff and may not exceed it (rankings are
    kept to that depth). ``unjudged``: the suite lists unjudged queries, which only drift reads,
    so they need floors."""
    if raw is None:
        if unjudged:
            raise SuiteError(
                "'unjudged' queries are compared only by drift floors: add "
                "'drift: {min_rbo: 0.8}' (or min_jaccard)",
                path=path,
                entry="unjudged",
            )
        return None
    if not isinstance(raw, dict):
        raise SuiteError(
            "'drift' must be a mapping such as {min_rbo: 0.8}", path=path, entry="drift"
        )
    unknown = sorted(str(key) for key in raw if key not in _DRIFT_KEYS)
    if unknown:
        raise SuiteError(
            f"unknown key {unknown[0]!r}; known keys: {', '.join(_DRIFT_KEYS)}", path=path,
            entry=f"drift.{unknown[0]}",
        )  # fmt: skip

    def number(key: str, lo: float, hi: float, closed: bool) -> float | None:
        value = raw.get(key)
        if value is None:
            return None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and (lo <= value <= hi if closed else lo < value < hi)
        if not ok:
            where = f"[{lo:g}, {hi:g}]" if closed else f"({lo:g}, {hi:g})"
            raise SuiteError(
                f"{key} must be a number in {where}, got {value!r}", path=path,
                entry=f"drift.{key}",
            )  # fmt: skip
        return float(value)

    min_rbo, min_jaccard = number("min_rbo", 0, 1, True), number("min_jaccard", 0, 1, True)
    if min_rbo is None and min_jaccard is None:
        raise SuiteError("'drift' needs min_rbo or min_jaccard", path=path, entry="drift")
    k = raw.get("k", largest_k)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= largest_k:
        raise SuiteError(
            f"drift k must be an integer from 1 to the suite's largest cutoff {largest_k}, "
            f"got {k!r}",
            path=path,
            entry="drift.k",
        )
    p = number("p", 0, 1, False)
    return DriftFloors(
        k=k, min_rbo=min_rbo, min_jaccard=min_jaccard, p=DEFAULT_P if p is None else p
    )


def unjudged_digest(text: str) -> str:
    """An unjudged query's digest: its text's, as :func:`query_digest` with no judgments."""
    return query_digest(text, {})
