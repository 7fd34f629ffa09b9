"""Plain ``-n 2``: each suite x system runs on one worker, once, so xdist never repeats a
retrieval (xdist's own default, ``--dist load``, deals items out one by one, and every worker
that got an item of a run would run it again). Node ids stay as without xdist."""

from __future__ import annotations

import json
import os
from collections import defaultdict

import pytest

from retrieval_gate.collect import dist_given, run_scope

pytest.importorskip("xdist")

SETTINGS = """
[tool.pytest.ini_options]
addopts = "-p no:cacheprovider"

[tool.retrieval_gate.system.one]
retriever = "logged_app:one"

[tool.retrieval_gate.system.two]
retriever = "logged_app:two"
"""

# Every call says which system and process answered which query.
APP = """
import os
import pathlib

LOG = pathlib.Path(__file__).parent / "calls.log"


def _answer(system, query, k):
    with LOG.open("a") as log:
        threads = os.environ.get("OMP_NUM_THREADS", "-")
        log.write(f"{system} {os.getpid()} {query} {threads}\\n")
    return [(query, 1.0), ("other", 0.5)][:k]


def one(query, k):
    return _answer("one", query, k)


def two(query, k):
    return _answer("two", query, k)
"""


def suite(name: str) -> str:
    gates = "gates: {P@1: 0.5, R@1: 0.5, MRR@1: 0.5, Hit@1: 0.5, nDCG@1: 0.5}\n"
    queries = "".join(
        f"  - {{id: {name}{i}, query: {name}{i}, relevant: [{name}{i}]}}\n" for i in range(3)
    )
    return f"name: {name}\nk: [1]\n{gates}queries:\n{queries}"


def test_each_run_stays_on_one_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(logged_app=APP)
    pytester.syspathinsert()
    for name in ("alpha", "beta"):
        (pytester.path / f"{name}.retrieval.yaml").write_text(suite(name))
    result = pytester.runpytest("--retrieval-gate", "-n", "2", "-p", "no:benchmark")
    result.assert_outcomes(passed=20)
    pids: dict[tuple[str, str], set[str]] = defaultdict(set)
    calls: dict[tuple[str, str], int] = defaultdict(int)
    threads = set()
    for line in (pytester.path / "calls.log").read_text().splitlines():
        system, pid, query, omp = line.split()
        threads.add(omp)
        key = (system, query.rstrip("0123456789"))
        pids[key].add(pid)
        calls[key] += 1
    assert set(pids) == {(s, q) for s in ("one", "two") for q in ("alpha", "beta")}
    # One process per suite x system; each run once: a warm-up query and its three queries.
    assert all(len(found) == 1 for found in pids.values()), dict(pids)
    assert all(n == 4 for n in calls.values()), dict(calls)
    # Each worker's numeric thread pools get its share of the cores, not all of them.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert threads == {str(max(1, (cores or 1) // 2))}
    data = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    assert "alpha.retrieval.yaml::one::suite::P@1" in {g["nodeid"] for g in data["gates"]}


def test_the_unit_of_work_is_the_suite_file_and_system() -> None:
    assert run_scope("a/s.retrieval.yaml::minilm::category:x::P@5") == "a/s.retrieval.yaml::minilm"
    assert run_scope("a/s.retrieval.yaml::minilm::latency_p95_ms") == "a/s.retrieval.yaml::minilm"
    # Any other test is its own unit, as under --dist load.
    assert run_scope("tests/test_x.py::test_y") == "tests/test_x.py::test_y"
    assert run_scope("tests/test_x.py::TestZ::test_y") == "tests/test_x.py::TestZ::test_y"


def test_a_distribution_the_user_chose_is_kept() -> None:
    assert dist_given(["-n", "2", "--dist", "load"])
    assert dist_given(["--dist=loadfile"])
    assert dist_given(["-d"])
    assert not dist_given(["-n", "2", "--retrieval-gate"])


def test_threads_the_user_sized_are_left_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    pytester.makefile(".toml", pyproject=SETTINGS)
    pytester.makepyfile(logged_app=APP)
    pytester.syspathinsert()
    (pytester.path / "alpha.retrieval.yaml").write_text(suite("alpha"))
    pytester.runpytest("--retrieval-gate", "-n", "2", "-p", "no:benchmark")
    lines = (pytester.path / "calls.log").read_text().splitlines()
    assert {line.split()[3] for line in lines} == {"3"}
