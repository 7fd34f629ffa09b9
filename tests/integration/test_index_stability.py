"""The stability of an approximate index between two builds from the same vectors: measured on
the index-recall queries, reported in the run's stats and the report, and off when asked."""

from __future__ import annotations

import json
from typing import Any

import pytest

from retrieval_gate.metrics.overlap import rbo_ext

CONFTEST = '''
import numpy as np

from retrieval_gate.embed import EMBEDDERS, EmbedderBackend, register_embedder
from retrieval_gate.index import INDEXES, IndexBackend, register_index

VECTORS = {
    "alpha": [1.0, 0.0, 0.0], "beta": [0.9, 0.1, 0.0], "gamma": [0.7, 0.3, 0.0],
    "delta": [0.5, 0.5, 0.0], "epsilon": [0.0, 0.0, 1.0],
}
BUILDS = []


class Axis:
    identity = "test-axis/1"
    dim = 3

    def _rows(self, texts):
        rows = np.array([VECTORS[t.split()[0]] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def encode_documents(self, texts, *, progress=False):
        return self._rows(texts)

    def encode_queries(self, texts):
        return self._rows(texts)


class Unstable:
    """Exact search, except that every build after the first swaps each query's top two."""

    def __init__(self):
        BUILDS.append(self)
        self.swap = len(BUILDS) > 1
        self.ids, self.rows = [], np.zeros((0, 3), dtype=np.float32)

    def add(self, ids, vectors):
        self.ids += list(ids)
        self.rows = np.vstack([self.rows, vectors])

    def search(self, queries, k):
        out = []
        for q in np.asarray(queries):
            scores = self.rows @ q
            order = sorted(range(len(self.ids)), key=lambda i: (-scores[i], self.ids[i]))[:k]
            if self.swap and len(order) > 1:
                order[0], order[1] = order[1], order[0]
            out.append([(self.ids[i], float(scores[i])) for i in order])
        return out

    def __len__(self):
        return len(self.ids)


register_embedder(EmbedderBackend("axis", "test", {}, lambda s, c, e: Axis(), "test"))
register_index(
    IndexBackend("unstable", {}, lambda d, key, o: Unstable(), "test", approximate=True,
                 rebuildable=True)
)


def pytest_unconfigure(config):
    from pathlib import Path

    Path(str(config.rootpath), "builds.txt").write_text(str(len(BUILDS)))
    EMBEDDERS.pop("axis", None)
    INDEXES.pop("unstable", None)
'''

SUITE = """
name: axis
k: [1, 3]
queries:
  - {id: qa, query: alpha query, relevant: [alpha.txt]}
  - {id: qd, query: delta query, relevant: [delta.txt]}
"""


def _project(pytester: pytest.Pytester, extra: str = "") -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(
        ".toml",
        pyproject='[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n'
        '[tool.retrieval_gate]\ncorpus = "corpus/"\n'
        '[tool.retrieval_gate.system.s]\nembedder = "axis"\nmodel = "none"\n'
        f'index = "unstable"\n{extra}',
    )
    for name in ("alpha", "beta", "gamma", "delta", "epsilon"):
        path = pytester.path / "corpus" / f"{name}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"{name} document")
    (pytester.path / "axis.retrieval.yaml").write_text(SUITE)


def _stats(pytester: pytest.Pytester) -> dict[str, Any]:
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    (run,) = data["runs"]
    stats: dict[str, Any] = run["stats"]
    return stats


