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

import hashlib
from collections.abc import Iterable
from typing import TypeVar

from retrieval_gate.errors import RetrievalGateError, SuiteError
from retrieval_gate.suites.suite import Suite

E = TypeVar("E", bound=RetrievalGateError)

__all__ = [
    "hide_held_out",
    "holdout_ids",
    "holdout_key",
    "holdout_tolerance",
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


#: What an error says in place of a held-out unit's id or text.
HELD_OUT_NAME = "a held-out unit"


def hide_held_out(error: E, suite: Suite, seed: int) -> E:
    """``error`` (a run's failure: a retriever that raised on a query, stale labels) with each
    held-out unit's id and text written as :data:`HELD_OUT_NAME`, whole words only, in its entry
    and its message, so that a failed run names no held-out unit either. The same exception,
    changed in place (its traceback and cause are kept)."""
    import re

    try:
        hidden = holdout_ids(suite, seed)
    except SuiteError:
        return error  # the suite's own holdout error, raised at collection
    if not hidden:
        return error
    words = sorted(
        {*hidden, *(u.text for u in suite.queries if u.id in hidden and u.text)},
        key=len,
        reverse=True,
    )
    pattern = re.compile(
        r"(?<![\w.:/-])(?:" + "|".join(re.escape(w) for w in words) + r")(?![\w.:/-])"
    )

    def scrub(text: str) -> str:
        return pattern.sub(HELD_OUT_NAME, text)

    error.message = scrub(error.message)
    if error.traceback is not None:  # a library's, which may quote a query
        error.traceback = scrub(error.traceback)
    if error.entry is not None:
        error.entry = scrub(error.entry)
    error.args = (error.format(),)
    return error
