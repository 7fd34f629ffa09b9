"""A suite's holdout: a fixed, seeded part of its units that is evaluated but never shown unit
by unit (docs/suite-format.md, docs/verdicts.md).

Membership is a unit's own coin: a unit is in the holdout when the first 64 bits of
sha256(seed, suite name, unit id), read as a fraction of 2^64, fall below ``holdout``. So the
holdout is the same in every run and every process (serial or ``-n 2``), and adding, removing or
editing another unit never moves a unit in or out of it; only the seed, the suite's name, the
fraction or the unit's own id does. A unit with an ``expect`` is never held out: its own item
names it.

Outside this module the held-out units are named only by :func:`holdout_key`, a digest of the
unit's id and content digest: what a baseline and the history keep to pair a holdout unit with
itself later, without writing its id.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from retrieval_gate.display import HELD_OUT_NAME
from retrieval_gate.errors import RetrievalGateError, SuiteError
from retrieval_gate.suites.suite import Suite

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus

E = TypeVar("E", bound=RetrievalGateError)

__all__ = [
    "HELD_OUT_NAME",
    "check_labels",
    "held_out_strings",
    "hide_held_out",
    "holdout_ids",
    "holdout_key",
    "holdout_tolerance",
    "seal",
]


def _coin(seed: int, suite: str, unit: str) -> float:
    blob = "\0".join((str(seed), suite, unit)).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") / 2.0**64


def holdout_ids(suite: Suite, seed: int) -> frozenset[str]:
    """The ids of ``suite``'s held-out units under the session's ``seed`` (empty without a
    ``holdout``); a one-line error naming the file when the fraction leaves either side empty."""
    if suite.holdout is None:
        return frozenset()
    fraction = suite.holdout
    chosen = frozenset(
        u.id for u in suite.queries if not u.expect and _coin(seed, suite.name, u.id) < fraction
    )
    units = suite.kind_object.units
    if not chosen or len(chosen) == len(suite.queries):
        side = "none" if not chosen else "all"
        raise SuiteError(
            f"holdout {fraction:g} selects {side} of the {len(suite.queries)} {units} (seed "
            f"{seed}; {units} with an 'expect' are never held out): a holdout needs at least one "
            f"of them on each side; change the fraction or add {units}",
            path=suite.path,
            entry="holdout",
        )
    for gate in suite.all_gates:
        group = gate.group
        if group is None:
            continue
        kind, label = group
        members = [u.id for u in suite.queries if getattr(u, kind) == label]
        if members and all(m in chosen for m in members):
            key = "categories" if kind == "category" else "difficulties"
            raise SuiteError(
                f"every {suite.kind_object.unit} of {kind} {label!r} is in the holdout (holdout "
                f"{fraction:g}, seed {seed}), so its floor has nothing visible to gate; change "
                f"the fraction or add {units} to it",
                path=suite.path,
                entry=f"{key}.{label}",
            )
    return chosen


def holdout_key(unit_id: str, digest: str) -> str:
    """What a held-out unit is kept under in a baseline and the history: a digest of its id and
    its content digest (an edited unit is another unit, as everywhere else)."""
    blob = f"{unit_id}\0{digest}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(blob).hexdigest()[:16]


def holdout_digest(fraction: float, keys: Iterable[str]) -> str:
    """The holdout's own version: its fraction and units. The holdout's shelf-life ledger is
    kept per holdout digest (gates/shelflife.py)."""
    blob = "\0".join((repr(fraction), *sorted(keys))).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


#: The holdout's tolerance when ``holdout_tolerance`` names none: the metric's regression
#: tolerance times 1 / sqrt(fraction). A holdout a fifth of the suite has sqrt(5) times the
#: standard error of a mean over the suite, so the same rule at the same false-alarm rate needs
#: that much more room.


def holdout_tolerance(suite: Suite, metric: str, regression_tolerance: float) -> float:
    """The holdout item's tolerance for ``metric``: ``holdout_tolerance``, else the default."""
    found = suite.holdout_tolerance.get(metric)
    if found is not None:
        return found
    if suite.holdout is None:
        return regression_tolerance
    return float(regression_tolerance / suite.holdout**0.5)


def held_out_strings(suite: Suite, hidden: frozenset[str]) -> tuple[list[str], list[str]]:
    """The ids and texts of ``suite``'s held-out units (``hidden``), and what is shown whole
    even where one of them stands in it: the visible units' ids and texts, the drift queries'
    (shown by the drift items), and every document id the suite judges (a held-out query's id
    may be a document's too, as in a suite whose queries are documents: in a visible query's
    ranking it names the document)."""
    held: list[str] = []
    visible: list[str] = []
    for unit in suite.queries:
        (held if unit.id in hidden else visible).extend((unit.id, *unit.texts))
        visible.extend(unit.relevant)
    for qid, text in suite.kind_object.drift_queries(suite):
        visible += [qid, text]
    return held, list(dict.fromkeys(visible))


