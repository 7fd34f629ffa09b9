"""Same inputs, same verdict: an unchanged project reproduces its baseline however it is run.

A realistic corpus (240 HPO terms, 40 synonym queries: tests/integration/hpo_project.py) on an
embedded chroma index with a deliberately coarse graph (few links, a short candidate list), so
that two different graphs of the same vectors are certain to rank differently. The baseline is
saved under ``-n 2`` (an xdist worker builds the collection); then serial reruns (the first
answered from the result cache, one reopening the stored collection in a new process) and one
after the cache folder is deleted (built again) must give the same rankings and every metric,
and pass every regression item at tolerance 0. Before builds were reproducible, the rebuild and
every reopening of the store ranked differently (docs/embedding.md, "Reproducible chroma
builds").

What runs where, and why no more: the reopening is a process of its own (pytester's subprocess),
a user's next CI job loading the graph another process stored. The rebuild runs in the test's
process (in-process pytester, about 1.5 s of CPU less than a process of its own): it is not the
process that built the baseline (an xdist worker did), and it has opened no store of the
project (the serial reruns before it were answered from the result cache), so it builds from
nothing in a process other than the first builder, as a new one would, and the test checks that
the store is on disk again. No later run under ``-n 2`` follows the rebuild (one did, about 3 s
of CPU for its two workers): its worker would answer from the result cache, as the first serial
rerun does (results one process wrote, read by another), and the baseline's own run is the run
under xdist that the serial ones must equal; regression items decided in a worker against a
baseline are tests/integration/test_tolerance_rule.py's "six systems under xdist".

The same for the ANN indexes of the gate's own tables (300 terms): LanceDB IVF_PQ and IVF_FLAT,
whose tables live in the cache folder, so that deleting it builds them again (before the gate
trained their centroids and codebook itself, that build ranked differently); pgvector HNSW and
IVFFlat, whose table lives on the server and is searched as stored (a build after the table is
dropped is not reproducible: PostgreSQL's random generator places the HNSW levels and the
IVFFlat k-means start, measured by benchmarks/bench_rebuilds.py; docs/embedding.md,
"Reproducible ANN builds"). After the tables are dropped, the rebuilt indexes may rank otherwise;
the unchanged systems are decided on exact search over the same vectors and still pass at
tolerance 0, each item stating the index's noise (docs/verdicts.md, "Index noise")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.hpo_project import write_project

#: A coarse graph (its recall well below 1) and no second build for the stability figures.
COARSE_CHROMA = """
index = "chroma"
hnsw_ef_search = 4
hnsw_max_neighbors = 4
hnsw_ef_construction = 8
index_stability = "off"
"""
TOLERANCE_0 = 'tolerance = { "nDCG@10" = 0, "P@1" = 0, "R@3" = 0, "MRR@10" = 0 }'


def _runs(pytester: pytest.Pytester) -> dict[str, Any]:
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    return {
        f"{run['suite']} x {run['system']}": {
            "rankings": {q["id"]: q["ranking"] for q in run["queries"]},
            "metrics": run["metrics"],
            "index_recall": run["stats"].get("index_recall"),
        }
        for run in data["runs"]
    }


def test_a_chroma_baseline_saved_under_xdist_is_reproduced_by_every_later_run(
    pytester: pytest.Pytester,
) -> None:
    """About 8 s of CPU: reproducibility across processes needs processes (the -n 2 run's
    workers, then a reopening in a process of its own, each importing chromadb), and the
    coarse graph needs a corpus large enough that two different graphs rank differently."""
    pytest.importorskip("chromadb")
    pytest.importorskip("model2vec")
    pytest.importorskip("xdist")
    write_project(
        pytester.path, documents=240, queries=40, system=COARSE_CHROMA, settings=TOLERANCE_0
    )
    cache = pytester.path / ".retrieval-gate-cache"

    def run(*args: str, process: bool = False) -> dict[str, Any]:
        # A run that opens or builds the store does so in a process of its own, as a user's
        # run would (an xdist worker is one); one answered from the result cache, and xdist's
        # controller, in this process.
        if process:
            result = pytester.runpytest_subprocess("--retrieval-gate", *args, timeout=600)
        else:
            result = pytester.runpytest("--retrieval-gate", *args)
        result.assert_outcomes(passed=1 if "--rg-save-baseline" in args else 5)
        return _runs(pytester)

    baseline = run("-n", "2", "--rg-save-baseline")
    (only,) = baseline.values()
    assert len(only["rankings"]) == 40
    assert only["index_recall"] < 1.0  # the graph is approximate: which graph matters
    # Serial reruns: answered from the result cache the baseline's worker wrote; with it gone,
    # the stored graph reopened in a new process; then from the results that run wrote.
    assert run() == baseline
    shutil.rmtree(cache / "index-results")
    assert run(process=True) == baseline
    assert run() == baseline
    shutil.rmtree(cache)  # built again from nothing, in this process (not the builder)
    assert run() == baseline
    assert (cache / "chroma" / "chroma.sqlite3").is_file()


# -- ANN indexes on the gate's own table -----------------------------------------------------

#: Deliberately coarse (few links, a short candidate list, one list or partition probed), so
#: that two different builds of the same vectors are certain to rank differently.
COARSE_PGVECTOR = """
index = "pgvector"
dsn_env = "RG_TEST_DSN"
ann_index = "hnsw"
hnsw_max_neighbors = 4
hnsw_ef_construction = 8
hnsw_ef_search = 4
index_stability = "off"
"""
COARSE_PGVECTOR_IVFFLAT = """
index = "pgvector"
dsn_env = "RG_TEST_DSN"
ann_index = "ivfflat"
ivfflat_lists = 16
ivfflat_probes = 1
index_stability = "off"
"""
COARSE_LANCEDB_PQ = """
index = "lancedb"
ann_index = "ivf_pq"
num_partitions = 16
nprobes = 1
index_stability = "off"
"""
COARSE_LANCEDB_FLAT = """
index = "lancedb"
ann_index = "ivf_flat"
num_partitions = 16
nprobes = 1
index_stability = "off"
"""


def _second_system(pytester: pytest.Pytester, name: str, keys: str) -> str:
    """TOML for one more system of the HPO project, on its static model."""
    model = pytester.path / "static-model"
    return (
        f'\n[tool.retrieval_gate.system.{name}]\nembedder = "model2vec"\nmodel = "{model}"\n{keys}'
    )


def _reproduced(pytester: pytest.Pytester, first: str, second: tuple[str, str]) -> dict[str, Any]:
    """A baseline of two systems saved under ``-n 2``, then serial reruns (the first from the
    result cache, the second reopening the stored table in a new process) and one after the
    cache folder is deleted: each must give the baseline's rankings and every metric, and pass
    every item at tolerance 0. The baseline's runs. (The reopening is the one process of its
    own; the other runs, the rebuild included, and xdist's controller run in the test's
    process: the module's docstring says why that proves as much.)"""
    write_project(
        pytester.path,
        documents=300,
        queries=40,
        system=first + _second_system(pytester, *second),
        settings=TOLERANCE_0,
    )
    cache = pytester.path / ".retrieval-gate-cache"

    def run(*args: str, process: bool = False) -> dict[str, Any]:
        if process:
            result = pytester.runpytest_subprocess("--retrieval-gate", *args, timeout=600)
        else:
            result = pytester.runpytest("--retrieval-gate", *args)
        outcomes = result.parseoutcomes()
        assert outcomes.get("failed", 0) == outcomes.get("error", 0) == 0, result.outlines[-30:]
        return _runs(pytester)

    baseline = run("-n", "2", "--rg-save-baseline")
    assert len(baseline) == 2
    for only in baseline.values():
        assert len(only["rankings"]) == 40
        assert only["index_recall"] < 1.0  # approximate: which build is searched matters
    assert run() == baseline
    shutil.rmtree(cache / "index-results")
    assert run(process=True) == baseline
    shutil.rmtree(cache)  # LanceDB's tables live in it: built again from nothing, here
    assert run() == baseline
    return baseline


