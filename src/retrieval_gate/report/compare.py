"""Systems compared with a reference system on the same queries, as PyTerrier's ``baseline=``.

For each suite run by several systems: per metric, the mean difference from the reference, a
two-sided paired randomisation test and how many queries improved or degraded. A metric that is
not a mean of per-unit values (micro F1, a correlation) is compared by its aggregates with the
paired bootstrap over units (two-sided: twice the smaller one-sided share, at most 1). Derived from
the run records alone, so it is the same with or without xdist.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval_gate.gates.stats import bootstrap_margin_test, is_mean, paired_randomisation
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import RunRecord


@dataclass(frozen=True)
class Comparison:
    system: str
    metric: str
    reference_value: float
    value: float
    p_value: float
    improved: int
    degraded: int

    @property
    def delta(self) -> float:
        return self.value - self.reference_value


def against_reference(
    runs: list[RunRecord], reference: str, metrics: list[str], *, seed: int = 0
) -> list[Comparison]:
    """Every non-reference run of one suite against the reference run, metric by metric."""
    base = next((r for r in runs if r.system == reference), None)
    if base is None:
        return []
    out = []
    for run in runs:
        if run is base:
            continue
        pairs = [(q.metrics, base.query(q.id).metrics) for q in run.queries if base.has_query(q.id)]
        for metric in metrics:
            now = [a[metric] for a, b in pairs if metric in a and metric in b]
            then = [b[metric] for a, b in pairs if metric in a and metric in b]
            if not now:
                continue
            parsed = parse_metric(metric)
            if not is_mean(parsed):
                names = (metric, *parsed.spec.aggregation.components)
                both = [(a, b) for a, b in pairs if all(n in a and n in b for n in names)]
                boot = bootstrap_margin_test(
                    parsed,
                    {n: np.array([a[n] for a, _ in both]) for n in names},
                    {n: np.array([b[n] for _, b in both]) for n in names},
                    0.0,
                    seed,
                )
                p_value = min(1.0, 2.0 * min(boot.p_worse, boot.p_within))
                figures = (boot.then, boot.now, p_value, boot.improved, boot.degraded)
            else:
                test = paired_randomisation(now, then, alternative="two-sided", seed=seed)
                mean_then, mean_now = sum(then) / len(then), sum(now) / len(now)
                figures = (mean_then, mean_now, test.p_value, test.improved, test.degraded)
            reference_value, value, p_value, improved, degraded = figures
            out.append(
                Comparison(
                    system=run.system,
                    metric=metric,
                    reference_value=reference_value,
                    value=value,
                    p_value=p_value,
                    improved=improved,
                    degraded=degraded,
                )
            )
    return out
