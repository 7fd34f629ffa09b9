"""The metric registry: every metric family declares itself once, here or in a plugin.

A :class:`MetricFamily` is the whole definition of a family: its canonical name and aliases, its
cutoff grammar (``needs_k`` / ``takes_k``), the input it is computed from (``"ranking"``: the
:class:`~retrieval_gate.metrics.ranking.Judged` arrays through the shared kernel; ``"latency"``:
per-query wall times), a vectorised per-query ``compute`` function, its aggregation over queries,
its value bounds (floors are checked against them), the trec_eval measure it reproduces where
there is one, its description (formula and edge cases; docs/metrics.md is generated from it) and
its own definition ``version``. :func:`metric_versions` turns the versions into the strings the
baseline fingerprint stores, so changing one family's definition makes only that family's
metrics not comparable.

Where families come from, in this order, the first time any name is looked up:

1. every module of the ``retrieval_gate.metrics`` package that defines ``FAMILIES`` (a sequence
   of :class:`MetricFamily`), ordered by the module's ``ORDER`` (default 50) then its name, so a
   new built-in metric is one new module and nothing else;
2. the ``retrieval_gate.metrics`` entry-point group: each entry point loads to a
   :class:`MetricFamily`, a sequence of them, or a callable returning either;
3. :func:`register_metric` calls.

A name or alias (case-insensitive) claimed twice is a :class:`MetricRegistryError`.

Aggregation. A family's per-query series is reduced to one number by ``aggregation``:
``function(values, *components) -> float`` where ``components`` names other registered families
whose per-query series, over the same queries, the function also receives. The mean of the
per-query values (every built-in ranking metric) and a percentile of the per-query times
(latency) take no components. A micro-averaged F1 declares per-document series ``TP``, ``FP``,
``FN`` as (hidden) families of their own and aggregates ``F1_micro`` with
``components=("TP", "FP", "FN")`` and ``lambda f1, tp, fp, fn: 2 * tp.sum() / (2 * tp.sum() +
fp.sum() + fn.sum())``; a Pearson correlation computes the per-pair cosine as its own series and
aggregates it with ``components=("gold",)`` and ``lambda cos, gold: pearson(cos, gold)``. The
caller (:meth:`Metric.aggregate`) passes the component series sliced to the same queries, so
per-category scopes work unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from retrieval_gate.errors import RetrievalGateError, UnknownMetricError
from retrieval_gate.registry import Registry, package_modules
from retrieval_gate.usercode import DEFAULT_TIMEOUT_S, UserCodeFailure, call_user_code

__all__ = [
    "ENTRY_POINT_GROUP",
    "REGISTRY",
    "Aggregation",
    "Metric",
    "MetricFamily",
    "MetricRegistryError",
    "builtin_families",
    "format_bounds",
    "mean",
    "metric_versions",
    "parse_metric",
    "register_metric",
]

FloatArray = npt.NDArray[np.float64]

ENTRY_POINT_GROUP = "retrieval_gate.metrics"

InputKind = Literal["ranking", "latency", "ontology", "sets", "pairs"]


class MetricRegistryError(RetrievalGateError):
    """A metric family cannot be registered: a duplicate name, or a bad plugin entry point."""


def _mean(values: FloatArray) -> float:
    return float(values.mean()) if values.size else 0.0


@dataclass(frozen=True)
class Aggregation:
    """How per-query values become one number for a scope.

    ``function(values, *component_series) -> float``; ``components`` names the other families
    whose per-query series it reads (see the module docstring). ``name`` is what reports and
    docs show (``"mean"``, ``"p95"``). No queries must give 0.0.
    """

    name: str
    function: Callable[..., float]
    components: tuple[str, ...] = ()


mean = Aggregation("mean", _mean)


def format_bounds(bounds: tuple[float | None, float | None]) -> str:
    """``[0, 1]``, ``[0, inf)``, ``(-inf, 1]``: a family's value range as docs and errors show it."""
    lo, hi = bounds
    left = "(-inf" if lo is None else f"[{lo:g}"
    right = "inf)" if hi is None else f"{hi:g}]"
    return f"{left}, {right}"