def test_a_lancedb_ann_baseline_is_reproduced_by_every_later_run_and_a_rebuild(
    pytester: pytest.Pytester,
) -> None:
    """About 10 s of CPU: as the chroma test (processes import lancedb, about 1.3 s each), with
    two ANN indexes trained in each build."""
    pytest.importorskip("lancedb")
    pytest.importorskip("lance", reason="pylance trains the gate's LanceDB index")
    pytest.importorskip("model2vec")
    pytest.importorskip("xdist")
    _reproduced(pytester, COARSE_LANCEDB_PQ, ("lance-ivf-flat", COARSE_LANCEDB_FLAT))
    # The rebuild (in this process) wrote both tables' build records anew.
    rebuilt = (pytester.path / ".retrieval-gate-cache" / "lancedb").glob(".retrieval-gate-build-*")
    assert len(list(rebuilt)) == 2


def test_a_pgvector_ann_baseline_is_reproduced_by_every_later_run(
    pytester: pytest.Pytester,
    postgres: tuple[str, Path | None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """About 7 s of CPU: as the chroma test, against the session's PostgreSQL (which builds
    the indexes in its own server processes)."""
    pytest.importorskip("model2vec")
    pytest.importorskip("xdist")
    monkeypatch.setenv("RG_TEST_DSN", postgres[0])
    import psycopg

    def tables() -> set[str]:
        with psycopg.connect(postgres[0], autocommit=True) as conn:
            rows = conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'rg_%'")
            return {row[0] for row in rows}

    before = tables()
    baseline = _reproduced(pytester, COARSE_PGVECTOR, ("pg-ivfflat", COARSE_PGVECTOR_IVFFLAT))
    # A build after DROP TABLE cannot be reproduced (PostgreSQL's unseedable generator): the
    # systems are declared not reproducible, so each unchanged system is decided on exact search
    # over the same vectors and passes at tolerance 0, its items stating the index's noise.
    with psycopg.connect(postgres[0], autocommit=True) as conn:
        for table in sorted(tables() - before):
            conn.execute(f'DROP TABLE "{table}"')
    shutil.rmtree(pytester.path / ".retrieval-gate-cache")
    # In this process: the server builds the tables again, whichever process asks.
    result = pytester.runpytest("--retrieval-gate")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == outcomes.get("error", 0) == 0, result.outlines[-30:]
    assert tables() - before  # built again
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    regressions = [g for g in report["gates"] if "::regression::" in g["nodeid"]]
    assert regressions and all(g["passed"] for g in regressions)
    assert all("index_noise" in g for g in regressions)
    rebuilt = _runs(pytester)
    assert rebuilt.keys() == baseline.keys()
