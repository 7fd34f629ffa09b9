"""Metrics over a run: per-query values for every metric a suite reports or gates on.

The step between the run and the gates: it turns a :class:`~retrieval_gate.run.RunResult` into an
:class:`Evaluation` (plain arrays plus the run) through the same ``judge``/``compute`` code path as
the public :func:`retrieval_gate.evaluate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from retrieval_gate.metrics import Metric, compute, cutoff_metrics, judge, latency_stats
from retrieval_gate.run import RunResult
from retrieval_gate.suite import scope_name


@dataclass(frozen=True)
class Evaluation:
    run: RunResult
    metrics: tuple[Metric, ...]  # ranking metrics, in report order
    values: Mapping[str, np.ndarray]  # metric name -> per-query values aligned with run.qids
    latency: Mapping[str, float]  # p50/p95/p99/mean in ms

    @property
    def suite_name(self) -> str:
        return self.run.suite.name

    @property
    def system_name(self) -> str:
        return self.run.system.name

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
        rows = self.scopes[scope]
        if rows.size == 0:
            return 0.0
        return float(self.values[metric.name][rows].mean())

    def n(self, scope: str = "suite") -> int:
        return int(self.scopes[scope].size)

    def worst(
        self, metric: Metric, scope: str = "suite", limit: int = 5
    ) -> list[tuple[str, float]]:
        """The scope's lowest-scoring queries for a metric (ties by query order), worst first."""
        if metric.is_latency:
            order = np.argsort(-np.asarray(self.run.latencies_ms), kind="stable")[:limit]
            return [(self.run.qids[i], float(self.run.latencies_ms[i])) for i in order]
        rows = self.scopes[scope]
        vals = self.values[metric.name][rows]
        order = np.argsort(vals, kind="stable")[:limit]
        return [(self.run.qids[rows[i]], float(vals[i])) for i in order]

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


def evaluate_run(run: RunResult, extra: tuple[Metric, ...] = ()) -> Evaluation:
    """Every cutoff metric of the suite plus whatever its gates and expectations name."""
    suite = run.suite
    wanted: dict[str, Metric] = {m.name: m for m in cutoff_metrics(suite.k)}
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
    metrics = tuple(wanted.values())
    judged = judge(suite.qrels, run.qids, run.rankings)
    values = compute(judged, metrics, gain=suite.gain)
    return Evaluation(
        run=run, metrics=metrics, values=values, latency=latency_stats(run.latencies_ms)
    )