def seal(suite: Suite, seed: int) -> Suite:
    """``suite`` as the session keeps it once prepared, before anything runs: its distinctive
    held-out ids and texts masked in everything the session shows or writes from now on
    (display/held.py), and its notes (what preparing it changed: an ontology's alternative ids
    mapped, ``<id>: ...``) counted rather than said for its held-out units."""
    from retrieval_gate.display import seal_held_out
    from retrieval_gate.records import counted

    hidden = holdout_ids(suite, seed)
    if not hidden:
        return suite
    seal_held_out(*held_out_strings(suite, hidden))
    kept = [n for n in suite.notes if n.partition(": ")[0] not in hidden]
    if len(kept) == len(suite.notes):
        return suite
    units = suite.kind_object
    count = len(suite.notes) - len(kept)
    kept.append(
        f"{counted(count, 'note')} on held-out {units.units} not shown (the holdout shows only "
        "pass or fail)"
    )
    return dataclasses.replace(suite, notes=tuple(kept))


def hide_held_out(error: E, suite: Suite, seed: int) -> E:
    """``error`` (a run's failure: a retriever that raised on a query, a library's error) with
    its held-out units written as :data:`HELD_OUT_NAME`, in its entry, its message and its
    traceback, in any case and separator (display/held.py), so that a failed run names no
    held-out unit either: every distinctive held-out id and text, and those of a held-out unit
    the error is about (its entry or message says ``query <id>``, ``id <id>``), whatever their
    length. The same exception, changed in place (its traceback and cause are kept)."""
    from retrieval_gate.display import HeldOut, distinctive, folded

    try:
        hidden = holdout_ids(suite, seed)
    except SuiteError:
        return error  # the suite's own holdout error, raised at collection
    if not hidden:
        return error
    held, visible = held_out_strings(suite, hidden)
    noun = suite.kind_object.unit
    by_name = {
        folded(name): unit
        for unit in suite.queries
        if unit.id in hidden
        for name in (f"{noun} {unit.id}", f"id {unit.id}")
    }
    about = f"{error.entry or ''}\n{error.message}"
    named = [by_name[key] for key in HeldOut(by_name).found(about) if key in by_name]
    own = [text for unit in named for text in (unit.id, *unit.texts)]
    mask = HeldOut([*own, *(h for h in held if distinctive(h))], visible)
    # The unit's own strings as written first, whole (an id's own punctuation included, which
    # the mask by words would leave: "q(4)]|^"), then any form of them.
    literal = (
        re.compile(
            "|".join(rf"(?<![^\W_]){re.escape(t)}(?![^\W_])" for t in sorted(own, key=len)[::-1])
        )
        if own
        else None
    )

    def scrub(text: str) -> str:
        if literal is not None:
            text = literal.sub(HELD_OUT_NAME, text)
        return mask.scrub(text)

    error.message = scrub(error.message)
    if error.traceback is not None:  # a library's, which may quote a query
        error.traceback = scrub(error.traceback)
    if error.entry is not None:
        error.entry = scrub(error.entry)
    error.args = (error.format(),)
    return error


def check_labels(suite: Suite, corpus: Corpus | None, seed: int) -> None:
    """The kind's check of ``suite``'s labels against ``corpus`` (relevant ids the corpus
    lacks: :class:`~retrieval_gate.errors.MissingRelevantError`), the held-out units said only
    by their count: the error names the visible units and their documents as before, and adds
    how many held-out units name documents the corpus lacks, never which, their documents or
    their positions."""
    from retrieval_gate.errors import MissingRelevantError
    from retrieval_gate.records import counted

    kind = suite.kind_object
    hidden = holdout_ids(suite, seed)
    if not hidden:
        kind.check(suite, corpus)
        return
    visible = dataclasses.replace(
        suite, queries=tuple(u for u in suite.queries if u.id not in hidden)
    )
    found: MissingRelevantError | None = None
    try:
        kind.check(visible, corpus)
    except MissingRelevantError as exc:
        found = exc
    stale = 0
    for unit in suite.queries:
        if unit.id in hidden:
            try:
                kind.check(dataclasses.replace(suite, queries=(unit,)), corpus)
            except MissingRelevantError:
                stale += 1
    if not stale:
        if found is not None:
            raise found
        return
    corpus_name = "the corpus" if found is not None or corpus is None else f"corpus {corpus.source}"
    said = (
        f"{counted(stale, f'held-out {kind.unit}', f'held-out {kind.units}')} "
        f"{'names' if stale == 1 else 'name'} documents not in {corpus_name} (which, and which "
        "documents, is not shown: the holdout shows only pass or fail)"
    )
    if found is not None:
        raise MissingRelevantError(
            f"{found.message}; and {said}", path=found.path, entry=found.entry
        )
    source = suite.units_source
    where = "" if source == suite.path else f" in {suite.path.name}"
    raise MissingRelevantError(
        f"{said}; fix the labels (a run without 'holdout' lists them), or count them as misses "
        f"with 'missing_relevant: miss'{where}",
        path=source,
        entry=kind.units_key,
    )
