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

__all__ = ["latency_needed", "latency_sample", "run_suite"]


def latency_needed(suite: Suite, settings: Settings) -> bool:
    """Whether the run's query latency counts: a latency gate in the suite, or a latency weight
    in the decision score."""
    return settings.latency_weighted or any(gate.metric.is_latency for gate in suite.all_gates)


def latency_sample(suite: Suite, settings: Settings) -> int:
    """How many of the suite's queries are timed per system that ranks in batches: the
    ``latency_sample`` setting, or under ``"auto"`` (the default) ``AUTO_LATENCY_SAMPLE`` when
    the latency counts (:func:`latency_needed`) and none otherwise. A latency gate with
    ``latency_sample = 0`` is a ``ConfigError``: nothing would be timed for it."""
    from retrieval_gate.errors import ConfigError
    from retrieval_gate.systems.timings import AUTO_LATENCY_SAMPLE

    needed = latency_needed(suite, settings)
    if settings.latency_sample is None:
        return AUTO_LATENCY_SAMPLE if needed else 0
    if settings.latency_sample == 0 and needed:
        why = (
            "the decision score weighs latency"
            if settings.latency_weighted
            else f"suite {suite.name} gates latency"
        )
        raise ConfigError(
            f"latency_sample = 0 times no query, but {why}; set it to a number of queries "
            'or "auto"',
            path=settings.source,
            entry="latency_sample",
        )
    return settings.latency_sample


def run_suite(
    suite: Suite,
    system: SystemConfig,
    settings: Settings,
    options: RunOptions,
    corpus: Corpus | None = None,
) -> RunResult:
    """Run ``suite`` against ``system`` the way the suite's kind runs; ``corpus``: the one the
    session loaded for it (None: the system loads the configured one)."""
    import dataclasses

    from retrieval_gate.suites.holdout import holdout_ids

    kind = suite.kind_object
    sample = latency_sample(suite, settings)
    context = settings.context(
        options,
        system,
        suite_corpus=kind.corpus_path(suite),
        corpus=corpus,
        where=suite.path,
        latency_needed=sample > 0,
        latency_sample=sample,
    )
    context = dataclasses.replace(context, held_out=holdout_ids(suite, settings.seed))
    from retrieval_gate.progress import about

    # Every progress line of the run (embedding, querying, extracting) names whose run it is.
    with about(f"{suite.name} x {system.name}"):
        return kind.run(suite, system, context)
