"""The system protocol: what every kind of system (and every stage wrapped around one) provides.

A system is opened from its :class:`~retrieval_gate.systems.config.SystemConfig`; then
``retrieve(queries, depth)`` returns, per ``(qid, text)`` query, the scored hits and the wall
time of that query's retrieval. It names itself for the fingerprint (:meth:`System.identity`,
never a machine-specific path), reports corpus and cache figures (:attr:`System.stats`) and is
closed when the run is done. The ranking of the hits (score descending, ties by document id
descending: :func:`retrieval_gate.metrics.rank_scored`) is done once, by the caller.

Kinds and stages plug in by name (:func:`register_kind`, :func:`register_stage`); each declares
its own option table. Standard library only at import: settings are parsed while collecting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from retrieval_gate.schema import OptionTable, Where

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.systems.config import StageConfig, SystemConfig

__all__ = [
    "BatchSystem",
    "OpenContext",
    "Retrieved",
    "RunOptions",
    "Stage",
    "StageKind",
    "System",
    "SystemKind",
    "is_batched",
    "retrieve_hits",
]

Query = tuple[str, str]  # (qid, text)


@dataclass(frozen=True)
class RunOptions:
    cache_dir: Path
    use_cache: bool = True
    progress: bool = False
    # Loaded embedders by spec, shared by every run of a session (one model load each).
    embedders: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False)
    # What systems over the same model and texts share in a session (systems/embedding/):
    # the units of a corpus, the vectors read from the cache, an exact index built from them.
    shared: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class OpenContext:
    """What opening a system may need besides its own config.

    ``root`` is the settings folder (the user's own modules import from there) and ``source``
    the settings file errors name. ``corpus`` is the corpus already loaded for this run (None
    when the caller leaves loading to the system, which then reads ``corpus_path``: the suite's
    corpus, else the system's, else the project's). ``where`` is the suite file being run, named
    in errors about its queries (None for the ``retrieval_system`` fixture). ``latency_needed``:
    this run times some queries (a latency gate or a decision weight reads its latency, or
    ``latency_sample`` asks for it), so the timed ones must be embedded and searched for real
    (no cached vector or result stands in for the timed path). ``latency_sample``: how many of
    a suite's queries are timed through the single-query path when the system also ranks in
    batches (0: none; every query when the suite has no more). ``query_ids`` are the ids of the
    queries the run will ask (a ranking suite's judged queries; empty where unknown), so a
    stored run can say at once which of them it does not answer. ``held_out`` are the ids of
    the suite's held-out units (suites/holdout.py): a system's notes and warnings about the ids
    it returned or did not answer count theirs and name none of them.
    """

    options: RunOptions
    root: Path
    source: Path | None = None
    corpus: Corpus | None = None
    corpus_path: Path | None = None
    where: Path | None = None
    latency_needed: bool = False
    latency_sample: int = 0
    query_ids: tuple[str, ...] = ()
    held_out: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Retrieved:
    """One query's result: its hits (document id -> score, in no particular order) and the wall
    time of its retrieval in milliseconds (0.0 where the system does not measure it)."""

    hits: Mapping[str, float]
    latency_ms: float


@runtime_checkable
class System(Protocol):
    """An opened system (or a stage wrapped around one)."""

    config: SystemConfig

    #: False for systems whose latency is not a retrieval's (a stored run): latency is reported
    #: as 0.0 and a latency gate on such a system means nothing.
    measures_latency: bool

    def retrieve(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Retrieved]:
        """Hits for each query, at least the top ``depth`` of them where the system has as many.

        ``cutoff`` is the deepest cutoff the caller measures (an approximate index reports how
        much of exact search's top ``cutoff`` it finds); ``where`` is the file named in errors
        about one query (the suite).
        """
        ...

    def identity(self) -> Mapping[str, Any]:
        """What names this system in a baseline fingerprint: settings and content digests."""
        ...

    @property
    def stats(self) -> Mapping[str, Any]:
        """Corpus, cache and index figures of the last ``retrieve`` (shown in the report)."""
        ...

    @property
    def fingerprint_fields(self) -> Mapping[str, Any]:
        """Further fingerprint entries: the corpus digest, the model identity."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class BatchSystem(Protocol):
    """A system that also ranks many queries in one call (an embedding system: one batched
    search instead of one per query). Optional beside :class:`System`: the runner ranks with
    :meth:`retrieve_batch` and times only a sample of the queries through ``retrieve``. A
    user's retriever and a run file have no batched path: each of their queries is one call,
    timed.
    """

    #: False on a wrapper whose inner system ranks one query at a time.
    batched: bool

    def retrieve_batch(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Mapping[str, float]]:
        """Each query's hits, as :meth:`System.retrieve` would return them, untimed. A query's
        hits must not depend on the other queries of the call."""
        ...


def is_batched(system: object) -> bool:
    """Whether ``system`` ranks in batches (:class:`BatchSystem` with ``batched`` true)."""
    return bool(getattr(system, "batched", False)) and callable(
        getattr(system, "retrieve_batch", None)
    )


def retrieve_hits(
    system: System,
    queries: Sequence[Query],
    depth: int,
    *,
    cutoff: int | None = None,
    where: Path | None = None,
) -> list[Mapping[str, float]]:
    """Each query's hits: in one batch where the system has that path, else query by query."""
    if is_batched(system):
        batch: BatchSystem = system  # type: ignore[assignment]
        return batch.retrieve_batch(queries, depth, cutoff=cutoff, where=where)
    return [r.hits for r in system.retrieve(queries, depth, cutoff=cutoff, where=where)]


@dataclass(frozen=True)
class SystemKind:
    """A kind of system, selected by which of the kinds' ``key`` a system table gives.

    ``options`` holds the kind's own keys (``key`` included); ``backend_options`` returns the
    tables of the backends a given table chooses (the embedder's and the index's), so a key is
    known only where it means something. ``check`` validates across keys once parsed;
    ``identity`` builds the fingerprint identity from the parsed options, and ``open`` opens it.
    """

    name: str
    key: str
    options: OptionTable
    open: Callable[[SystemConfig, OpenContext], System]
    identity: Callable[[Mapping[str, Any]], dict[str, Any]]
    summary: str
    backend_options: Callable[[Mapping[str, Any], Where], OptionTable] | None = None
    check: Callable[[Mapping[str, Any], Where], None] | None = None


@dataclass(frozen=True)
class StageKind:
    """A stage: wraps an opened system and re-scores or filters its hits.

    Listed in a system's ``stages`` as tables ``{stage = "NAME", ...options}``, applied in order,
    each to the system the previous one returned. ``wrap`` builds the wrapper.
    """

    name: str
    options: OptionTable
    wrap: Callable[[System, StageConfig, OpenContext], System]
    summary: str


class Stage:
    """Base of a stage: delegates everything to the wrapped system and re-scores its hits.

    A subclass implements :meth:`apply` (and :meth:`inner_depth` when it needs more candidates
    than it returns, as a reranker does). The time :meth:`apply` takes is added to each query's
    latency; the stage's name and options are added to the identity, so a baseline taken
    without the stage does not compare with a run through it.
    """

    def __init__(self, inner: System, stage: StageConfig, context: OpenContext) -> None:
        self.inner = inner
        self.stage = stage
        self.context = context
        self.config = inner.config
        self.measures_latency = inner.measures_latency
        # Seconds spent in apply() on the batched path: part of the search, in the timings.
        self._batch_seconds = 0.0

    @property
    def batched(self) -> bool:
        """Batched when the wrapped system is (a retriever stays one call per query)."""
        return is_batched(self.inner)

    def inner_depth(self, depth: int) -> int:
        """How many hits to ask the wrapped system for, to return ``depth``."""
        return depth

    def apply(self, qid: str, text: str, hits: Mapping[str, float]) -> Mapping[str, float]:
        """The query's hits after this stage (re-scored, filtered)."""
        raise NotImplementedError

    def retrieve(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Retrieved]:
        found = self.inner.retrieve(queries, self.inner_depth(depth), cutoff=cutoff, where=where)
        out = []
        for (qid, text), result in zip(queries, found, strict=True):
            start = time.perf_counter()
            hits = self.apply(qid, text, result.hits)
            spent = (time.perf_counter() - start) * 1000.0 if self.measures_latency else 0.0
            out.append(Retrieved(hits=dict(hits), latency_ms=result.latency_ms + spent))
        return out

    def retrieve_batch(
        self,
        queries: Sequence[Query],
        depth: int,
        *,
        cutoff: int | None = None,
        where: Path | None = None,
    ) -> list[Mapping[str, float]]:
        """The wrapped system's hits for every query (batched where it can), then this stage
        per query, as :meth:`retrieve` applies it."""
        found = retrieve_hits(
            self.inner, queries, self.inner_depth(depth), cutoff=cutoff, where=where
        )
        start = time.perf_counter()
        out: list[Mapping[str, float]] = [
            dict(self.apply(qid, text, hits))
            for (qid, text), hits in zip(queries, found, strict=True)
        ]
        self._batch_seconds += time.perf_counter() - start
        return out

    def identity(self) -> Mapping[str, Any]:
        inner = dict(self.inner.identity())
        stages = [*inner.pop("stages", []), self.stage.identity]
        return {**inner, "stages": stages}

    @property
    def stats(self) -> Mapping[str, Any]:
        stats = self.inner.stats
        if self._batch_seconds and "timings_ms" in stats:
            from retrieval_gate.systems.timings import merge_timings

            stats = {**stats, "timings_ms": merge_timings(stats, search=self._batch_seconds)}
        return stats

    @property
    def fingerprint_fields(self) -> Mapping[str, Any]:
        return self.inner.fingerprint_fields

    def close(self) -> None:
        self.inner.close()
