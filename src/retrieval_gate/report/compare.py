"""Systems compared with a reference system on the same queries, as PyTerrier's ``baseline=``.

For each suite run by several systems: per metric, the mean difference from the reference, a
two-sided paired randomisation test and how many queries improved or degraded. Derived from the
run records alone, so it is the same with or without xdist.
"""

from __future__ import annotations

from dataclasses import dataclass

from retrieval_gate.records import RunRecord
from retrieval_gate.stats import paired_randomisation


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
            test = paired_randomisation(now, then, alternative="two-sided", seed=seed)
            out.append(
                Comparison(
                    system=run.system,
                    metric=metric,
                    reference_value=sum(then) / len(then),
                    value=sum(now) / len(now),
                    p_value=test.p_value,
                    improved=test.improved,
                    degraded=test.degraded,
                )
            )
    return out
