"""Metrics over a run: per-query values for every metric a suite reports or gates on.

The step between the run and the gates: it turns a :class:`~retrieval_gate.suites.result.RunResult` into an
:class:`Evaluation` (plain arrays plus the run) through the same ``judge``/``compute`` code path as
the public :func:`retrieval_gate.evaluate`, and the evaluation into the typed
:class:`~retrieval_gate.records.RunRecord` every later stage (gates, baseline, report) reads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from retrieval_gate.metrics import (
    Metric,
    compute,
    cutoff_metrics,
    judge,
    latency_stats,
    metric_versions,
)
from retrieval_gate.metrics.ontology import OntologyInputs
from retrieval_gate.metrics.ties import tie_stats
from retrieval_gate.records import GroupRecord, QueryRecord, RunRecord, scope_name
from retrieval_gate.suites.drift import unjudged_digest
from retrieval_gate.suites.result import RunResult
from retrieval_gate.systems.timings import merge_timings

if TYPE_CHECKING:
    from retrieval_gate.ontology import Ontology
    from retrieval_gate.suites.suite import Suite

#: How many top results a failing expectation shows.
SHOWN_RESULTS = 5


@dataclass(frozen=True)
class Evaluation:
    run: RunResult
    metrics: tuple[Metric, ...]  # ranking metrics, in report order
    values: Mapping[str, np.ndarray]  # metric name -> per-query values aligned with run.qids
    latency: Mapping[str, float]  # p50/p95/p99/mean in ms, over the timed queries
    seconds: float = 0.0  # what computing the values took (the report's "metrics" time)

    @cached_property
    def scopes(self) -> dict[str, np.ndarray]:
        """Scope name -> indices of its queries: suite, every category and difficulty."""
        queries = self.run.suite.queries
        scopes = {"suite": np.arange(len(queries))}
        for kind in ("category", "difficulty"):
            labels = [getattr(q, kind) for q in queries]
            for label in sorted({x for x in labels if x is not None}):
                scopes[scope_name(kind, label)] = np.array(
                    [i for i, x in enumerate(labels) if x == label], dtype=np.int64
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
        return bootstrap_ci(metric, self.values[metric.name], self.components(metric, rows), seed)

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
    run: RunResult, extra: tuple[Metric, ...] = (), *, ontology: Ontology | None = None
) -> Evaluation:
    """Every cutoff metric of the suite (and MaxOntSim at each cutoff for an ontology suite)
    plus whatever its gates and expectations name. ``ontology`` is the suite's, loaded."""
    began = time.perf_counter()
    suite = run.suite
    wanted: dict[str, Metric] = {m.name: m for m in default_metrics(suite)}
    for gate in suite.gates:
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
    if ranked:
        values = compute(judge(suite.qrels, run.qids, run.rankings), ranked, gain=suite.gain)
    for input_kind, inputs in _unit_inputs(run, metrics).items():
        values.update(
            (m.name, m.spec.compute(inputs, m.k)) for m in metrics if m.spec.input == input_kind
        )
    by_term = [m for m in metrics if m.spec.input == "ontology"]
    if by_term:
        if ontology is None or suite.ontology is None:
            raise ValueError(f"{by_term[0].name} needs the suite's ontology")
        inputs = OntologyInputs(
            ontology=ontology,
            measure=suite.ontology.similarity,
            expected=[[d for d, g in q.relevant.items() if g >= 1] for q in suite.queries],
            rankings=run.rankings,
        )
        values.update((m.name, m.spec.compute(inputs, m.k)) for m in by_term)
    # Report order: the suite's metrics as wanted, whatever input each is computed from.
    values = {m.name: values[m.name] for m in metrics}
    # Untimed queries (NaN: outside the latency sample) have no latency to count.
    timed = [ms for ms in run.latencies_ms if not math.isnan(ms)]
    return Evaluation(
        run=run,
        metrics=metrics,
        values=values,
        latency=latency_stats(timed),
        seconds=time.perf_counter() - began,
    )


def default_metrics(suite: Suite) -> list[Metric]:
    """What a suite reports without being asked: every trec_eval cutoff metric (and MaxOntSim at
    each cutoff for an ontology suite) for a ranking suite; every registered family of the kind's
    input for an extraction (``sets``) or pair (``pairs``) suite, in registry order."""
    from retrieval_gate.metrics import REGISTRY

    if suite.kind == "ranking":
        metrics = list(cutoff_metrics(suite.k))
        if suite.ontology is not None:
            metrics += [Metric("MaxOntSim", k) for k in suite.k]
        return metrics
    wanted = {"extraction": "sets", "pairs": "pairs"}[suite.kind]
    return [Metric(f.name) for f in REGISTRY.values() if f.input == wanted and not f.needs_k]


