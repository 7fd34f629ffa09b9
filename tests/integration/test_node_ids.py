"""Every item's node id works as pytest's own do, serially and under xdist: ``--lf`` reruns
exactly the items that failed, and each failed item's id, given on the command line, runs that
item alone (under xdist the ids are given together, and run exactly those items). A category's or
difficulty's items sit below ``category:<label>`` (not ``category[<label>]``, which pytest read as
parameters: docs/suite-format.md, "Node ids on the command line")."""

from __future__ import annotations

import pytest

from .conftest import SETTINGS, SUITE, item_verdicts, write_suite

WORKERS = [(), ("-n", "2", "-p", "no:benchmark")]
WORKER_IDS = ["serial", "xdist"]

# The reversed retriever ranks every query's relevant documents below the others: its category
# floor and its expect item fail (its other floors too); the keyword retriever passes.
FAILING = {
    "lineage.retrieval.yaml::reverse::category:joins::MRR@3",
    "lineage.retrieval.yaml::reverse::query[customer_names]",
}


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_lf_and_node_ids_rerun_exactly_the_failed_items(
    project: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    """Serially each failed item's id is a session of its own. Under xdist, where a session
    starts two worker processes (about 1.4 s of CPU each), the ids are given together in one:
    what xdist changes is that the workers collect and select from the ids the controller
    passes on; each id still must be found (no 'not found'), and together they must run
    exactly the failed items, each once, so none selects another's item or more than its own.
    Three sessions under xdist, about 5 s of CPU."""
    if workers:
        pytest.importorskip("xdist")
    # --lf needs pytest's cache, which the shared settings turn off.
    settings = SETTINGS.replace('addopts = "-p no:cacheprovider"\n', "")
    (project.path / "pyproject.toml").write_text(
        settings.replace('systems = ["keyword"]', 'systems = ["keyword", "reverse"]'),
        encoding="utf-8",
    )
    write_suite(project, SUITE)
    first = item_verdicts(project.runpytest("--retrieval-gate", "-v", *workers))
    failed = {nodeid for nodeid, verdict in first.items() if verdict == "FAILED"}
    assert failed >= FAILING
    assert any(verdict == "PASSED" for verdict in first.values())

    rerun = project.runpytest("--retrieval-gate", "-v", "--lf", *workers)
    assert "known failures not in selected tests" not in rerun.stdout.str()
    assert item_verdicts(rerun) == dict.fromkeys(failed, "FAILED")

    if not workers:
        for nodeid in sorted(failed):
            alone = project.runpytest("--retrieval-gate", "-v", nodeid)
            assert "not found" not in alone.stdout.str() + alone.stderr.str()
            assert item_verdicts(alone) == {nodeid: "FAILED"}
        return
    together = project.runpytest("--retrieval-gate", "-v", *sorted(failed), *workers)
    assert "not found" not in together.stdout.str() + together.stderr.str()
    assert item_verdicts(together) == dict.fromkeys(failed, "FAILED")
    assert together.parseoutcomes() == {"failed": len(failed)}
