"""Running suites: one suite x system into a plain
:class:`~retrieval_gate.suites.result.RunResult` (:func:`run_suite`), measured into a record
(:mod:`.evaluate`), once per session (:mod:`.cache`); and the configured system as an object
tests call (:mod:`.handle`, the ``retrieval_system`` fixture).

Each suite kind runs its own way (a ranking suite retrieves every query, an extraction suite
every chunk of every document, a pair suite embeds both texts of every pair); this is where a
run is asked for without knowing which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval_gate.config import Settings
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.suites.result import RunResult
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.systems import RunOptions
    from retrieval_gate.systems.config import SystemConfig

__all__ = ["latency_needed", "run_suite"]


def latency_needed(suite: Suite, settings: Settings) -> bool:
    """Whether the run's query latency counts: a latency gate in the suite, or a latency weight
    in the decision score."""
    return settings.latency_weighted or any(gate.metric.is_latency for gate in suite.gates)


def run_suite(
    suite: Suite,
    system: SystemConfig,
    settings: Settings,
    options: RunOptions,
    corpus: Corpus | None = None,
) -> RunResult:
    """Run ``suite`` against ``system`` the way the suite's kind runs; ``corpus``: the one the
    session loaded for it (None: the system loads the configured one)."""
    kind = suite.kind_object
    context = settings.context(
        options,
        system,
        suite_corpus=kind.corpus_path(suite),
        corpus=corpus,
        where=suite.path,
        latency_needed=latency_needed(suite, settings),
    )
    return kind.run(suite, system, context)
