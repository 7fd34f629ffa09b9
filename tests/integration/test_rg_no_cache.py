"""``--rg-no-cache``: no embedding is read from or written to the cache folder, yet a corpus
embedded once in the session is not embedded again for another suite over the same corpus."""

from __future__ import annotations

import json

import pytest

from .conftest import embedder_project, write_suite

# An embedder that writes how many texts each document call was given: the count of encoder
# work, whatever the machine's speed.
EMBEDDER = """
import numpy as np

from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder


class Counting:
    identity = "counting/1"
    dim = 4

    def _vectors(self, texts):
        return np.eye(4, dtype=np.float32)[[len(t) % 4 for t in texts]] + 0.1

    def encode_documents(self, texts, *, progress=False):
        with open("document-calls.txt", "a") as out:
            out.write(f"{len(texts)}\\n")
        return self._vectors(texts)

    def encode_queries(self, texts):
        return self._vectors(texts)


register_embedder(EmbedderBackend("counting", "test", {}, lambda s, c, e: Counting(), "test"))


def pytest_unconfigure(config):
    EMBEDDERS.pop("counting", None)
"""

SUITE = """
name: {name}
k: [1]
gates: {{P@1: 0.0}}
queries:
  - {{id: q1, query: orders, relevant: [a.md]}}
  - {{id: q2, query: refunds, relevant: [c.md]}}
"""


def test_a_corpus_is_embedded_once_per_session_without_the_cache(
    pytester: pytest.Pytester,
) -> None:
    embedder_project(pytester, "counting", EMBEDDER)
    write_suite(pytester, SUITE.format(name="first"), "first.retrieval.yaml")
    write_suite(pytester, SUITE.format(name="second"), "second.retrieval.yaml")

    result = pytester.runpytest("--retrieval-gate", "--rg-no-cache")
    result.assert_outcomes(passed=2)
    # The three documents, embedded by the first suite's run alone.
    assert (pytester.path / "document-calls.txt").read_text().split() == ["3"]
    assert not (pytester.path / ".retrieval-gate-cache").exists()
    runs = json.loads((pytester.path / "retrieval-gate-report.json").read_text())["runs"]
    counts = {
        r["suite"]: (
            r["stats"]["embedded_documents"],
            r["stats"]["cached_documents"],
            r["stats"]["session_documents"],
        )
        for r in runs
    }
    assert counts == {"first": (3, 0, 0), "second": (0, 0, 3)}
    report = (pytester.path / "retrieval-gate-report.md").read_text()
    assert "embedded 0, from this session 3" in report
