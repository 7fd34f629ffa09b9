"""A ranking suite's drift keys: ``unjudged`` queries, run for drift only (no judgments, no
metrics), and ``drift`` floors on how far the rankings may move from the baseline's, by RBO and
Jaccard@k (the measures: :mod:`retrieval_gate.metrics.overlap`; the check:
:mod:`retrieval_gate.gates.drift`), declared as an option table (:data:`DRIFT`). Every problem
is a one-line :class:`~retrieval_gate.errors.SuiteError` naming the entry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_gate.errors import SuiteError
from retrieval_gate.metrics.overlap import DEFAULT_P
from retrieval_gate.records import query_digest
from retrieval_gate.schema import Check, Option, OptionTable, at_least


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


def _floor(figure: str) -> Option:
    return Option(
        (int, float),
        None,
        f"the least mean {figure} over the compared queries",
        check=lambda v: 0 <= v <= 1,
        rule="0 to 1",
    )


DRIFT_OPTIONS: OptionTable = {
    "min_rbo": _floor("RBO@k (rank-biased overlap)"),
    "min_jaccard": _floor("Jaccard@k (overlap of the top k)"),
    "k": Option(
        int,
        None,
        "the cutoff both read; default: the suite's largest cutoff, which it may not exceed",
        check=at_least(1),
        rule=">= 1",
    ),
    "p": Option(
        (int, float),
        DEFAULT_P,
        "RBO's persistence",
        check=lambda v: 0 < v < 1,
        rule="strictly between 0 and 1",
    ),
}

#: A ranking suite's ``unjudged`` key.
UNJUDGED = Option(
    list,
    None,
    "queries run for drift only (no judgments, no metrics): texts, or `{id, query}`",
    check=bool,
    rule="not empty",
)

#: A ranking suite's ``drift`` key.
DRIFT = Option(
    dict,
    None,
    "floors on how far the rankings may move from the baseline's (docs/verdicts.md; its keys: "
    "the next table)",
    nested=lambda: DRIFT_OPTIONS,
    checks=(
        Check(
            "`drift` gives `min_rbo` or `min_jaccard`",
            lambda v: (
                None
                if v["min_rbo"] is not None or v["min_jaccard"] is not None
                else "'drift' needs min_rbo or min_jaccard"
            ),
        ),
    ),
)


def parse_unjudged(raw: Any, path: Path, taken: set[str]) -> tuple[tuple[str, str], ...]:
    """A suite's ``unjudged:`` list (a non-empty list: :data:`UNJUDGED`): query texts, or
    ``{id, query}`` mappings, as (id, text).

    The id defaults to the text, so inserting a query does not re-pair the others; ``taken``
    holds the judged queries' ids, which an unjudged query must not reuse.
    """
    if raw is None:
        return ()
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


def parse_drift(
    values: Any, path: Path, largest_k: int, unjudged: bool = False
) -> DriftFloors | None:
    """A suite's ``drift:`` floors (parsed by :data:`DRIFT`): ``{min_rbo: 0.8, min_jaccard: 0.5,
    k: 10, p: 0.9}``; k defaults to the suite's largest cutoff and may not exceed it (rankings
    are kept to that depth). ``unjudged``: the suite lists unjudged queries, which only drift
    reads, so they need floors."""
    if values is None:
        if unjudged:
            raise SuiteError(
                "'unjudged' queries are compared only by drift floors: add "
                "'drift: {min_rbo: 0.8}' (or min_jaccard)",
                path=path,
                entry="unjudged",
            )
        return None
    k = largest_k if values["k"] is None else values["k"]
    if k > largest_k:
        raise SuiteError(
            f"drift k must be at most the suite's largest cutoff {largest_k}, got {k}",
            path=path,
            entry="drift.k",
        )
    floors = {
        key: None if values[key] is None else float(values[key])
        for key in ("min_rbo", "min_jaccard")
    }
    return DriftFloors(k=k, p=float(values["p"]), **floors)


def unjudged_digest(text: str) -> str:
    """An unjudged query's digest: its text's, as :func:`query_digest` with no judgments."""
    return query_digest(text, {})