def _unit_inputs(run: RunResult, metrics: tuple[Metric, ...]) -> dict[str, object]:
    """The inputs of the extraction and pair families, built only when one is wanted."""
    suite = run.suite
    inputs: dict[str, object] = {}
    kinds = {m.spec.input for m in metrics}
    if "sets" in kinds:
        from retrieval_gate.metrics.extraction import SetInputs

        inputs["sets"] = SetInputs(
            gold=[frozenset(d for d, g in q.relevant.items() if g >= 1) for q in suite.queries],
            gold_negated=[q.negated for q in suite.queries],
            predicted=[frozenset(r) for r in run.rankings],
            predicted_negated=[frozenset(n) for n in run.negated]
            if run.negated
            else [frozenset() for _ in suite.queries],
        )
    if "pairs" in kinds:
        from retrieval_gate.metrics.pairs import PairInputs

        inputs["pairs"] = PairInputs(
            similarity=np.array([s[0] if s else 0.0 for s in run.scores], dtype=np.float64),
            gold=np.array([q.pair[1] if q.pair else 0.0 for q in suite.queries]),
        )
    return inputs


def record_run(evaluation: Evaluation, suite_path: str, *, seed: int = 0) -> RunRecord:
    """The run as the typed record the gates, the baseline and the report read: means per scope,
    latency, stats and every query's values, ranking and relevant ranks. An extraction or pair
    suite's values also get their seeded bootstrap 95 % intervals (``seed``: settings' seed)."""
    began = time.perf_counter()
    run = evaluation.run
    suite = run.suite
    metrics = evaluation.metrics
    # Rankings are kept to the largest cutoff (the JSON contract); a query with expectations
    # keeps at least the top results its failure message shows.
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
        }

    judgments = [query.relevant for query in suite.queries]
    # One tolist() per metric is far cheaper than a float() per value.
    columns = {m.name: evaluation.values[m.name].tolist() for m in metrics}
    queries = tuple(
        QueryRecord(
            id=query.id,
            digest=query.digest,
            category=query.category,
            difficulty=query.difficulty,
            metrics={name: column[i] for name, column in columns.items()},
            # An extraction document keeps every predicted term (its JSON twin is the full set).
            ranking=tuple(
                run.rankings[i]
                if suite.kind == "extraction"
                else run.rankings[i][: max(cut, SHOWN_RESULTS) if query.expect else cut]
            ),
            relevant_ranks=evaluation.relevant_ranks(query.id),
            latency_ms=None if math.isnan(run.latencies_ms[i]) else run.latencies_ms[i],
            text=query.text,
            gold_negated=tuple(sorted(query.negated)),
            predicted_negated=tuple(sorted(run.negated[i])) if run.negated else (),
            text_b=query.pair[0] if query.pair else "",
            # Judged@k's complement: ranking suites only (an extraction's extra terms are wrong,
            # not unjudged).
            unjudged=tuple(d for d in run.rankings[i][:cut] if query.relevant.get(d, -1) < 0)
            if suite.kind == "ranking"
            else (),
        )
        for i, query in enumerate(suite.queries)
    )
    intervals = {}
    if suite.kind != "ranking":
        intervals = {m.name: evaluation.interval(m, seed) for m in metrics if not m.is_latency}
    stats: dict[str, object] = {
        **run.stats,
        **({"suite_notes": list(suite.notes)} if suite.notes else {}),
        **(
            tie_stats(run.rankings, run.scores, judgments, metrics, gain=suite.gain)
            if suite.kind == "ranking"
            else {}
        ),
    }
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
        n=len(suite.queries),
        k=tuple(suite.k),
        # Each metric's own definition version: a baseline compares only what still means the same.
        fingerprint={**run.fingerprint, "metric_definitions": metric_versions(metrics)},
        metrics=means("suite"),
        categories=groups("category"),
        difficulties=groups("difficulty"),
        latency_ms=dict(evaluation.latency),
        stats=stats,
        queries=queries,
        kind=suite.kind,
        intervals=intervals,
        drift_rankings={
            qid: (unjudged_digest(text), run.unjudged[qid][:cut]) for qid, text in suite.unjudged
        },
    )
