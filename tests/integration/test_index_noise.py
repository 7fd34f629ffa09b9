"""Index noise: an unchanged system whose index may rank differently each run passes its
regression items at tolerance 0, and each item states the noise; a real change still fails.

A realistic corpus (300 HPO terms, 60 synonym queries: tests/integration/hpo_project.py) on an
embedded chroma index built with ``build = "batched"`` over a deliberately coarse graph: chromadb
inserts a batch in a hash-map order seeded anew in every process, so each fresh build (the cache
folder deleted, as on a CI cache miss) ranks differently (docs/embedding.md, "Reproducible chroma
builds"). Without the exact-search decision (docs/verdicts.md, "Index noise") these reruns fail
at tolerance 0 on the index's noise alone.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from tests.integration.hpo_project import write_project, write_static_model

#: A coarse graph, built by chromadb's batched inserts: no two processes build the same one.
BATCHED_CHROMA = """
index = "chroma"
build = "batched"
hnsw_ef_search = 4
hnsw_max_neighbors = 4
hnsw_ef_construction = 8
index_stability = "off"
"""
TOLERANCE_0 = 'tolerance = { "nDCG@10" = 0, "P@1" = 0, "R@3" = 0, "MRR@10" = 0 }'
CHECKED = ("nDCG@10", "P@1", "R@3", "MRR@10")


def _report(pytester: pytest.Pytester) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return data


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    # A process per run, with the cache folder gone: the collection is built again from nothing.
    shutil.rmtree(pytester.path / ".retrieval-gate-cache", ignore_errors=True)
    result = pytester.runpytest_subprocess("--retrieval-gate", "-p", "no:randomly", *args)
    return result, _report(pytester)


def test_an_unchanged_system_on_a_noisy_index_passes_at_tolerance_0_and_states_the_noise(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("chromadb")
    pytest.importorskip("model2vec")
    terms = write_project(
        pytester.path, documents=300, queries=60, system=BATCHED_CHROMA, settings=TOLERANCE_0
    )
    saved, baseline = _run(pytester, "--rg-save-baseline")
    saved.assert_outcomes(passed=1)
    (base_run,) = baseline["runs"]
    base_rankings = {q["id"]: q["ranking"] for q in base_run["queries"]}
    # Each query is ranked by exact search over the same vectors too, and the two differ.
    assert all(len(q["exact_ranking"]) == 10 for q in base_run["queries"])
    assert base_run["stats"]["index_noise_queries"] == sum(
        q["ranking"] != q["exact_ranking"] for q in base_run["queries"]
    )
    stored = json.loads((pytester.path / "retrieval-baseline.json").read_text())
    (stored_run,) = stored["runs"].values()
    assert all("exact_metrics" in q for q in stored_run["queries"].values())

    moved = 0  # reruns whose index ranked some query otherwise than the baseline's did
    dropped = 0  # reruns where some checked metric fell under the index's own ranking
    for rerun in range(3):
        junit = pytester.path / f"junit-{rerun}.xml"
        result, report = _run(pytester, f"--junitxml={junit}")
        result.assert_outcomes(passed=1 + len(CHECKED))
        (run,) = report["runs"]
        rankings = {q["id"]: q["ranking"] for q in run["queries"]}
        exact_now = {q["id"]: q["exact_ranking"] for q in run["queries"]}
        # Exact search over the same vectors is the same every run: only the index moved.
        assert exact_now == {q["id"]: q["exact_ranking"] for q in base_run["queries"]}
        moved += rankings != base_rankings
        dropped += any(run["metrics"][m] < base_run["metrics"][m] for m in CHECKED)
        differ = sum(rankings[qid] != exact_now[qid] for qid in rankings)
        before = base_run["stats"]["index_noise_queries"]
        items = {g["metric"]: g for g in report["gates"] if g["scope"] == "regression"}
        assert set(items) == set(CHECKED)
        for metric, item in items.items():
            change = run["metrics"][metric] - base_run["metrics"][metric]
            # The index's part is the whole observed change: exact search did not move.
            assert item["index_part"] == pytest.approx(change, abs=1e-12)
            assert item["decided_drop"] == 0
            assert item["value"] == pytest.approx(run["metrics"][metric])
            assert item["baseline"] == pytest.approx(base_run["metrics"][metric])
            delta = f"{change:+.4f}" if abs(change) >= 5e-5 else "0.0000"
            noise = (
                f"index noise: {differ} of 60 queries ranked differently from exact search "
                f"({before} in the baseline), {metric} {delta} of the change"
            )
            assert item["index_noise"] == noise
            verdict = item["detail"][0]
            assert verdict.startswith(
                f"ok: {metric} under exact search: no compared query changed (tolerance 0)"
            )
            assert verdict.endswith(f"; {noise}")
            # The terminal, the markdown report and the JUnit properties say it too.
            result.stdout.fnmatch_lines(
                [f"  passed hpo.retrieval.yaml::static::regression::{metric}: ok: *; {noise}"]
            )
            assert (
                f"- {metric}: {noise}" in (pytester.path / "retrieval-gate-report.md").read_text()
            )
            props = {
                p.get("name"): p.get("value")
                for case in ET.parse(junit).iter("testcase")
                if case.get("name") == metric
                for p in case.iter("property")
            }
            assert props["index_noise"] == noise
    # The index really is noisy: without the exact-search decision these reruns fail.
    assert moved >= 2
    assert dropped >= 1

    # A real change (a much coarser model: 4 dimensions): no allowance, the items fail.
    small = write_static_model(
        pytester.path / "small-model", [t.text for t in terms] + [t.synonym for t in terms], dim=4
    )
    settings = pytester.path / "pyproject.toml"
    text = settings.read_text()
    settings.write_text(text.replace(str(pytester.path / "static-model"), str(small)))
    result, report = _run(pytester)
    failed = [g for g in report["gates"] if g["scope"] == "regression" and not g["passed"]]
    assert failed
    assert all("index_noise" not in g for g in report["gates"])
    result.stdout.fnmatch_lines(["*changed since the baseline: model_identity*"])
