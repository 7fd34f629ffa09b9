"""``--rg-suggest-floors``: floors from the baseline's lower confidence bounds, as a diff.

For each floor a suite gates on (a metric over the suite, a category or a difficulty; latency
ceilings are left alone), each system's bound is

    bound = mean - t_{0.975, n-1} * sd / sqrt(n)

over the baseline's per-query values of that metric, for the queries of the scope that the
current suite file still holds unchanged (same text and judgments: the query digest), with ``sd``
the sample standard deviation (n - 1) and ``t`` Student's quantile: the lower end of a two-sided
95 % t confidence interval of the scope's mean. Values without spread (every query 1.0) give no
t interval; for a metric within [0, 1] the bound is then Wilson's score interval's lower end for
a proportion ``mean`` out of ``n`` (n = 10 at 1.0: 0.72), never the mean itself, so one query
falling does not fail a floor suggested from a perfect run; a metric with other bounds gets no
suggestion then.

A floor gates every system it applies to: the suite's floor the systems without one of their own,
a ``system_floors`` entry the systems it names. The suggestion for each floor is the lowest bound
over those of its systems whose baseline meets it: a system already failing it (a broken one at
0.00) would switch the floor off, so it is left out and named with its own baseline value over the
scope (give it its own floor under ``system_floors``). When no system meets it, the floor follows
the best system's bound. Rounded down to 2 decimals, so the baseline clears it and the file stays
readable, then clamped to the metric's bounds.

Edge cases: a scope with fewer than 2 comparable queries, or a metric the baseline lacks, gets no
suggestion (an interval needs a spread); a suggestion equal to the current floor is not a change.

The output is a unified diff of the suite files (``a/<path>`` / ``b/<path>`` relative to the
rootdir, so ``git apply`` takes it); only the threshold's own text changes (located with the YAML
parser's marks, so comments, order and quoting stay). Nothing here writes a suite file.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

from retrieval_gate.baseline.head import Baseline
from retrieval_gate.display import HeldOut
from retrieval_gate.errors import RetrievalGateError, UnknownMetricError
from retrieval_gate.metrics import parse_metric
from retrieval_gate.records import RunRecord, parse_scope, scope_name
from retrieval_gate.suites.suite import Gate, Suite, load_suite

#: ``--rg-suggest-floors -``: the diff goes to the terminal summary instead of a file.
TERMINAL = "-"


@dataclass(frozen=True)
class FloorSuggestion:
    """One floor to change: where it is, what it is and what the baseline supports."""

    suite: Suite
    gate: Gate
    suggested: float
    n: int  # queries the bound is computed over (the fewest over systems)
    # Systems whose baseline does not meet the current floor, left out of the suggestion, each
    # with its baseline mean over the floor's scope.
    left_out: tuple[tuple[str, float], ...] = ()
    owner: str = ""  # the ``system_floors`` entry that holds the floor; "" for the suite's own
    systems: tuple[str, ...] = ()  # the systems the floor gates (the bounds are theirs)


def lower_bound(
    values: Sequence[float], confidence: float = 0.95, *, unit_interval: bool = False
) -> float | None:
    """mean - t_{(1 + confidence) / 2, n - 1} * sd / sqrt(n); None for fewer than 2 values.
    Without spread: Wilson's lower bound (:func:`wilson_lower`) for a metric within [0, 1]
    (``unit_interval``), else the mean."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    if sd < 1e-12 and unit_interval:
        return wilson_lower(mean, n, confidence)
    return mean - t_quantile((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)


def wilson_lower(share: float, n: int, confidence: float = 0.95) -> float:
    """The lower end of Wilson's score interval for a proportion ``share`` of ``n``:
    (p + z^2 / 2n - z sqrt(p (1 - p) / n + z^2 / 4n^2)) / (1 + z^2 / n), z the normal quantile
    (1.959964 at 95 %). At p = 1 it is n / (n + z^2): 10 queries all at 1.0 support 0.72."""
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    p = min(1.0, max(0.0, share))
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - margin) / (1 + z * z / n)


