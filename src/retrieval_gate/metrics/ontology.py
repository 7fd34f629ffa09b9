"""MaxOntSim@k: how close the top k terms come to the expected ones in an ontology (Phentrieve).

Computed from :class:`OntologyInputs` (the suite's ontology and similarity measure, each query's
expected terms and ranking) rather than from judged rankings; see
:mod:`retrieval_gate.ontology.similarities` for the measures and docs/ontology.md for their
definitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from retrieval_gate.metrics.registry import MetricFamily

if TYPE_CHECKING:
    from retrieval_gate.ontology import Ontology

__all__ = ["FAMILIES", "OntologyInputs"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class OntologyInputs:
    """What an ontology metric reads: per query, the expected term ids (grade >= 1) and the
    ranking (best first), plus the ontology and the similarity measure by name."""

    ontology: Ontology
    measure: str
    expected: Sequence[Sequence[str]]
    rankings: Sequence[Sequence[str]]


def _max_ont_sim(inputs: OntologyInputs, k: int | None) -> FloatArray:
    from retrieval_gate.ontology import max_ont_sim_many

    cut = [list(ranking[:k]) for ranking in inputs.rankings]
    values = max_ont_sim_many(inputs.ontology, inputs.expected, cut, inputs.measure)
    return np.asarray(values, dtype=np.float64)


FAMILIES: tuple[MetricFamily, ...] = (
    MetricFamily(
        name="MaxOntSim",
        title="maximum ontology similarity",
        aliases=("maxontsim", "max_ont_sim"),
        input="ontology",
        needs_k=True,
        compute=_max_ont_sim,
        trec_name=None,
        version="phentrieve-spec10/1",
        description="""\
    MaxOntSim@k = 1                                   if an expected term is in the top k
                = max_{e in expected, t in top k} sim(e, t)   otherwise

Ontology suites only (`ontology:` in the suite). The similarity is the suite's `similarity`
(hybrid by default; depth, resnik, lin, jc, or one registered by name), computed over the is_a
hierarchy of the ontology with the definitions of docs/ontology.md: identical terms 1, terms
without a common ancestor 0. Expected terms are the query's relevant ids with grade >= 1, after
alt ids and obsolete ids were mapped to current terms at collection. A retrieved id that is not a
current term of the ontology contributes 0. An empty ranking scores 0. Not in trec_eval.""",
    ),
)
