"""A damaged vector shard or chroma graph, as a user's run meets it: one warning line naming the
file, the entry computed again, and the run's rankings and metrics equal to a clean run's.

The project is tests/integration/cache_project.py's (160 documents, a chroma and an exact system
over the same vectors). Each shard is flipped, truncated, or replaced by the other kind's shard
(docs/embedding.md, "Caches that cannot lie"). The cold run that fills the cache is made once
for the module; each test damages a copy of its cache folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.damage import DAMAGES, damage
from tests.integration.cache_project import outcome, write_project

pytest.importorskip("chromadb")
pytest.importorskip("sentence_transformers")


def _run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--retrieval-gate",
        f"--rg-cache-dir={pytester.path / 'cache'}",
        f"--rg-report={pytester.path / 'report.md'}",
        *extra,
    )


@pytest.fixture(scope="module")
def _cold_once() -> dict[str, Any]:
    return {}


@pytest.fixture
def clean(
    tiny_in_process: Path,
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    _cold_once: dict[str, Any],
) -> dict[str, Any]:
    """The project written here and the cache folder of a cold run of it: the rankings and
    metrics of that run. The run is made once for the module (by the first test to ask, in its
    folder); every test gets a copy of what it left in the cache folder."""
    write_project(pytester.path, tiny_in_process)
    if not _cold_once:
        _run(pytester).assert_outcomes(passed=2)
        kept = tmp_path_factory.mktemp("cold") / "cache"
        shutil.move(pytester.path / "cache", kept)
        _cold_once.update(cache=kept, outcome=outcome(pytester.path / "report.md"))
    shutil.copytree(_cold_once["cache"], pytester.path / "cache")
    result: dict[str, Any] = _cold_once["outcome"]
    return result


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("kind", ["documents", "queries"])
def test_a_damaged_vector_shard_is_one_line_and_the_run_equals_a_clean_one(
    pytester: pytest.Pytester, clean: dict[str, Any], kind: str, how: str
) -> None:
    (documents,) = (pytester.path / "cache" / "embeddings").glob("*/shard-*.npz")
    (queries,) = (pytester.path / "cache" / "embeddings").glob("*/queries/*/shard-*.npz")
    shard, other = (documents, queries) if kind == "documents" else (queries, documents)
    damage(shard, how, foreign=other)
    # As a user's run shows it (this test session makes warnings errors).
    result = _run(pytester, "-W", "default::UserWarning")
    result.assert_outcomes(passed=2, warnings=1)
    lines = [line for line in result.outlines if f"embedding cache shard {shard} " in line]
    assert len(lines) == 1 and lines[0].endswith("its entries will be re-embedded"), lines
    assert outcome(pytester.path / "report.md") == clean


@pytest.mark.parametrize(
    ("part", "how"),
    [
        *(("data_level0.bin", how) for how in DAMAGES),
        # chroma's own pickle of the graph's ids, torn: a rebuild that loaded the graph again
        # (to count what the collection holds) failed the run ("Error deserializing pickle
        # file"), so the rebuild starts from a graph folder removed whole. Only a new process
        # shows it: one that loaded the graph before keeps it in memory.
        ("index_metadata.pickle", "truncated"),
    ],
)
def test_a_damaged_chroma_graph_is_one_line_and_the_run_equals_a_clean_one(
    pytester: pytest.Pytester, clean: dict[str, Any], part: str, how: str
) -> None:
    # The warm run would answer from the result cache without opening chroma: the build id it
    # keys them by is vouched for by the graph's digests, so a damaged graph's results go too.
    store = pytester.path / "cache" / "chroma"
    (graph,) = store.glob(f"*/{part}")
    other = pytester.path / "other.bin"
    other.write_bytes(bytes(reversed(graph.read_bytes())))  # another graph of the same size
    damage(graph, how, foreign=other)
    result = _run(pytester, "-W", "default::UserWarning")
    result.assert_outcomes(passed=2, warnings=1)
    lines = [line for line in result.outlines if f"chroma collection {graph} was not used" in line]
    assert len(lines) == 1 and lines[0].endswith("; building it again"), result.outlines
    assert outcome(pytester.path / "report.md") == clean
    assert not list(store.glob(".discarded-*"))  # the damaged graph's folder is gone whole
    # Built again and recorded: the next run is clean and answers from the cache again.
    _run(pytester, "-W", "error::retrieval_gate.errors.CacheWarning").assert_outcomes(passed=2)
    assert outcome(pytester.path / "report.md") == clean