@dataclass(frozen=True)
class MetricFamily:
    """One metric family: its whole definition, declared in one place.

    * ``name``: canonical spelling, what reports and ``evaluate()`` return (``nDCG@10``);
      ``aliases`` are accepted case-insensitively, with the same cutoff grammar.
    * ``needs_k`` / ``takes_k``: ``P@k`` only, ``MRR@k`` or ``MRR``, ``R-Prec`` only.
    * ``compute(data, k) -> FloatArray``: one value per query. ``data`` is the shared
      :class:`~retrieval_gate.metrics.kernel.Kernel` for ``input == "ranking"``, the
      per-query times in ms (a float64 array) for ``input == "latency"`` and
      :class:`~retrieval_gate.metrics.ontology.OntologyInputs` for ``input == "ontology"``.
    * ``aggregation``: per-query values -> one number (mean unless declared otherwise).
    * ``bounds``: ``(lo, hi)`` of any value, ``None`` = unbounded; floors must lie within.
    * ``trec_name``: the trec_eval measure the cutoff form reproduces (``{k}`` = the cutoff);
      ``trec_name_full`` the one the form without a cutoff reproduces; ``None``: no equivalent.
    * ``version``: the definition's version; change it whenever values can change, so
      baselines measured with the old definition stop being compared (:func:`metric_versions`).
    * ``title``: a few words for headings; ``description``: formula and edge cases (markdown,
      rendered into docs/metrics.md).
    * ``per_unit``: whether a unit's own value is this metric's value. False for a correlation:
      one pair has none, and its per-unit series is an input of the aggregation (the pair's
      cosine), so the report's JSON leaves it out of each unit's ``metrics``.
    """

    name: str
    title: str
    description: str
    compute: Callable[[Any, int | None], FloatArray]
    input: InputKind = "ranking"
    needs_k: bool = False
    takes_k: bool = True
    aliases: tuple[str, ...] = ()
    trec_name: str | None = None
    trec_name_full: str | None = None
    bounds: tuple[float | None, float | None] = (0.0, 1.0)
    higher_is_better: bool = True
    aggregation: Aggregation = mean
    version: str = "1"
    per_unit: bool = True

    @property
    def is_latency(self) -> bool:
        return self.input == "latency"

    @property
    def forms(self) -> tuple[str, ...]:
        """The spellings this family accepts, as shown to users: ``("MRR@k", "MRR")``."""
        return self._forms(self.name)

    def _forms(self, name: str) -> tuple[str, ...]:
        forms: list[str] = []
        if self.takes_k:
            forms.append(f"{name}@k")
        if not self.needs_k:
            forms.append(name)
        return tuple(forms)

    @property
    def alias_forms(self) -> tuple[str, ...]:
        """The aliases' spellings, leaving out case variants of the name (names ignore case)."""
        aliases = [a for a in self.aliases if a.lower() != self.name.lower()]
        return tuple(form for alias in aliases for form in self._forms(alias))


# --- the registry proper ----------------------------------------------------------------------

_aliases: dict[str, str] = {}  # every name and alias, lower-cased -> its family's name


def _guarded(family: MetricFamily, source: str) -> MetricFamily:
    """A third party's family whose ``compute`` runs as the user's code: under the time limit,
    any failure one line naming the metric and where it came from, and its values checked
    where they enter (one finite number per unit)."""
    from retrieval_gate.errors import RunError

    inner = family.compute

    def compute(data: Any, k: int | None) -> FloatArray:
        try:
            raw = call_user_code(lambda: inner(data, k), DEFAULT_TIMEOUT_S)
        except UserCodeFailure as exc:
            raise RunError(f"metric {family.name} ({source}) {exc.reason}") from None
        try:
            found = np.asarray(raw)
        except (TypeError, ValueError):
            found = np.array([np.nan])
        # Numbers only: numpy would read the text "1.0" as 1.0 if asked for floats.
        values = found.astype(np.float64) if found.dtype.kind in "iuf" else np.array([np.nan])
        if values.ndim != 1 or not np.isfinite(values).all():
            raise RunError(
                f"metric {family.name} ({source}) returned {type(raw).__name__} "
                f"{str(raw)[:60]!r}; expected one finite number per unit"
            )
        return values

    return dataclasses.replace(family, compute=compute)


