"""What an item hands the session that writes the report (:class:`ItemPayload`), the one codec
it travels through under xdist, and why an item was not decided (:class:`Undecided`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from retrieval_gate.records.comparison import BaselineComparison
from retrieval_gate.records.outcome import Outcome
from retrieval_gate.records.run import RunFailure, RunRecord


@dataclass(frozen=True, order=True)
class Undecided:
    """A gate item not decided because its suite x system run failed."""

    suite: str
    system: str
    nodeid: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Undecided:
        return cls(**data)


@dataclass(frozen=True)
class ItemPayload:
    """What one item hands the session that writes the report: the runs it was the first in
    its process to read (with their baseline comparisons), its own gate outcome, or why it was
    not decided. Under xdist it travels on the item's test report, through this one codec, and
    the controller gathers every worker's payloads into the same report a serial run writes."""

    runs: tuple[RunRecord, ...] = ()
    comparisons: tuple[BaselineComparison, ...] = ()
    failures: tuple[RunFailure, ...] = ()
    gates: tuple[Outcome, ...] = ()
    undecided: tuple[Undecided, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.runs or self.comparisons or self.failures or self.gates or self.undecided)

    def __add__(self, other: ItemPayload) -> ItemPayload:
        return ItemPayload(
            runs=self.runs + other.runs,
            comparisons=self.comparisons + other.comparisons,
            failures=self.failures + other.failures,
            gates=self.gates + other.gates,
            undecided=self.undecided + other.undecided,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": [run.to_json(holdout_values=True) for run in self.runs],
            "comparisons": [c.to_transport() for c in self.comparisons],
            "failures": [f.to_json() for f in self.failures],
            "gates": [g.to_json() for g in self.gates],
            "undecided": [u.to_json() for u in self.undecided],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ItemPayload:
        return cls(
            runs=tuple(RunRecord.from_json(r) for r in data.get("runs", ())),
            comparisons=tuple(
                BaselineComparison.from_transport(c) for c in data.get("comparisons", ())
            ),
            failures=tuple(RunFailure.from_json(f) for f in data.get("failures", ())),
            gates=tuple(Outcome.from_json(g) for g in data.get("gates", ())),
            undecided=tuple(Undecided.from_json(u) for u in data.get("undecided", ())),
        )