def _t_cdf(x: float, df: int) -> float:
    """P(T <= x) for x >= 0: 1/2 plus Simpson's rule on the density over [0, x] (1024 steps)."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def density(u: float) -> float:
        return math.exp(log_c - (df + 1) / 2 * math.log1p(u * u / df))

    steps = 1024
    h = x / steps
    total = density(0.0) + density(x)
    total += 4 * math.fsum(density((2 * i - 1) * h) for i in range(1, steps // 2 + 1))
    total += 2 * math.fsum(density(2 * i * h) for i in range(1, steps // 2))
    return 0.5 + total * h / 3


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for 0.5 <= p < 1 by bisection on :func:`_t_cdf` (no scipy, which is
    not a dependency); df = 1 is the Cauchy quantile tan(pi (p - 1/2)) exactly."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def round_down(value: float, decimals: int = 2) -> float:
    """``value`` rounded toward -inf to ``decimals`` places; 0.7 stays 0.7 despite binary error."""
    scale = 10.0**decimals
    return math.floor(value * scale + 1e-9) / scale


def suggest_floors(
    suites: Iterable[Suite], baseline: Baseline, systems: Sequence[str]
) -> list[FloorSuggestion]:
    """Each gated floor whose baseline lower bound (see the module docstring) differs from it."""
    out = []
    for suite in suites:
        # Which systems each floor gates: the suite's floor, or a system's own that replaces it.
        gated: dict[int, list[str]] = {}
        for system in systems:
            for gate in suite.gates_for(system):
                gated.setdefault(id(gate), []).append(system)
        owners = [("", g) for g in suite.gates]
        owners += [(pattern, g) for pattern, gates in suite.system_gates for g in gates]
        for owner, gate in owners:
            names = gated.get(id(gate), [])
            if gate.metric.is_latency or not names:
                continue
            found = _suggestion(suite, gate, names, baseline)
            if found is not None:
                out.append(dataclasses.replace(found, owner=owner))
    return out


def _suggestion(
    suite: Suite, gate: Gate, systems: Sequence[str], baseline: Baseline
) -> FloorSuggestion | None:
    bounds: list[tuple[float, int, str, float]] = []  # bound, n, system, baseline mean
    group = parse_scope(gate.scope)
    lo, hi = gate.metric.bounds
    unit = lo is not None and hi is not None and lo >= 0.0 and hi <= 1.0
    digests = {
        q.id: q.digest for q in suite.queries if group is None or getattr(q, group[0]) == group[1]
    }
    for system in systems:
        base = baseline.get(suite.name, system)
        if base is None:
            continue
        values = [
            q.metrics[gate.metric.name]
            for q in base.queries
            if digests.get(q.id) == q.digest and gate.metric.name in q.metrics
        ]
        bound = lower_bound(values, unit_interval=unit)
        if bound is not None:
            bounds.append((bound, len(values), system, math.fsum(values) / len(values)))
    if not bounds:
        return None
    meets = [b for b in bounds if b[3] >= gate.threshold - 1e-9]
    used = meets or [max(bounds)]
    floor = round_down(min(b for b, _, _, _ in used))
    floor = max(floor, lo) if lo is not None else floor
    floor = min(floor, hi) if hi is not None else floor
    left_out = tuple((name, mean) for _, _, name, mean in bounds if mean < gate.threshold - 1e-9)
    if abs(floor - gate.threshold) <= 1e-12:
        return None
    n = min(n for _, n, _, _ in used)
    return FloorSuggestion(
        suite, gate, floor, n, left_out, systems=tuple(name for _, _, name, _ in used)
    )


def _threshold_spans(text: str, path: Path) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(owner, scope, canonical metric) -> (start, end) character offsets of each floor's value;
    owner "" for the suite's floors, the ``system_floors`` entry for a system's own."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise RetrievalGateError(f"cannot locate the floors to change: {exc}", path=path) from None
    spans: dict[tuple[str, str, str], tuple[int, int]] = {}

    def items(node: Any) -> list[tuple[Any, Any]]:
        return list(node.value) if isinstance(node, yaml.MappingNode) else []

    def gates(node: Any, scope: str, owner: str) -> None:
        for key, value in items(node):
            try:
                name = parse_metric(str(key.value)).name
            except UnknownMetricError:
                continue  # the suite loader has refused it already; nothing to suggest
            if isinstance(value, yaml.ScalarNode):
                spans[(owner, scope, name)] = (value.start_mark.index, value.end_mark.index)

    def floors(node: Any, owner: str) -> None:
        for key, value in items(node):
            if key.value == "gates":
                gates(value, "suite", owner)
            elif key.value in ("categories", "difficulties"):
                kind = "category" if key.value == "categories" else "difficulty"
                for label, group in items(value):
                    gates(group, scope_name(kind, str(label.value)), owner)

    floors(root, "")
    for key, value in items(root):
        if key.value == "system_floors":
            for pattern, table in items(value):
                floors(table, str(pattern.value))
    return spans


def floors_diff(
    suggestions: Sequence[FloorSuggestion], rootpath: Path, seed: int = 0
) -> tuple[str, bool]:
    """A unified diff of every suite file with its suggested floors ("" when there are none),
    and whether a file's hunks have no context at all. Its context lines name no held-out unit
    (the suite's holdout under ``seed``): a file whose three lines of context would show one's
    line gets fewer, down to none (which ``git apply --unidiff-zero`` applies), as it takes."""
    bare = False
    by_file: dict[Path, list[FloorSuggestion]] = {}
    for s in suggestions:
        by_file.setdefault(s.suite.path, []).append(s)
    chunks = []
    for path, found in sorted(by_file.items()):
        text = path.read_text(encoding="utf-8")
        spans = _threshold_spans(text, path)
        edits: Mapping[tuple[int, int], str] = {
            spans[(s.owner, s.gate.scope, s.gate.metric.name)]: f"{s.suggested:.2f}"
            for s in found
            if (s.owner, s.gate.scope, s.gate.metric.name) in spans
        }
        changed = text
        # From the end, so earlier offsets stay valid.
        for (start, end), value in sorted(edits.items(), reverse=True):
            changed = changed[:start] + value + changed[end:]
        try:
            name = path.resolve().relative_to(rootpath.resolve()).as_posix()
        except ValueError:
            name = path.as_posix()
        held = _held_out(found[0].suite, seed)
        for context in (3, 2, 1, 0):
            diff = "".join(
                difflib.unified_diff(
                    text.splitlines(keepends=True),
                    changed.splitlines(keepends=True),
                    fromfile=f"a/{name}",
                    tofile=f"b/{name}",
                    n=context,
                )
            )
            shown = [line for line in diff.splitlines() if line.startswith(" ")]
            if not any(held.scrub(line) != line for line in shown):
                break
        bare = bare or (context == 0 and bool(diff))
        chunks.append(diff)
    return "".join(chunks), bare


def _held_out(suite: Suite, seed: int) -> HeldOut:
    """What names a held-out unit of ``suite`` (its ids and texts, whatever their length)."""
    from retrieval_gate.errors import SuiteError
    from retrieval_gate.suites.holdout import held_out_strings, holdout_ids

    try:
        hidden = holdout_ids(suite, seed)
    except SuiteError:
        hidden = frozenset()
    return HeldOut(held_out_strings(suite, hidden)[0])


def _left_out_line(s: FloorSuggestion) -> str:
    """Which systems a floor's suggestion leaves out and why: each one's own baseline mean over
    the floor's scope, below the floor."""
    whose = f" (system_floors.{s.owner})" if s.owner else ""
    below = ", ".join(f"{name} {mean:.4f}" for name, mean in s.left_out)
    scope = "the suite" if s.gate.scope == "suite" else s.gate.scope
    return (
        f"{s.suite.name} {s.gate.scope} {s.gate.metric.name}{whose}: left out {below} (their "
        f"baseline {s.gate.metric.name} over {scope} is below the floor {s.gate.threshold:g}; "
        "give such a system its own floor under system_floors)"
    )


def session_suggestions(
    target: str,
    runs: Iterable[RunRecord],
    baseline: Baseline | None,
    *,
    rootpath: Path,
    cwd: Path,
    seed: int = 0,
) -> list[str]:
    """What ``--rg-suggest-floors TARGET`` does at the end of a session, as terminal lines
    (``seed``: the settings', which decides each suite's holdout).

    The suites are those this session ran (each run's ``suite_path``, read again from disk), the
    systems those it ran them with. ``TARGET`` is a file (relative to ``cwd``) the diff is written
    to, or ``-`` for the terminal. A suite that no longer loads is named and skipped.
    """
    if baseline is None:
        return ["suggested floors: none, there is no baseline (save one with --rg-save-baseline)"]
    paths: dict[str, list[str]] = {}
    for run in runs:
        paths.setdefault(run.suite_path, []).append(run.system)
    lines: list[str] = []
    found: list[FloorSuggestion] = []
    for rel, names in sorted(paths.items()):
        try:
            suite = load_suite(rootpath / rel)
        except RetrievalGateError as exc:
            lines.append(f"suggested floors: skipped {exc.format()}")
            continue
        # Each suite with the systems it ran on (its `systems:` within the session's selection).
        found += suggest_floors([suite], baseline, names)
    diff, bare = floors_diff(found, rootpath, seed)
    apply = (
        "git apply --unidiff-zero it (no context: the lines around a floor name a held-out unit)"
        if bare
        else "git apply it"
    )
    files = len({s.suite.path for s in found})
    summary = f"{len(found)} floors in {files} suite files"
    lines += [f"suggested floors: {_left_out_line(s)}" for s in found if s.left_out]
    if target == TERMINAL:
        return [*lines, f"suggested floors ({summary}), from the baseline's lower 95 % bounds:"] + (
            diff.splitlines() or ["(no floor to change)"]
        )
    from retrieval_gate.files.atomic import write_text_atomic
    from retrieval_gate.files.outputs import FLOORS_HEADER

    out = Path(target).expanduser()
    out = out if out.is_absolute() else cwd / out
    # The header tells the next run this file is its own to replace; git apply skips it.
    write_text_atomic(out, f"{FLOORS_HEADER}\n{diff}")
    return [*lines, f"suggested floors ({summary}) written to {out}; review, then {apply}"]
