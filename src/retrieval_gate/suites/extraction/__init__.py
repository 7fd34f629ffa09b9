"""Extraction suites (docs/extraction.md): documents with the terms a reader should find in them.

A system chunks each document (:mod:`.chunking`), retrieves terms per chunk through the normal
system protocol, and aggregates the per-chunk hits into the document's predicted set
(:mod:`.aggregate`); :mod:`.documents` loads the suite's documents, :mod:`.settings` declares the
per-system ``extraction`` settings and :mod:`.run` runs a suite. The metrics (P, R, F1 micro,
macro and weighted) are in :mod:`retrieval_gate.metrics.extraction`. Nothing here is imported
without ``--retrieval-gate``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import SuiteError
from retrieval_gate.schema import Option, OptionTable
from retrieval_gate.suites.extraction.settings import SYSTEM_OPTIONS
from retrieval_gate.suites.kind import Resources, SuiteKind, UnitRecord
from retrieval_gate.suites.ontology import ONTOLOGY_OPTIONS

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.records import QueryRecord, RunRecord, Section
    from retrieval_gate.suites.extraction.documents import DocumentUnit
    from retrieval_gate.suites.result import RunResult
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.suites.units import Unit
    from retrieval_gate.systems import OpenContext
    from retrieval_gate.systems.config import SystemConfig

__all__ = ["KIND", "ExtractionExtras", "ExtractionKind", "ExtractionSpec"]

#: How many of the lowest-F1 documents the report lists per system.
WORST = 5


@dataclass(frozen=True)
class ExtractionSpec:
    """What an extraction suite parses besides its documents: the ontology its terms are of."""

    ontology: Any  # suites.ontology.OntologySpec


@dataclass(frozen=True)
class ExtractionExtras:
    """An extraction document's record extras: its gold terms that are not affirmed, and the
    terms the system reported negated."""

    gold_negated: tuple[str, ...] = ()
    predicted_negated: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        # Only what is there: the keys 0.1's JSON twin wrote.
        return {
            **({"gold_negated": list(self.gold_negated)} if self.gold_negated else {}),
            **(
                {"predicted_negated": list(self.predicted_negated)}
                if self.predicted_negated
                else {}
            ),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExtractionExtras | None:
        if not data.get("gold_negated") and not data.get("predicted_negated"):
            return None
        return cls(
            gold_negated=tuple(data.get("gold_negated", ())),
            predicted_negated=tuple(data.get("predicted_negated", ())),
        )


def _extras(query: QueryRecord) -> ExtractionExtras:
    found = query.extras
    return found if isinstance(found, ExtractionExtras) else ExtractionExtras()


def _documents(suite: Suite) -> list[DocumentUnit]:
    from retrieval_gate.suites.extraction.documents import DocumentUnit

    return [doc for doc in suite.queries if isinstance(doc, DocumentUnit)]


def _terms(query: QueryRecord, ids: list[str], limit: int = 6) -> str:
    """Terms in a markdown cell: each id with its label."""
    shown = ", ".join(
        f"`{t}`" + (f" {query.labels[t]}".replace("|", "\\|") if t in query.labels else "")
        for t in ids[:limit]
    )
    return (shown + (f" +{len(ids) - limit}" if len(ids) > limit else "")) or "-"


def _named(query: QueryRecord, ids: list[str], limit: int = 6) -> str:
    """Terms in a message line: each id with its label."""
    shown = ", ".join(query.named(t) for t in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _missed_and_extra(query: QueryRecord) -> str:
    """What a document's prediction got wrong, for a message line."""
    gold, predicted = set(query.gold), set(query.ranking)
    missed, extra = sorted(gold - predicted), sorted(predicted - gold)
    parts = [f"found {len(gold & predicted)} of {len(gold)}"]
    parts += [f"missed {_named(query, missed)}"] if missed else []
    parts += [f"extra {_named(query, extra)}"] if extra else []
    return "; ".join(parts)


