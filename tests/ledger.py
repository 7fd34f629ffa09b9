"""The one builder of ledger entries the tests use (baseline/entry.py's ``Entry``), from the
figures a test cares about: a suite x system at a commit and time, its metrics and, per query,
its values; and of a run known by its rankings alone (``ranked_run``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval_gate.baseline.entry import Entry, encode_line
from retrieval_gate.baseline.provenance import Provenance
from retrieval_gate.records import HoldoutRecord, QueryRecord, RunRecord


def entry(
    *,
    suite: str = "lineage",
    system: str = "keyword",
    at: Provenance | None = None,
    commit: str | None = "abc1234" + "0" * 33,
    time: str = "2026-09-30T12:00:00Z",
    suite_digest: str = "s",
    identity: str = "i",
    source: str = "baseline",
    decided: bool = False,
    session: str = "s",
    n: int | None = None,
    metrics: Mapping[str, float] | None = None,
    tolerance: Mapping[str, float] | None = None,
    queries: Sequence[str] = (),
    digests: Sequence[str] = (),
    values: Mapping[str, Sequence[float]] | None = None,
    exact: Mapping[str, Sequence[float]] | None = None,
    definitions: Mapping[str, str] | None = None,
    holdout_digest: str = "",
    holdout_decisions: int = 0,
    holdout_keys: Sequence[str] = (),
    holdout_values: Mapping[str, Sequence[float]] | None = None,
    accepted_drift: Sequence[str] = (),
    compacted: bool = False,
) -> Entry:
    """An entry whose run holds ``queries`` (with ``digests``; ``values`` per metric in their
    order, ``exact`` the same under exact search); ``n`` defaults to the queries' count."""
    values = values or {}
    exact = exact or {}
    digests = tuple(digests) or tuple(f"d-{q}" for q in queries)
    units = tuple(
        QueryRecord(
            id=qid,
            digest=digests[i],
            category=None,
            difficulty=None,
            metrics={m: v[i] for m, v in values.items()},
            ranking=(),
            relevant_ranks={},
            exact_metrics={m: v[i] for m, v in exact.items()} if exact else None,
        )
        for i, qid in enumerate(queries)
    )
    held = (
        HoldoutRecord(
            0.0,
            tuple(holdout_keys),
            {m: tuple(v) for m, v in (holdout_values or {}).items()},
            holdout_digest,
        )
        if holdout_keys
        else None
    )
    run = RunRecord(
        suite=suite,
        suite_path="",
        system=system,
        n=len(units) if n is None else n,
        k=(),
        fingerprint={},
        metrics=dict(metrics if metrics is not None else {"P@1": 0.5}),
        categories={},
        difficulties={},
        latency_ms={},
        stats={"latency_measured": False},
        queries=units,
        holdout=held,
    )
    return Entry(
        run=run,
        at=at if at is not None else Provenance(commit=commit, time=time),
        source=source,
        decided=decided,
        session=session,
        tolerance=dict(tolerance if tolerance is not None else {"P@1": 0.01}),
        identity=identity,
        suite_digest=suite_digest,
        definitions=dict(definitions or {}),
        holdout_digest=holdout_digest,
        holdout_n=len(holdout_keys),
        holdout_decisions=holdout_decisions,
        accepted_drift=tuple(accepted_drift),
        compacted=compacted,
    )


def ranked_run(
    rankings: Mapping[str, Sequence[str]],
    relevant: Mapping[str, Mapping[str, int | None]] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
) -> RunRecord:
    """A run of suite ``s`` x system ``sys`` whose queries rank ``rankings`` (query id -> its
    document ids), each with its relevant documents' ranks from ``relevant``, no values."""
    relevant = relevant or {}
    return RunRecord(
        suite="s",
        suite_path="s.retrieval.yaml",
        system="sys",
        n=len(rankings),
        k=(3,),
        fingerprint={},
        metrics={},
        categories={},
        difficulties={},
        latency_ms={},
        stats={},
        queries=tuple(
            QueryRecord(
                id=q, digest=q, category=None, difficulty=None, metrics={}, ranking=tuple(r),
                relevant_ranks=dict(relevant.get(q, {})), labels=dict(labels or {}),
            )
            for q, r in rankings.items()
        ),
    )  # fmt: skip


def line(**fields: object) -> bytes:
    """One encoded history line of :func:`entry`'s entry."""
    return encode_line(entry(**fields))  # type: ignore[arg-type]
