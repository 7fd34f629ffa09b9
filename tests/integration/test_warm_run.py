"""A warm run (every document and query vector cached, no latency gate) imports no torch and
loads no model; a latency gate brings the model back and times live queries.

A session whose imports are checked runs in a subprocess so ``sys.modules`` is that run's
alone (the project's conftest writes the heavy modules it ended with); the others (cold runs,
timed ones) run in this process, where torch is imported already. The model is the tiny
sentence-transformers BERT of tests/conftest.py (no download), so a cold run is quick yet
imports torch as MiniLM would.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

DOCS = {
    "red.md": "red apple pie",
    "green.md": "green apple wine",
    "blue.md": "blue sky wine",
    "pie.md": "apple pie recipe",
}

SUITE = """
name: fruit
k: [1, 3]
gates:
  Hit@3: 0.5
{extra}queries:
  - id: red
    query: red apple
    relevant: [red.md]
  - id: sky
    query: blue sky
    relevant: [blue.md]
  - id: wine
    query: green wine
    relevant: [green.md]
"""

CONFTEST = """
import json
import sys

HEAVY = ("torch", "sentence_transformers", "transformers", "chromadb")


def pytest_unconfigure(config):
    loaded = sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY))
    (config.rootpath / "modules.json").write_text(json.dumps(loaded))