def _admit(family: MetricFamily, source: str) -> MetricFamily:
    # A third party's compute runs guarded; a name or alias taken (case-insensitively) is refused.
    if not source.startswith(f"{__package__ or 'retrieval_gate.metrics'}."):
        family = _guarded(family, source)
    if not family.takes_k and family.needs_k:
        raise MetricRegistryError(f"{source}: {family.name} needs a cutoff but takes none")
    claimed = [family.name, *family.aliases]
    for spelling in claimed:
        owner = _aliases.get(spelling.lower())
        if owner is not None:
            raise MetricRegistryError(
                f"{source}: metric name {spelling!r} of {family.name} is already taken by {owner}"
            )
    for spelling in claimed:
        _aliases[spelling.lower()] = family.name
    return family


#: Every metric family by canonical name, in registration order (built-in modules, then entry
#: points, then ``register_metric``); loaded on the first look-up.
_REGISTRY: Registry[MetricFamily] = Registry(
    "metric family",
    kind=MetricFamily,
    attr="FAMILIES",
    group=ENTRY_POINT_GROUP,
    builtins=lambda: package_modules(__package__ or "retrieval_gate.metrics", "FAMILIES"),
    error=MetricRegistryError,
    admit=_admit,
    replace=True,  # refused by _admit, which knows every alias, with the owner's name
)
REGISTRY: Mapping[str, MetricFamily] = _REGISTRY


def register_metric(family: MetricFamily | Sequence[MetricFamily]) -> None:
    """Add one family (or several) to the registry, after the built-ins and entry points.

    A name or alias already taken (case-insensitively) is a :class:`MetricRegistryError`.
    """
    if isinstance(family, MetricFamily):
        families = [family]
    elif isinstance(family, Iterable) and not isinstance(family, (str, bytes)):
        families = list(family)
    else:
        raise MetricRegistryError(
            f"register_metric() gave {family!r}, not a MetricFamily or a sequence of them"
        )
    for one in families:
        _REGISTRY.register(one, source="register_metric()")


def builtin_families() -> list[MetricFamily]:
    """The families defined by this package's own modules, in registry order (for the docs)."""
    package = f"{__package__}."
    return [f for name, f in REGISTRY.items() if _REGISTRY.source_of(name).startswith(package)]


def _known() -> str:
    return ", ".join(form for f in REGISTRY.values() for form in f.forms)


def _lookup(spelling: str) -> MetricFamily | None:
    _REGISTRY.load()
    name = _aliases.get(spelling.lower())
    return None if name is None else REGISTRY[name]


