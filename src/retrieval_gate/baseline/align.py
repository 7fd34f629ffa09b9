"""The accepted baseline: fingerprinted per-query results, read and written atomically.

A baseline file holds, per suite x system, the :class:`~retrieval_gate.records.RunRecord` of the
accepted run in its compact form (per-query metric values, rankings, relevant ranks and each
query's content digest), so a later run can compare on the queries both runs share and report
added, removed and edited queries apart. Files written by 0.1.0 have the same form and load as
they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval_gate.records import RunRecord

# Parts of the fingerprint that change what every metric value means: values measured under
# different ones cannot be compared at all. (Each metric's own definition version is compared
# metric by metric: see metric_definitions.)
DEFINING = ("gain",)


# Parts that name what changed between runs: still compared (judging such a change is the gate's
# job), and reported as the likely cause.
DESCRIPTIVE = ("system", "model_identity", "corpus_digest", "k", "plugin_version")


@dataclass(frozen=True)
class Alignment:
    """How a run's queries line up with its baseline's."""

    shared: tuple[str, ...]  # same id, same text and judgments: compared
    added: tuple[str, ...]
    removed: tuple[str, ...]
    edited: tuple[str, ...]  # same id, different text or judgments: not compared
    not_comparable: str | None  # the reason, when nothing can be compared
    notes: tuple[str, ...]  # what changed that is still compared (model, corpus, ...)
    redefined: Mapping[str, str] = field(default_factory=dict)  # metric -> why not comparable
    # What was measured differently, old -> new (``system: pca_dims 128 -> 64``): the terminal
    # summary and each regressed item's failure text name it.
    changes: tuple[str, ...] = ()
    # Nothing that names the system's inputs changed (model, options and index settings, corpus,
    # suite, cutoffs, plugin version): what still moves is the index's noise, which an item may
    # leave out of its decision (docs/verdicts.md, "Index noise").
    steady: bool = False


def metric_definitions(fingerprint: Mapping[str, Any], metrics: Iterable[str]) -> dict[str, str]:
    """Each metric's definition version in a run's fingerprint: ``{"nDCG@10": "nDCG/trec_eval-10/1"}``.

    A fingerprint written by 0.1.0 holds one string for every metric (``"trec_eval-10/1"``); it
    reads as that version of each metric's family, which is what those metrics still are.
    """
    value = fingerprint.get("metric_definitions")
    if isinstance(value, Mapping):
        return {str(name): str(version) for name, version in value.items()}
    if value is None:
        return {}
    return {name: f"{name.partition('@')[0]}/{value}" for name in metrics}


def align(record: RunRecord, base: RunRecord) -> Alignment:
    fp, base_fp = record.fingerprint, base.fingerprint
    current = {q.id: q.digest for q in record.queries}
    before = {q.id: q.digest for q in base.queries}
    shared = tuple(q for q in current if q in before and current[q] == before[q])
    edited = tuple(q for q in current if q in before and current[q] != before[q])
    added = tuple(q for q in current if q not in before)
    removed = tuple(q for q in before if q not in current)
    reason = None
    for key in DEFINING:
        if fp.get(key) != base_fp.get(key):
            reason = f"{key} changed from {base_fp.get(key)!r} to {fp.get(key)!r}"
            break
    if reason is None and not shared:
        reason = "no query is unchanged since the baseline"
    changed = {
        key: identity_changes(base_fp[key], fp.get(key))
        for key in DESCRIPTIVE
        if key in base_fp and fp.get(key) != base_fp.get(key)
    }
    notes = [
        f"{key} changed since the baseline" + (f": {', '.join(diff)}" if diff else "")
        for key, diff in changed.items()
    ]
    changes = tuple(f"{key}: {', '.join(diff) or 'changed'}" for key, diff in changed.items())
    now_defs = metric_definitions(fp, record.metrics)
    then_defs = metric_definitions(base_fp, base.metrics)
    redefined = {
        name: f"the definition of {name} changed since the baseline "
        f"({then_defs[name]} -> {now_defs[name]}); save a new baseline with --rg-save-baseline"
        for name in now_defs
        if name in then_defs and now_defs[name] != then_defs[name]
    }
    notes += [f"{name}: not compared, {why}" for name, why in redefined.items()]
    steady = all(fp.get(key) == base_fp.get(key) for key in (*DESCRIPTIVE, "suite_digest"))
    return Alignment(
        shared, added, removed, edited, reason, tuple(notes), redefined, tuple(changes), steady
    )


#: Changes named per fingerprint entry; more are counted.
MAX_CHANGES = 6
_SHOWN = 60  # characters of a value shown; a digest shows its first 12


def identity_changes(before: Any, now: Any) -> list[str]:
    """What differs between two values of a fingerprint entry, leaf by leaf, old -> new: a
    system's options (``pca_dims 128 -> 64``), a model identity's fields (an identity string
    ``"<tag> {json}"`` is read as its JSON), a digest (its first 12 characters)."""
    found: list[str] = []
    _diff(_structured(before), _structured(now), "", found)
    if len(found) > MAX_CHANGES:
        found = [*found[:MAX_CHANGES], f"{len(found) - MAX_CHANGES} more"]
    return found


def _structured(value: Any) -> Any:
    if isinstance(value, str) and " {" in value and value.endswith("}"):
        tag, _, body = value.partition(" ")
        try:
            parsed = json.loads(body)
        except ValueError:
            return value
        if isinstance(parsed, dict):
            return {"identity": tag, **parsed}
    return value


def _diff(before: Any, now: Any, path: str, found: list[str]) -> None:
    if isinstance(before, Mapping) and isinstance(now, Mapping):
        for key in dict.fromkeys([*before, *now]):
            if before.get(key) != now.get(key):
                inner = f"{path}.{key}" if path else str(key)
                _diff(_structured(before.get(key)), _structured(now.get(key)), inner, found)
        return
    where = f"{path} " if path else ""
    found.append(f"{where}{_shown(before)} -> {_shown(now)}")


def _shown(value: Any) -> str:
    if value is None:
        return "(none)"
    text = repr(value)
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return repr(value[:12])
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
