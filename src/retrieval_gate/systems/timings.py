"""Where a suite x system's time goes: seconds per stage, shown in the report.

A run's ``stats["timings_ms"]`` holds milliseconds per stage:

* ``load``: loading the model (where a run needs it) and reading cached vectors;
* ``embed``: embedding what the cache lacks (documents and queries) and storing it;
* ``index``: building or opening the index;
* ``search``: the searches the rankings come from (with a stage's re-scoring, an extraction's
  aggregation), or every query of a system that is not searched in batches;
* ``latency``: the timed queries (docs/metrics.md), warm-up included;
* ``metrics``: computing the metrics from the rankings.

Standard library only at import.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = [
    "AUTO_LATENCY_SAMPLE",
    "STAGES",
    "Timings",
    "latency_notes",
    "latency_positions",
    "merge_timings",
]

STAGES: tuple[str, ...] = ("load", "embed", "index", "search", "latency", "metrics")

#: ``latency_sample = "auto"``: when a run's latency counts, every query of a suite up to this
#: many is timed, else this many evenly spaced ones.
AUTO_LATENCY_SAMPLE = 100


def latency_positions(size: int, n: int) -> list[int]:
    """Positions of the queries (of ``n``) timed for a sample of ``size``: every one when
    ``size >= n``, none for 0, else ``round(i * (n - 1) / (size - 1))`` for i in 0..size-1
    (position 0 alone for 1), so the sample is the same every run."""
    if size <= 0 or n == 0:
        return []
    if size >= n:
        return list(range(n))
    if size == 1:
        return [0]
    return sorted({round(i * (n - 1) / (size - 1)) for i in range(size)})


class Timings:
    """Seconds per stage, added up over every timed step."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the ``with`` body into ``name``."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def move(self, source: str, target: str, seconds: float) -> None:
        """Count ``seconds`` already timed into ``source`` as ``target``'s instead (a model
        load that happened inside an embedding call)."""
        seconds = min(seconds, self.seconds.get(source, 0.0))
        self.add(source, -seconds)
        self.add(target, seconds)

    def as_ms(self) -> dict[str, float]:
        """Milliseconds per stage, in `STAGES` order, rounded to 0.01 ms."""
        return {name: round(self.seconds.get(name, 0.0) * 1000.0, 2) for name in STAGES}


def merge_timings(stats: Mapping[str, object], **seconds: float) -> dict[str, float]:
    """``stats["timings_ms"]`` (every stage, 0 where absent) with ``seconds`` added per stage."""
    found = stats.get("timings_ms")
    out = {name: 0.0 for name in STAGES}
    if isinstance(found, Mapping):
        out.update({str(k): float(v) for k, v in found.items()})
    for name, value in seconds.items():
        out[name] = round(out.get(name, 0.0) + value * 1000.0, 2)
    return out


def latency_notes(
    stats: Mapping[str, Any], n: int, unit: str = "query", units: str = "queries"
) -> list[str]:
    """The report's lines on how a run's latency was measured and where its time went; ``unit``
    and ``units``: what the suite's kind times (a query, an extraction document)."""
    from retrieval_gate.records import counted

    notes = []
    timed = stats.get("latency_queries")
    if isinstance(timed, int) and stats.get("latency_measured", True) is not False:
        if timed == n == 1:
            notes.append(f"latency: timed on the suite's one {unit}")
        elif timed == n:
            notes.append(f"latency: timed on every {unit} ({n})")
        else:
            notes.append(f"latency: timed on {timed} of {counted(n, unit, units)}")
    elif isinstance(stats.get("latency_reason"), str):
        notes.append(f"latency: none ({stats['latency_reason']})")
    elif timed == 0:
        notes.append(
            "latency: not timed (no latency gate or decision weight reads it; "
            "`latency_sample` times some anyway)"
        )
    found = stats.get("timings_ms")
    if isinstance(found, Mapping) and found:
        parts = ", ".join(f"{name} {float(found.get(name, 0.0)) / 1000.0:.2f}" for name in STAGES)
        notes.append(f"time (s): {parts}")
    return notes