#: The keys of an extraction suite besides the header.
EXTRACTION_SUITE_OPTIONS: OptionTable = {
    "documents": Option(
        (list, str),
        None,
        "the documents and their terms (docs/extraction.md), or a file or folder of them",
    ),
    "ontology": ONTOLOGY_OPTIONS["ontology"],
}


class ExtractionKind(SuiteKind):
    """Documents with the terms a reader should find, judged by set-based P, R and F1."""

    name = "extraction"
    unit = "document"
    units = "documents"
    units_key = "documents"
    # Not 'similarity': it says how MaxOntSim@k scores a near miss, and an extraction suite's
    # metrics are set-based (a term is found or not), so the key would be read and ignored.
    options = EXTRACTION_SUITE_OPTIONS
    # No cutoffs either: a document's predicted set is cut by the system's extraction settings
    # (num_results, thresholds), and a 'k' would only have changed the suite's digest.
    takes_k = False
    inputs = ("sets", "latency")
    system_options = SYSTEM_OPTIONS
    intervals = True

    def parse(self, data: Mapping[str, Any], path: Path) -> tuple[Sequence[Unit], Any]:
        from retrieval_gate.suites.extraction.documents import parse_documents
        from retrieval_gate.suites.ontology import parse_ontology

        if data["documents"] is None:
            raise SuiteError(
                f"a {self.name} suite needs '{self.units_key}'", path=path, entry=self.units_key
            )
        ontology = parse_ontology(data, path, kind=self.name)
        return parse_documents(data["documents"], path), ExtractionSpec(ontology=ontology)

    def digest_payload(self, suite: Suite) -> dict[str, Any]:
        return {**super().digest_payload(suite), "ontology": suite.spec.ontology.digest_part()}

    def prepare(self, suite: Suite, resources: Resources) -> Suite:
        """Gold ids (affirmed and negated) mapped to current terms; an obsolete id without a
        replacement stays gold, with a note."""
        from retrieval_gate.suites.ontology import TermMapper, load_ontology_of

        ontology = load_ontology_of(suite.spec.ontology, suite, resources)
        mapper = TermMapper(ontology, suite.path, units_key=self.units_key, keep_obsolete=True)
        documents = []
        for doc in _documents(suite):
            relevant = mapper.relevant(doc)
            # A term affirmed as well stays affirmed.
            mapped = frozenset(mapper(doc, term) for term in sorted(doc.negated)) - set(relevant)
            documents.append(dataclasses.replace(doc, relevant=relevant, negated=mapped))
        return dataclasses.replace(suite, queries=tuple(documents), notes=tuple(mapper.notes))

    def corpus(self, suite: Suite, fallback: Path | None, resources: Resources) -> Corpus | None:
        from retrieval_gate.suites.ontology import terms_of

        return terms_of(suite.spec.ontology, suite, resources)

    def check(self, suite: Suite, corpus: Corpus | None) -> None:
        # The gold ids were checked against the ontology (prepare); the obsolete ones kept as
        # gold are in no corpus, by design.
        return None

    def run(self, suite: Suite, system: SystemConfig, context: OpenContext) -> RunResult:
        from retrieval_gate.suites.extraction.run import run_extraction

        return run_extraction(suite, system, context)

    def metric_inputs(
        self, run: RunResult, inputs: set[str], resources: Resources
    ) -> dict[str, object]:
        if "sets" not in inputs:
            return {}
        from retrieval_gate.metrics.extraction import SetInputs

        documents = _documents(run.suite)
        return {
            "sets": SetInputs(
                gold=[frozenset(d for d, g in q.relevant.items() if g >= 1) for q in documents],
                gold_negated=[q.negated for q in documents],
                predicted=[frozenset(r) for r in run.rankings],
                predicted_negated=[frozenset(n) for n in run.extras]
                if run.extras
                else [frozenset() for _ in documents],
            )
        }

    def unit_record(self, run: RunResult, index: int) -> UnitRecord:
        # A document keeps every predicted term: its JSON twin is the full set.
        document = _documents(run.suite)[index]
        extras = ExtractionExtras(
            gold_negated=tuple(sorted(document.negated)),
            predicted_negated=tuple(sorted(run.extras[index])) if run.extras else (),
        )
        return UnitRecord(
            ranking=tuple(run.rankings[index]),
            extras=extras,
            shown=extras.gold_negated + extras.predicted_negated,
        )

    def labels(self, run: RunResult, resources: Resources) -> Callable[[str], str | None]:
        from retrieval_gate.suites.ontology import term_labels

        return term_labels(run.suite.spec.ontology, run.suite, resources)

    def described(self, unit: QueryRecord) -> str:
        # A document's opening words say nothing about what it got wrong; its terms do
        # (failure_lines).
        return ""

    def failure_lines(
        self, run: RunRecord, metric: str, scope: str, worst: Sequence[str]
    ) -> tuple[str, ...]:
        """Each worst document's missed and extra terms, with their labels."""
        return tuple(f"{qid}: {_missed_and_extra(run.query(qid))}" for qid in worst)

    def decode_extras(self, data: Mapping[str, Any]) -> ExtractionExtras | None:
        return ExtractionExtras.from_json(data)

    def run_view(self, record: RunRecord) -> dict[str, Any]:
        """``documents``: per document its gold and predicted terms, enough to recompute every
        figure (docs/extraction.md)."""
        return {
            "documents": [
                {
                    "id": q.id,
                    "gold": sorted(q.gold),
                    "gold_negated": list(_extras(q).gold_negated),
                    "predicted": list(q.ranking),
                    "predicted_negated": list(_extras(q).predicted_negated),
                }
                for q in record.queries
            ]
        }

    def explain(self, qid: str, now: QueryRecord, then: QueryRecord, metric: str) -> str:
        """The gold terms a document now misses and the terms it now predicts wrongly."""
        from retrieval_gate.records import format_value

        values = f"{format_value(then.metrics[metric])} -> {format_value(now.metrics[metric])}"
        gold = set(now.gold)
        missed = sorted((gold - set(now.ranking)) - (gold - set(then.ranking)))
        extra = sorted((set(now.ranking) - gold) - (set(then.ranking) - gold))
        parts = [f"now misses {', '.join(now.named(t) for t in missed)}"] if missed else []
        parts += [f"now also predicts {', '.join(now.named(t) for t in extra)}"] if extra else []
        return f"{qid}: {metric} {values}; " + ("; ".join(parts) or "same terms, other scores")

    def headline(self, run: RunRecord) -> tuple[str, ...]:
        return ("F1_micro", "P_micro", "R_micro", "F1_macro")

    def sections(self, runs: Sequence[RunRecord], metrics: Sequence[str]) -> list[Section]:
        """The documents with the lowest F1, with the gold terms missed and the terms predicted
        wrongly (a negated gold term predicted affirmed counts as wrong)."""
        from retrieval_gate.records import Section, Table

        tables = []
        for run in runs:
            ordered = sorted(run.queries, key=lambda q: (q.metrics.get("F1_macro", 0.0), q.id))
            rows = []
            for q in ordered[:WORST]:
                gold, predicted = set(q.gold), set(q.ranking)
                f1 = q.metrics.get("F1_macro")
                rows.append(
                    (
                        f"`{q.id}`",
                        "-" if f1 is None else f"{f1:.4f}",
                        f"{len(gold & predicted)} of {len(gold)}",
                        _terms(q, sorted(gold - predicted)),
                        _terms(q, sorted(predicted - gold)),
                    )
                )
            tables.append(
                Table(
                    header=("document", "F1", "found", "missed", "extra"),
                    rows=tuple(rows),
                    caption=f"`{run.system}`:",
                )
            )
        return [Section(title="Worst documents by F1", tables=tuple(tables))]


KIND = ExtractionKind()
