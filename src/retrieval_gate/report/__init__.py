"""Pure renderers of a session's results: markdown, the JSON twin and the terminal summary.

Everything here works on :class:`ReportData`, built from the typed records the items attach to
their test reports, so the report is the same with or without xdist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval_gate.files.atomic import write_text_atomic
from retrieval_gate.records import BaselineComparison, Outcome, RunFailure, RunRecord

if TYPE_CHECKING:
    from retrieval_gate.config.decision import DecisionSettings
    from retrieval_gate.gates.decision import Decision


@dataclass(frozen=True)
class ReportData:
    runs: tuple[RunRecord, ...]  # sorted by suite then system
    gates: tuple[Outcome, ...]  # failing first, then by node id
    errors: tuple[RunFailure, ...]  # runs that could not complete
    comparisons: Mapping[tuple[str, str], BaselineComparison]  # by (suite, system)
    reference: str | None = None  # the system the others are compared against
    alpha: float = 0.05
    seed: int = 0
    baseline: str | None = None  # the baseline file read, when there was one
    decision: DecisionSettings | None = None  # how to rank systems (SPEC section 13)
    # (suite, system, nodeid) of gates not decided because their run failed
    undecided: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def build(
        cls,
        runs: Mapping[tuple[str, str], RunRecord],
        comparisons: Mapping[tuple[str, str], BaselineComparison],
        gates: list[Outcome],
        errors: Mapping[tuple[str, str], str],
        *,
        undecided: Sequence[tuple[str, str, str]] = (),
        reference: str | None = None,
        alpha: float = 0.05,
        seed: int = 0,
        baseline: str | None = None,
        decision: DecisionSettings | None = None,
    ) -> ReportData:
        return cls(
            runs=tuple(runs[key] for key in sorted(runs)),
            gates=tuple(sorted(gates, key=lambda g: (g.passed, g.nodeid))),
            errors=tuple(
                RunFailure(suite=suite, system=system, error=message)
                for (suite, system), message in sorted(errors.items())
            ),
            comparisons=dict(comparisons),
            reference=reference,
            alpha=alpha,
            seed=seed,
            baseline=baseline,
            decision=decision,
            undecided=tuple(sorted(undecided)),
        )

    @property
    def failed(self) -> list[Outcome]:
        return [g for g in self.gates if not g.passed]

    @property
    def passed(self) -> bool:
        return not self.failed and not self.errors and not self.undecided

    @property
    def total(self) -> int:
        """Every gate item of the session: decided (passed or failed) and not decided."""
        return len(self.gates) + len(self.undecided)

    def suites(self) -> list[str]:
        return list(dict.fromkeys(run.suite for run in self.runs))

    def runs_of(self, suite: str) -> list[RunRecord]:
        return [run for run in self.runs if run.suite == suite]

    def comparison(self, run: RunRecord) -> BaselineComparison | None:
        """The run's comparison with its baseline run, None when the baseline has none."""
        return self.comparisons.get(run.key)

    def decisions(self, suite: str) -> list[Decision] | str | None:
        """The suite's systems ranked by the decision score, the reason it cannot be computed,
        or None when no decision is configured."""
        if self.decision is None:
            return None
        from retrieval_gate.errors import ConfigError
        from retrieval_gate.gates.decision import decide

        try:
            return decide(self.runs_of(suite), self.decision)
        except ConfigError as exc:
            return exc.message

    def without_baseline_run(self, run: RunRecord) -> str | None:
        """A note when a baseline was read but holds no run for this suite x system."""
        if self.baseline is None or run.key in self.comparisons:
            return None
        return (
            f"{self.baseline} has no run for {run.suite} x {run.system}: nothing to compare; "
            "save one with --rg-save-baseline"
        )


def write_reports(
    data: ReportData,
    *,
    markdown_path: Path,
    json_path: Path,
    step_summary: str | None = None,
) -> list[Path]:
    """Write the markdown report and its JSON twin atomically; append to a GitHub step summary."""
    import json

    from retrieval_gate.report import json as json_report
    from retrieval_gate.report import markdown

    text = markdown.render(data)
    write_text_atomic(markdown_path, text)
    write_text_atomic(json_path, json.dumps(json_report.render(data), indent=2) + "\n")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return [markdown_path, json_path]
