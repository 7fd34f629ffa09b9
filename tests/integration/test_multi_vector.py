"""Multi-vector term retrieval and the rerank stage end to end (SPEC section 10): an ontology
suite on the tiny OBO fixture, gated through four systems that differ only in their field and
stage settings, with an embedder whose cosines are known exactly (the project's conftest
registers it).

The query "arm shortening" expects T:0000007 ("Short arm", synonyms "Arm shortening" and
"Brachymelia of the arm"). Cosines with the query: "Arm shortening" 1.0, "Short arm" 0.6,
"Long arm" (T:0000008's label, and its whole text) 0.8, T:0000007's text (label, synonyms and
definition joined) 0.5; every other text 0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import write_suite

pytest.importorskip("pronto")

TINY = Path(__file__).parents[1] / "data" / "ontology" / "tiny.obo"

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate]
systems = ["single", "multi-max", "multi-label", "single-rerank"]

[tool.retrieval_gate.system.single]
embedder = "known-cosines"
model = "m"
index = "exact"

[tool.retrieval_gate.system.multi-max]
embedder = "known-cosines"
model = "m"
index = "exact"
fields = ["label", "synonyms", "definition"]
multi_vector = true
aggregation = "label_synonyms_max"

[tool.retrieval_gate.system.multi-label]
embedder = "known-cosines"
model = "m"
index = "exact"
fields = ["label", "synonyms", "definition"]
multi_vector = true
aggregation = "label_only"

[tool.retrieval_gate.system.single-rerank]
embedder = "known-cosines"
model = "m"
index = "exact"
stages = [{stage = "rerank", reranker = "term_rerank:by_word", rerank_depth = 2}]
"""

CONFTEST = """
import math

import numpy as np

from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder

T7 = "Short arm\\nArm shortening\\nBrachymelia of the arm\\nAn arm that is shorter than usual for age."
COSINE = {"Arm shortening": 1.0, "Short arm": 0.6, "Long arm": 0.8, T7: 0.5}


class KnownCosines:
    identity = "test-known-cosines/1"
    dim = 3

    def encode_documents(self, texts, *, progress=False):
        rows = []
        for text in texts:
            c = COSINE.get(text, 0.0)
            rows.append([c, 0.0, math.sqrt(1 - c * c)])
        return np.array(rows, dtype=np.float32)

    def encode_queries(self, texts):
        return np.array([[1.0, 0.0, 0.0] for _ in texts], dtype=np.float32)


register_embedder(
    EmbedderBackend("known-cosines", "test", {}, lambda s, c, e: KnownCosines(), "test")
)


def pytest_unconfigure(config):
    EMBEDDERS.pop("known-cosines", None)
"""

RERANKER = """
def by_word(query, docs):
    # Test reranker: 1 for a document containing the query's last word, else 0.
    word = query.split()[-1].lower()
    return [(doc, 1.0 if word in text.lower() else 0.0) for doc, text in docs]
"""

SUITE = """
name: arm-terms
ontology: tiny.obo
k: [1, 2]
queries:
  - text: arm shortening
    expected_hpo_ids: [T:0000007]
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(term_rerank=RERANKER)
    pytester.syspathinsert()
    shutil.copy(TINY, pytester.path / "tiny.obo")
    return pytester


def _runs(pytester: pytest.Pytester) -> dict[str, Any]:
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return {run["system"]: run for run in data["runs"]}


def test_aggregation_and_reranking_change_the_rank_of_the_term(project: pytest.Pytester) -> None:
    write_suite(project, SUITE, name="terms.retrieval.yaml")
    result = project.runpytest("--retrieval-gate")
    result.assert_outcomes(passed=4)
    runs = _runs(project)
    # single: one vector per term; T:8 (0.8) above T:7 (0.5): T:7 at rank 2.
    # multi-max: T:7 = max(0.6, 1.0, 0) = 1.0 above T:8's 0.8: rank 1.
    # multi-label: T:7 = 0.6 below T:8's 0.8: rank 2.
    # single-rerank: single's top 2 (T:8, T:7) re-scored: only T:7's text holds "shortening".
    expected = {"single": 0.5, "multi-max": 1.0, "multi-label": 0.5, "single-rerank": 1.0}
    assert {name: run["metrics"]["MRR@2"] for name, run in runs.items()} == expected
    assert {name: run["metrics"]["Hit@1"] for name, run in runs.items()} == {
        name: 1.0 if mrr == 1.0 else 0.0 for name, mrr in expected.items()
    }
    # T:8 against T:7 (lca T:4 at depth 2, both at depth 3, D = 3): hybrid 2/3 at k = 1.
    assert runs["single"]["metrics"]["MaxOntSim@1"] == pytest.approx(
        0.7 * 2 / 3 + 0.3 * (1 - (3 + 3 - 4) / 6), abs=1e-12
    )
    assert runs["multi-max"]["metrics"]["MaxOntSim@1"] == 1.0


def test_fingerprints_name_fields_and_stages(project: pytest.Pytester) -> None:
    write_suite(project, SUITE, name="terms.retrieval.yaml")
    project.runpytest("--retrieval-gate").assert_outcomes(passed=4)
    runs = _runs(project)
    single = runs["single"]["fingerprint"]["system"]
    assert "fields" not in single and "stages" not in single
    multi = runs["multi-max"]["fingerprint"]["system"]
    assert multi == {
        **single,
        "fields": ["label", "synonyms", "definition"],
        "multi_vector": True,
        "aggregation": "label_synonyms_max",
    }
    reranked = runs["single-rerank"]["fingerprint"]["system"]
    assert reranked["stages"] == [
        {
            "stage": "rerank",
            "reranker": "term_rerank:by_word",
            "rerank_depth": 2,
            "batch_size": 32,
            "reranker_identity": "term_rerank:by_word",
        }
    ]
