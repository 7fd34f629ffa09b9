"""The parts of the records' JSON that both forms share (the report's and xdist's full form, the
baseline file's compact form): each suite kind's codec of its unit extras and run keys, and the
drift rankings' codec.

This module sits below the records it serves, so it names a run only as ``Any``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class UnitExtras(Protocol):
    """What a suite kind adds to each unit's record (an extraction document's negated terms, a
    pair's second text): its own frozen dataclass, serialised into the unit's JSON object beside
    the shared keys."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RawExtras:
    """Extras of a kind whose codec is not registered in this process: kept as read, so a
    record passes through unchanged."""

    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class KindCodec:
    """A suite kind's part of the records' JSON: ``decode`` builds a unit's extras from the keys
    of its JSON object that the shared record does not know (None when there are none), and
    ``run_view`` adds keys to the run's JSON (an extraction run's ``documents``)."""

    decode: Callable[[Mapping[str, Any]], UnitExtras | None]
    run_view: Callable[[Any], dict[str, Any]] | None = None  # given the RunRecord (run.py)


_CODECS: dict[str, KindCodec] = {}


def register_kind_codec(kind: str, codec: KindCodec) -> None:
    """Register a suite kind's codec (done by the suite-kind registry when the kind registers)."""
    _CODECS[kind] = codec


def kind_codec(kind: str) -> KindCodec | None:
    """The codec registered for ``kind``, None when its kind is not registered in this process."""
    return _CODECS.get(kind)


def decode_extras(kind: str, data: Mapping[str, Any]) -> UnitExtras | None:
    """A unit's extras from its JSON object: by its kind's codec, else kept as read."""
    extra = {key: value for key, value in data.items() if key not in QUERY_KEYS}
    codec = _CODECS.get(kind)
    if codec is not None:
        return codec.decode(extra)
    return RawExtras(extra) if extra else None


#: The keys of a unit's JSON object the shared record reads; the others are its kind's extras.
QUERY_KEYS = frozenset(
    {
        "id",
        "digest",
        "category",
        "difficulty",
        "metrics",
        "ranking",
        "relevant_ranks",
        "latency_ms",
        "text",
        "unjudged",
        "labels",
        "exact_metrics",
        "exact_ranking",
    }
)


def drift_json(rankings: Mapping[str, tuple[str, tuple[str, ...]]]) -> dict[str, Any]:
    """The run's drift rankings as JSON keys."""
    # Absent when the suite has no unjudged queries, so older readers see the layout they know.
    if not rankings:
        return {}
    return {
        "drift_rankings": {
            qid: {"digest": digest, "ranking": list(ranking)}
            for qid, (digest, ranking) in rankings.items()
        }
    }


def drift_from_json(data: Mapping[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """A run's drift rankings read back from its JSON (none when it has no such key)."""
    return {
        qid: (entry["digest"], tuple(entry["ranking"]))
        for qid, entry in data.get("drift_rankings", {}).items()
    }