@dataclass(frozen=True)
class Metric:
    """A metric family with an optional cutoff: ``Metric("nDCG", 10)`` is ``nDCG@10``."""

    family: str
    k: int | None = None

    def __post_init__(self) -> None:
        spec = REGISTRY.get(self.family)
        if spec is None:
            raise UnknownMetricError(f"unknown metric family {self.family!r}; known: {_known()}")
        if self.k is None:
            if spec.needs_k:
                raise UnknownMetricError(
                    f"metric {self.family!r} needs a cutoff, e.g. {self.family}@10; "
                    f"known: {_known()}"
                )
        elif not spec.takes_k:
            raise UnknownMetricError(f"metric {self.family!r} takes no cutoff; known: {_known()}")
        elif isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise UnknownMetricError(
                f"bad cutoff {self.k!r} for {self.family!r}: k must be an integer >= 1; "
                f"known: {_known()}"
            )

    @property
    def name(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"

    @property
    def spec(self) -> MetricFamily:
        """The family's declaration (looked up by name: a Metric holds only family and k)."""
        return REGISTRY[self.family]

    @property
    def is_latency(self) -> bool:
        return self.spec.is_latency

    @property
    def higher_is_better(self) -> bool:
        return self.spec.higher_is_better

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        """``(lo, hi)`` of any value of this metric; ``None`` is unbounded."""
        return self.spec.bounds

    @property
    def version(self) -> str:
        """``"<family>/<version>"``, e.g. ``"nDCG/trec_eval-10/1"`` (see :func:`metric_versions`)."""
        return f"{self.spec.name}/{self.spec.version}"

    def aggregate(
        self, values: FloatArray, components: Mapping[str, FloatArray] | None = None
    ) -> float:
        """One number from per-query values: the family's aggregation (mean unless declared).

        ``components`` maps the family names the aggregation reads (``spec.aggregation
        .components``) to their per-query series over the same queries. No queries: 0.0.
        """
        aggregation = self.spec.aggregation
        series = []
        for name in aggregation.components:
            if components is None or name not in components:
                raise ValueError(f"aggregating {self.name} needs the per-query values of {name}")
            series.append(components[name])
        return float(aggregation.function(np.asarray(values, dtype=np.float64), *series))

    def __str__(self) -> str:
        return self.name


def bounds_by_name(text: str) -> tuple[float | None, float | None] | None:
    """The value bounds of the metric ``text`` names, None when it names none known here."""
    try:
        return parse_metric(text).bounds
    except UnknownMetricError:
        return None


def parse_metric(text: str) -> Metric:
    """Parse ``"nDCG@10"``, ``"p@5"``, ``"success@1"``, ``"R-Prec"``, ``"latency_p95_ms"``.

    Family names and aliases are case-insensitive; the cutoff must be an integer >= 1.
    Raises :class:`~retrieval_gate.errors.UnknownMetricError` quoting ``text`` and listing the
    registry's metrics.
    """
    if not isinstance(text, str):
        raise UnknownMetricError(f"metric must be a string, got {text!r}; known: {_known()}")
    head, at, tail = text.strip().partition("@")
    spec = _lookup(head.strip())
    if spec is None:
        raise UnknownMetricError(f"unknown metric {text!r}; known: {_known()}")
    if not at:
        if spec.needs_k:
            raise UnknownMetricError(
                f"metric {text!r} needs a cutoff, e.g. {spec.name}@10; known: {_known()}"
            )
        return Metric(spec.name, None)
    if not spec.takes_k:
        raise UnknownMetricError(f"metric {text!r} takes no cutoff; known: {_known()}")
    cutoff = tail.strip()
    # str.isdigit accepts non-ASCII digits such as "²", which int() then rejects.
    if not (cutoff.isascii() and cutoff.isdigit()) or int(cutoff) < 1:
        raise UnknownMetricError(
            f"bad cutoff in metric {text!r}: k must be an integer >= 1; known: {_known()}"
        )
    return Metric(spec.name, int(cutoff))


def as_metric(metric: str | Metric) -> Metric:
    return metric if isinstance(metric, Metric) else parse_metric(metric)


def metric_versions(metrics: Iterable[Metric | str]) -> dict[str, str]:
    """Canonical metric name -> ``"<family>/<version>"`` of its definition.

    ``{"P@5": "P/trec_eval-10/1", "nDCG@10": "nDCG/trec_eval-10/1"}``: the family's canonical
    name, a slash, then its ``version`` (which may itself hold a slash, such as the trec_eval
    release a family reproduces). Every cutoff of a family shares its version. Two runs' values
    of a metric are comparable when these strings are equal. Sorted by metric name, so the
    mapping serialises the same way whatever the input order. Unknown names raise
    :class:`~retrieval_gate.errors.UnknownMetricError`.
    """
    parsed = {m.name: m for m in map(as_metric, metrics)}
    return {name: parsed[name].version for name in sorted(parsed)}