"""


def _project(pytester: pytest.Pytester, model: Path, index: str, extra: str = "") -> None:
    for name, text in DOCS.items():
        (pytester.path / "corpus").mkdir(exist_ok=True)
        (pytester.path / "corpus" / name).write_text(text + "\n")
    pytester.makefile(
        ".toml",
        pyproject=f"""
        [tool.pytest.ini_options]
        addopts = "-p no:cacheprovider"

        [tool.retrieval_gate]
        corpus = "corpus"
        systems = ["tiny"]

        [tool.retrieval_gate.system.tiny]
        embedder = "sentence-transformers"
        model = "{model.as_posix()}"
        index = "{index}"
        """,
    )
    (pytester.path / "fruit.retrieval.yaml").write_text(
        textwrap.dedent(SUITE).replace("{extra}", extra)
    )
    pytester.makeconftest(CONFTEST)


def _run(pytester: pytest.Pytester, gates: int = 1) -> tuple[list[str], dict[str, Any]]:
    """One gate session in a subprocess: the heavy modules it imported and its one run."""
    result = pytester.runpytest_subprocess(
        "--retrieval-gate", f"--rg-cache-dir={pytester.path / 'cache'}"
    )
    result.assert_outcomes(passed=gates)
    modules = json.loads((pytester.path / "modules.json").read_text())
    return modules, _report_run(pytester)


def _run_here(pytester: pytest.Pytester, gates: int = 1) -> dict[str, Any]:
    """One gate session in this process, for a run whose imports are not the point (a cold
    run, a timed one): torch is imported here already, so it costs no second import."""
    result = pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={pytester.path / 'cache'}")
    result.assert_outcomes(passed=gates)
    return _report_run(pytester)


def _report_run(pytester: pytest.Pytester) -> dict[str, Any]:
    (run,) = json.loads((pytester.path / "retrieval-gate-report.json").read_text())["runs"]
    return dict(run)


def _rankings(run: dict[str, Any]) -> dict[str, Any]:
    return {q["id"]: q["ranking"] for q in run["queries"]}


def test_a_warm_run_without_a_latency_gate_imports_no_torch(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _project(pytester, tiny_model, "exact")
    cold = _run_here(pytester)
    # The cold run embedded 4 documents and 3 queries: the model was loaded.
    assert (cold["stats"]["embedded_documents"], cold["stats"]["embedded_queries"]) == (4, 3)
    assert cold["stats"]["model_loaded"] is True

    warm_modules, warm = _run(pytester)
    assert warm_modules == []
    stats = warm["stats"]
    assert (stats["cached_documents"], stats["cached_queries"]) == (4, 3)
    assert (stats["embedded_documents"], stats["embedded_queries"]) == (0, 0)
    assert (stats["query_vectors"], stats["model_loaded"]) == ("cached", False)
    assert "query vectors: cached, model not loaded" in stats["notes"]
    # No latency gate: nothing is timed, and the report says so instead of showing latency.
    assert (stats["latency_queries"], stats["latency_measured"]) == (0, False)
    # Cached vectors are the ones the cold run embedded, one query per call as it did.
    assert _rankings(warm) == _rankings(cold)
    assert warm["metrics"] == cold["metrics"]
    report = (pytester.path / "retrieval-gate-report.md").read_text()
    assert "query vectors: cached, model not loaded" in report
    assert "latency: not timed" in report
    assert "### Latency" not in report


def test_a_latency_gate_loads_the_model_and_embeds_queries_live(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _project(pytester, tiny_model, "exact")
    cold = _run_here(pytester)
    _project(pytester, tiny_model, "exact", extra="  latency_p95_ms: 60000\n")
    gated = _run_here(pytester, gates=2)
    stats = gated["stats"]
    assert (stats["query_vectors"], stats["model_loaded"]) == ("live", True)
    # Documents and the rankings' query vectors come from the cache; the timed queries (all
    # 3: a suite this small is timed whole) are embedded live.
    assert (stats["cached_documents"], stats["cached_queries"]) == (4, 3)
    assert (stats["embedded_queries"], stats["latency_queries"]) == (3, 3)
    note = "query vectors: 3 from the cache, 3 embedded; the 3 timed queries embedded live"
    assert any(n.startswith(note) for n in stats["notes"])
    assert _rankings(gated) == _rankings(cold)
    assert all(q["latency_ms"] > 0 for q in gated["queries"])
    report = (pytester.path / "retrieval-gate-report.md").read_text()
    assert "latency: timed on every query (3)" in report


def _per_query(run: dict[str, Any]) -> dict[str, Any]:
    return {q["id"]: (q["ranking"], q["metrics"]) for q in run["queries"]}


def _index_figures(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run["stats"].items() if k.startswith(("index_recall", "index_stab"))}


def _shards(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "cache" / "index-results").glob("*/*.json"))


def _cold_chroma(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """A chroma project with the tiny model, run once from an empty cache (in this process:
    what a cold run imports is not what these tests check)."""
    pytest.importorskip("chromadb")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _project(pytester, tiny_model, "chroma")
    return _run_here(pytester)


def test_a_warm_chroma_run_answers_from_the_result_cache_without_opening_chroma(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = _cold_chroma(pytester, tiny_model, monkeypatch)
    assert cold["stats"]["model_loaded"] is True
    assert (cold["stats"]["index_opened"], cold["stats"]["cached_results"]) == (True, 0)
    assert not any("search results" in note for note in cold["stats"]["notes"])
    builds = list((pytester.path / "cache" / "chroma").glob(".retrieval-gate-build-rg-*"))
    # A sealed record of the build id and the graph's files (index/chroma.py, read_build).
    record = json.loads(builds[0].read_text())
    assert len(builds) == 1 and len(record["payload"]["extra"]["build"]) == 32
    assert record["payload"]["files"]
    assert _shards(pytester)

    modules, warm = _run(pytester)
    # Neither the model nor chroma: every search is answered from the cold run's results.
    assert modules == []
    stats = warm["stats"]
    assert (stats["model_loaded"], stats["embedded_documents"]) == (False, 0)
    assert stats["index_opened"] is False
    # The run's 3 queries in one batch (no latency is timed: no warm-up) and 3 for the index
    # recall figure.
    assert stats["cached_results"] == 6
    assert "search results: cached, chroma not opened" in stats["notes"]
    assert _per_query(warm) == _per_query(cold)
    assert warm["metrics"] == cold["metrics"]
    # Index recall and stability read the same figures back without opening chroma.
    assert _index_figures(warm) == _index_figures(cold)
    assert _index_figures(warm)["index_recall_queries"] == 3
    report = (pytester.path / "retrieval-gate-report.md").read_text()
    assert "search results: cached, chroma not opened" in report


def test_a_damaged_result_shard_is_searched_again_and_rewritten(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = _cold_chroma(pytester, tiny_model, monkeypatch)
    shards = _shards(pytester)
    damaged = shards[0]
    before = json.loads(damaged.read_text())
    damaged.write_text('{"format": 1, "build": "')  # cut short mid-write

    modules, warm = _run(pytester)
    # What the damaged shard held is searched again in chroma; the rest still comes cached.
    assert "chromadb" in modules
    assert warm["stats"]["index_opened"] is True
    assert _per_query(warm) == _per_query(cold)
    assert _index_figures(warm) == _index_figures(cold)
    assert json.loads(damaged.read_text()) == before
    assert _shards(pytester) == shards

    # The rewritten shard answers the next run whole: chroma is not opened. In this process,
    # for what it imports is the warm chroma test's claim, not this one's.
    again = _run_here(pytester)
    assert again["stats"]["index_opened"] is False
    assert again["stats"]["cached_results"] == 6
    assert _per_query(again) == _per_query(cold)


def test_a_rebuilt_collection_never_answers_with_the_old_builds_results(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    cold = _cold_chroma(pytester, tiny_model, monkeypatch)
    (old_build,) = (pytester.path / "cache" / "chroma").glob(".retrieval-gate-build-*")
    old_id = json.loads(old_build.read_text())["payload"]["extra"]["build"]
    shutil.rmtree(pytester.path / "cache" / "chroma")

    modules, rebuilt = _run(pytester)
    # No build id without the store: chroma is opened, the collection built again.
    assert "chromadb" in modules
    assert (rebuilt["stats"]["index_opened"], rebuilt["stats"]["cached_results"]) == (True, 0)
    (new_build,) = (pytester.path / "cache" / "chroma").glob(".retrieval-gate-build-*")
    new_id = json.loads(new_build.read_text())["payload"]["extra"]["build"]
    assert new_id != old_id
    shards = _shards(pytester)
    assert shards and all(json.loads(s.read_text())["payload"]["build"] == new_id for s in shards)
    assert _per_query(rebuilt) == _per_query(cold)


def test_a_latency_gate_searches_chroma_for_real(
    pytester: pytest.Pytester, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = _cold_chroma(pytester, tiny_model, monkeypatch)
    _project(pytester, tiny_model, "chroma", extra="  latency_p95_ms: 60000\n")
    gated = _run_here(pytester, gates=2)
    # Latency must time the real search, so the result cache is not used.
    assert (gated["stats"]["index_opened"], gated["stats"]["cached_results"]) == (True, 0)
    assert _rankings(gated) == _rankings(cold)
