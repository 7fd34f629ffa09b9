"""Metrics over a run: per-unit values for every metric a suite reports or gates on.

The step between the run and the gates: it turns a :class:`~retrieval_gate.suites.result.RunResult`
into an :class:`Evaluation` (plain arrays plus the run) through the same ``judge``/``compute``
code path as the public :func:`retrieval_gate.evaluate` (the suite's kind provides the inputs of
the other metric families), and the evaluation into the typed
:class:`~retrieval_gate.records.RunRecord` every later stage (gates, baseline, report) reads.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval_gate.metrics import Metric, compute, judge, latency_stats, metric_versions
from retrieval_gate.records import GroupRecord, HoldoutRecord, QueryRecord, RunRecord, scope_name
from retrieval_gate.suites.drift import unjudged_digest
from retrieval_gate.suites.result import RunResult
from retrieval_gate.systems.timings import merge_timings

if TYPE_CHECKING:
    from retrieval_gate.suites.kind import Resources
    from retrieval_gate.suites.suite import Suite

__all__ = ["Evaluation", "evaluate_run", "record_run"]

#: Inputs every kind's runs provide without asking the kind: the kernel judges rankings, and
#: latency metrics read the run's times.
_SHARED_INPUTS = frozenset({"ranking", "latency"})


@dataclass(frozen=True)
class Evaluation:
    run: RunResult
    metrics: tuple[Metric, ...]  # ranking metrics, in report order
    values: Mapping[str, np.ndarray]  # metric name -> per-query values aligned with run.qids
    latency: Mapping[str, float]  # p50/p95/p99/mean in ms, over the timed queries
    # The kind's names for the ids its records show (SuiteKind.labels); None: ids are names.
    labels: Callable[[str], str | None] | None = None
    seconds: float = 0.0  # what computing the values took (the report's "metrics" time)
    # The indices of the suite's holdout units (suites/holdout.py): in no scope below, so every
    # value of the record is over the other units.
    hidden: frozenset[int] = frozenset()
    # The ranking metrics over each unit's exact-search ranking (RunResult.exact_rankings), for
    # an index that may rank differently each run; None otherwise.
    exact_values: Mapping[str, np.ndarray] | None = None
    # The metrics the suite's floors and the session's regression checks name, whole-suite
    # floors first, in the order declared: the summary's columns, whichever items ran.
    gated: tuple[str, ...] = ()

    @cached_property
    def scopes(self) -> dict[str, np.ndarray]:
        """Scope name -> indices of its queries (the holdout's left out): suite, every category
        and difficulty."""
        queries = self.run.suite.queries
        shown = [i for i in range(len(queries)) if i not in self.hidden]
        scopes = {"suite": np.array(shown, dtype=np.int64)}
        for kind in ("category", "difficulty"):
            labels = {i: getattr(queries[i], kind) for i in shown}
            for label in sorted({x for x in labels.values() if x is not None}):
                scopes[scope_name(kind, label)] = np.array(
                    [i for i, x in labels.items() if x == label], dtype=np.int64
                )
        return scopes

    def value(self, metric: Metric, scope: str = "suite") -> float:
        if metric.is_latency:
            return self.latency[metric.family.removeprefix("latency_").removesuffix("_ms")]
        # The metric's own aggregation over the scope's queries (a mean for the ranking metrics).
        rows = self.scopes[scope]
        return metric.aggregate(self.values[metric.name][rows], self.components(metric, rows))

    def components(self, metric: Metric, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The per-unit series ``metric``'s aggregation reads besides its own, at ``rows``."""
        return {name: self.values[name][rows] for name in metric.spec.aggregation.components}

    def interval(self, metric: Metric, seed: int) -> tuple[float, float]:
        """The seeded bootstrap 95 % interval of the suite value (:func:`stats.bootstrap_ci`)."""
        from retrieval_gate.metrics.bootstrap import bootstrap_ci

        rows = self.scopes["suite"]
        return bootstrap_ci(
            metric, self.values[metric.name][rows], self.components(metric, rows), seed
        )

    def n(self, scope: str = "suite") -> int:
        return int(self.scopes[scope].size)

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {qid: i for i, qid in enumerate(self.run.qids)}

    def query_index(self, qid: str) -> int:
        # A dict, not qids.index: the report asks for every query, which would be quadratic.
        return self._positions[qid]

    def relevant_ranks(self, qid: str) -> dict[str, int | None]:
        """Each relevant (grade >= 1) document of the query and its 1-based rank, None if absent."""
        i = self.query_index(qid)
        query = self.run.suite.queries[i]
        position = {doc: r for r, doc in enumerate(self.run.rankings[i], start=1)}
        return {doc: position.get(doc) for doc, g in query.relevant.items() if g >= 1}


def evaluate_run(
    run: RunResult, extra: tuple[Metric, ...] = (), *, resources: Resources | None = None
) -> Evaluation:
    """Every metric the suite's kind reports unasked, plus whatever its gates, expectations and
    ``extra`` (tolerances) name. ``resources``: what the kind may load for its metric inputs (an
    ontology suite's ontology)."""
    began = time.perf_counter()
    suite = run.suite
    kind = suite.kind_object
    wanted: dict[str, Metric] = {m.name: m for m in kind.default_metrics(suite)}
    for gate in suite.all_gates:
        if not gate.metric.is_latency:
            wanted.setdefault(gate.metric.name, gate.metric)
    for query in suite.queries:
        for exp in query.expect:
            if exp.metric is not None:
                wanted.setdefault(exp.metric.name, exp.metric)
    for metric in extra:
        if not metric.is_latency:
            wanted.setdefault(metric.name, metric)
    # A component an aggregation reads (TP for P_micro, gold_score for pearson) is computed too.
    for metric in list(wanted.values()):
        for name in metric.spec.aggregation.components:
            wanted.setdefault(name, Metric(name))
    metrics = tuple(wanted.values())
    ranked = [m for m in metrics if m.spec.input == "ranking"]
    values: dict[str, np.ndarray] = {}
    exact_values = None
    if ranked:
        judged = judge(suite.qrels, run.qids, run.rankings)
        values = compute(judged, ranked, gain=kind.gain(suite))
        if run.exact_rankings is not None:
            searched = judge(suite.qrels, run.qids, run.exact_rankings)
            exact_values = compute(searched, ranked, gain=kind.gain(suite))
    others: set[str] = {str(m.spec.input) for m in metrics} - _SHARED_INPUTS
    if others:
        if resources is None:
            raise ValueError(f"{sorted(others)} inputs need the session's resources")
        provided = kind.metric_inputs(run, others, resources)
        for input_kind in sorted(others):
            if input_kind not in provided:
                raise ValueError(f"suite kind {kind.name!r} provides no {input_kind!r} input")
            inputs = provided[input_kind]
            values.update(
                (m.name, m.spec.compute(inputs, m.k)) for m in metrics if m.spec.input == input_kind
            )
    # Report order: the suite's metrics as wanted, whatever input each is computed from.
    values = {m.name: values[m.name] for m in metrics}
    for name, found in values.items():
        # Inputs are bounded where they are read (grades, scores, a plug-in metric's values), so
        # a value that is not a number is this plugin's bug: raised as one (with its traceback),
        # never passed on to a report or a baseline that would then be refused as corrupt.
        if not np.isfinite(found).all():
            at = int(np.flatnonzero(~np.isfinite(found))[0])
            unit = run.qids[at] if at < len(run.qids) else f"#{at + 1}"
            raise ArithmeticError(f"{name} of {suite.name} unit {unit!r} is not a finite number")
    # Untimed queries (NaN: outside the latency sample) have no latency to count.
    timed = [ms for ms in run.latencies_ms if not math.isnan(ms)]
    return Evaluation(
        run=run,
        metrics=metrics,
        values=values,
        latency=latency_stats(timed),
        labels=None if resources is None else kind.labels(run, resources),
        seconds=time.perf_counter() - began,
        exact_values=exact_values,
        gated=_gated(suite, extra, wanted),
    )


def _gated(
    suite: Suite, extra: tuple[Metric, ...], computed: Mapping[str, Metric]
) -> tuple[str, ...]:
    """The computed metrics the suite's floors name (whole-suite floors first, each group in
    the order the file declares them), then those the regression checks name. Declared, not
    taken from the gates that ran: ``--lf`` or ``-k`` would otherwise change the summary's
    columns, and failing first would reorder them with the verdicts."""
    floors = sorted(suite.all_gates, key=lambda g: g.scope != "suite")
    names = [g.metric.name for g in floors] + [m.name for m in extra]
    return tuple(name for name in dict.fromkeys(names) if name in computed)


def _labels(labeler: Callable[[str], str | None] | None, ids: Iterable[str]) -> dict[str, str]:
    if labeler is None:
        return {}
    found = {doc: labeler(doc) for doc in dict.fromkeys(ids)}
    return {doc: label for doc, label in found.items() if label}


def record_run(evaluation: Evaluation, suite_path: str, *, seed: int = 0) -> RunRecord:
    """The run as the typed record the gates, the baseline and the report read: values per scope,
    latency, stats and every unit's values, ranking and relevant ranks (what each unit keeps is
    its kind's: :meth:`~retrieval_gate.suites.kind.SuiteKind.unit_record`). A kind with few units
    gets seeded bootstrap 95 % intervals of its values (``seed``: the settings' seed)."""
    from retrieval_gate.suites.holdout import holdout_ids

    began = time.perf_counter()
    held_out = holdout_ids(evaluation.run.suite, seed)
    timed: list[float] | None = None  # the visible units' latencies, when some are held out
    if held_out:
        hidden = frozenset(
            i for i, q in enumerate(evaluation.run.suite.queries) if q.id in held_out
        )
        timed = [
            ms
            for i, ms in enumerate(evaluation.run.latencies_ms)
            if i not in hidden and not math.isnan(ms)
        ]
        evaluation = dataclasses.replace(evaluation, hidden=hidden, latency=latency_stats(timed))
    run = evaluation.run
    suite = run.suite
    kind = suite.kind_object
    metrics = evaluation.metrics
    cut = max(suite.k)

    def means(scope: str) -> dict[str, float]:
        return {m.name: evaluation.value(m, scope) for m in metrics}

    def groups(kind: str) -> dict[str, GroupRecord]:
        labels = suite.categories if kind == "category" else suite.difficulties
        return {
            label: GroupRecord(
                n=evaluation.n(scope_name(kind, label)), metrics=means(scope_name(kind, label))
            )
            for label in labels
            # A label whose every unit is held out has no visible value (suites/holdout.py).
            if scope_name(kind, label) in evaluation.scopes
        }

    # One tolist() per metric is far cheaper than a float() per value.
    columns = {m.name: evaluation.values[m.name].tolist() for m in metrics}
    exact = {name: found.tolist() for name, found in (evaluation.exact_values or {}).items()}
    queries = []
    for i, query in enumerate(suite.queries):
        if i in evaluation.hidden:
            continue
        kept = kind.unit_record(run, i)
        ranks = evaluation.relevant_ranks(query.id)
        exact_ranking = None if run.exact_rankings is None else run.exact_rankings[i][:cut]
        queries.append(
            QueryRecord(
                id=query.id,
                digest=query.digest,
                category=query.category,
                difficulty=query.difficulty,
                metrics={name: column[i] for name, column in columns.items()},
                ranking=kept.ranking,
                relevant_ranks=ranks,
                # None: outside the latency sample, not timed.
                latency_ms=None if math.isnan(run.latencies_ms[i]) else run.latencies_ms[i],
                text=query.text,
                unjudged=kept.unjudged,
                extras=kept.extras,
                labels=_labels(evaluation.labels, [*kept.ranking, *ranks, *kept.shown]),
                exact_metrics=None
                if exact_ranking is None
                else {name: column[i] for name, column in exact.items()},
                exact_ranking=exact_ranking,
            )
        )
    intervals = {}
    if kind.intervals:
        intervals = {m.name: evaluation.interval(m, seed) for m in metrics if not m.is_latency}
    stats: dict[str, object] = {
        **run.stats,
        **({"suite_notes": list(suite.notes)} if suite.notes else {}),
        **({"suite_reference": suite.reference} if suite.reference else {}),
        **kind.run_stats(_shown_run(run, evaluation.hidden), metrics),
        "gated_metrics": list(evaluation.gated),
    }
    if timed is not None and "latency_queries" in stats:
        stats["latency_queries"] = len(timed)  # latency is over the visible queries too
    if run.exact_rankings is not None:
        # How many units the index ranked otherwise than exact search (docs/verdicts.md).
        stats["index_noise_queries"] = sum(1 for q in queries if q.differs_from_exact)
    if stats.get("latency_measured", True) is False and "latency_queries" in stats:
        stats["latency_queries"] = 0  # a stored run, a pair suite: no query was timed
    if stats.get("latency_queries") == 0:
        stats["latency_measured"] = False  # nothing was timed: no latency figure to show
    if "timings_ms" in stats:
        stats["timings_ms"] = merge_timings(
            stats, metrics=evaluation.seconds + time.perf_counter() - began
        )
    return RunRecord(
        suite=suite.name,
        suite_path=suite_path,
        system=run.system.name,
        n=len(queries),
        k=tuple(suite.k),
        # Each metric's own definition version: a baseline compares only what still means the same.
        fingerprint={
            **run.fingerprint,
            "metric_definitions": kind.metric_definitions(suite, metric_versions(metrics)),
        },
        metrics=means("suite"),
        categories=groups("category"),
        difficulties=groups("difficulty"),
        latency_ms=dict(evaluation.latency),
        stats=stats,
        queries=tuple(queries),
        kind=suite.kind,
        intervals=intervals,
        drift_rankings={
            qid: (unjudged_digest(text), run.unjudged[qid][:cut])
            for qid, text in kind.drift_queries(suite)
        },
        holdout=_holdout(evaluation, columns) if evaluation.hidden else None,
    )


def _shown_run(run: RunResult, hidden: frozenset[int]) -> RunResult:
    """``run`` without its holdout units: what the figures a kind adds (tie ranges) are over."""
    if not hidden:
        return run
    keep = [i for i in range(len(run.qids)) if i not in hidden]

    def part(values: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(values[i] for i in keep) if len(values) == len(run.qids) else values

    suite = dataclasses.replace(run.suite, queries=part(run.suite.queries))
    return dataclasses.replace(
        run,
        suite=suite,
        qids=part(run.qids),
        rankings=part(run.rankings),
        scores=part(run.scores),
        latencies_ms=part(run.latencies_ms),
        extras=part(run.extras),
        exact_rankings=None if run.exact_rankings is None else part(run.exact_rankings),
    )


def _holdout(evaluation: Evaluation, columns: Mapping[str, list[float]]) -> HoldoutRecord:
    """The holdout units' values (this process's only), each unit named by its
    :func:`holdout_key` only, and each metric's aggregate over them (what is kept)."""
    from retrieval_gate.suites.holdout import holdout_digest, holdout_key

    suite = evaluation.run.suite
    rows = sorted(evaluation.hidden)
    keys = tuple(holdout_key(suite.queries[i].id, suite.queries[i].digest) for i in rows)
    fraction = float(suite.holdout or 0.0)
    at = np.array(rows, dtype=np.int64)
    found = {
        m.name: float(m.aggregate(evaluation.values[m.name][at], evaluation.components(m, at)))
        for m in evaluation.metrics
        if m.name in columns
    }
    aggregates = {name: value for name, value in found.items() if math.isfinite(value)}
    return HoldoutRecord(
        fraction=fraction,
        keys=keys,
        values={name: tuple(column[i] for i in rows) for name, column in columns.items()},
        digest=holdout_digest(fraction, keys),
        aggregates=aggregates,
    )
