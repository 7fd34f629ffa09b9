"""What a run of one suite x system produces, whatever the suite's kind: a plain
:class:`RunResult`, and the fingerprint naming its inputs. Each kind's run builds it (a ranking
run per query its ranking; an extraction run per document its predicted terms; a pair run per
pair its cosine as the single score)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrieval_gate.version import __version__

if TYPE_CHECKING:
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.systems.config import SystemConfig

__all__ = ["RunResult", "fingerprint"]


@dataclass(frozen=True)
class RunResult:
    suite: Suite
    system: SystemConfig
    qids: tuple[str, ...]
    rankings: tuple[tuple[str, ...], ...]  # trec_eval order, best first
    scores: tuple[tuple[float, ...], ...]
    latencies_ms: tuple[float, ...]
    fingerprint: Mapping[str, Any]
    stats: Mapping[str, Any] = field(default_factory=dict)
    # Per unit, what the kind's run adds and only its module reads (an extraction document's
    # terms reported negated); empty when the kind adds nothing.
    extras: tuple[Any, ...] = ()
    unjudged: Mapping[str, tuple[str, ...]] = field(
        default_factory=dict
    )  # drift query id -> ranking
    # Per unit, its ranking under exact search over the same vectors, for an index that does
    # not promise to rank the same every run (IndexBackend.reproducible); None otherwise.
    exact_rankings: tuple[tuple[str, ...], ...] | None = None


def fingerprint(suite: Suite, system: SystemConfig, **extra: Any) -> dict[str, Any]:
    """What names the run's inputs. Each metric's definition version is added by the evaluation
    stage, which knows the metrics (see ``metric_definitions`` in docs/baselines.md)."""
    return {
        "plugin_version": __version__,
        "suite_digest": suite.digest,
        "system": system.identity,
        "k": list(suite.k),
        **suite.kind_object.fingerprint_fields(suite),
        **extra,
    }