def test_a_second_build_that_ranks_differently_is_measured(pytester: pytest.Pytester) -> None:
    _project(pytester)
    pytester.runpytest("--retrieval-gate", "--rg-no-cache").assert_outcomes(passed=1)
    stats = _stats(pytester)
    # Exact top 3: qa -> alpha, beta, gamma; qd -> delta, gamma, beta. The second build swaps
    # the first two of each: the same three documents, never the same order.
    first = [["alpha.txt", "beta.txt", "gamma.txt"], ["delta.txt", "gamma.txt", "beta.txt"]]
    second = [[r[1], r[0], r[2]] for r in first]
    assert stats["index_recall"] == 1.0  # the first build is exact
    assert stats["index_stability_overlap"] == 1.0
    assert stats["index_stability_jaccard"] == 1.0
    assert stats["index_stability_identical"] == 0
    expected = sum(rbo_ext(a, b) for a, b in zip(first, second, strict=True)) / 2
    assert stats["index_stability_rbo"] == pytest.approx(expected, abs=1e-12)
    assert expected < 1.0
    markdown = (pytester.path / "retrieval-gate-report.md").read_text()
    assert (
        f"a second build of the index from the same vectors: RBO {expected:.4f}, overlap@3 "
        "1.0000, same top 3 for 0 of 2 queries"
    ) in markdown


def test_stability_is_not_measured_when_off(pytester: pytest.Pytester) -> None:
    _project(pytester, 'index_stability = "off"\n')
    pytester.runpytest("--retrieval-gate", "--rg-no-cache").assert_outcomes(passed=1)
    stats = _stats(pytester)
    assert stats["index_recall"] == 1.0
    assert not any(key.startswith("index_stability") for key in stats)


def test_a_bad_stability_setting_is_one_line(pytester: pytest.Pytester) -> None:
    _project(pytester, 'index_stability = "sometimes"\n')
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret != 0
    result.stderr.fnmatch_lines(
        ["*[[]system.s[]]: invalid 'index_stability': 'sometimes'; expected string (auto, on, off)"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_warm_run_reads_the_figures_back_instead_of_building_again(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    pytester.runpytest("--retrieval-gate").assert_outcomes(passed=1)
    first = _stats(pytester)
    # The run's own index, then the second build of the stability measurement.
    assert (pytester.path / "builds.txt").read_text() == "2"
    pytester.runpytest("--retrieval-gate").assert_outcomes(passed=1)
    again = _stats(pytester)
    assert (pytester.path / "builds.txt").read_text() == "1"
    stability = {k: v for k, v in first.items() if k.startswith("index_stability")}
    assert stability and stability == {
        k: v for k, v in again.items() if k.startswith("index_stability")
    }


@pytest.mark.parametrize("damage", ["flipped-byte", "truncated", "foreign"])
def test_a_damaged_figures_entry_is_said_in_one_line_and_measured_again(
    pytester: pytest.Pytester, damage: str
) -> None:
    _project(pytester)
    pytester.runpytest("--retrieval-gate").assert_outcomes(passed=1)
    clean = _stats(pytester)
    (entry,) = (pytester.path / ".retrieval-gate-cache" / "index-stability").glob("*.json")
    text = entry.read_bytes()
    if damage == "flipped-byte":
        at = text.index(b'"index_stability_rbo":') + len(b'"index_stability_rbo":') + 3
        entry.write_bytes(text[:at] + bytes([text[at] ^ 0x01]) + text[at + 1 :])
    elif damage == "truncated":
        entry.write_bytes(text[: len(text) // 2])
    else:  # another entry's file (another collection, query set or k) copied over this one
        entry.with_name("0" * 64 + ".json").write_bytes(text)
        entry.write_bytes(text.replace(entry.stem.encode(), b"0" * 64))
    # As a user's run shows it (this test session makes warnings errors).
    result = pytester.runpytest("--retrieval-gate", "-W", "default::UserWarning")
    result.assert_outcomes(passed=1, warnings=1)
    lines = [line for line in result.outlines if f"index stability cache entry {entry}" in line]
    assert len(lines) == 1 and lines[0].endswith("; computed again")
    # Measured again (a second build), with the clean run's figures; the entry is whole again.
    assert (pytester.path / "builds.txt").read_text() == "2"
    figures = {k: v for k, v in clean.items() if k.startswith("index_")}
    assert {k: v for k, v in _stats(pytester).items() if k.startswith("index_")} == figures
    pytester.runpytest("--retrieval-gate").assert_outcomes(passed=1)
    assert (pytester.path / "builds.txt").read_text() == "1"
