"""A ranking suite's drift keys: ``unjudged`` queries, run for drift only (no judgments, no
metrics), and ``drift`` floors on how far the rankings may move from the baseline's, by RBO and
Jaccard@k (the measures: :mod:`retrieval_gate.metrics.overlap`; the check:
:mod:`retrieval_gate.gates.drift`). Every problem is a one-line
:class:`~retrieval_gate.errors.SuiteError` naming the entry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_gate.errors import SuiteError
from retrieval_gate.metrics.overlap import DEFAULT_P
from retrieval_gate.records import query_digest


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
