"""A project whose baseline and history the release before the ledger wrote (65934fb: files in
tests/data/ledger-65934fb) gates, drifts and records with this one, its files read unchanged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data" / "ledger-65934fb"


def test_a_ledger_0x_wrote_is_read_unchanged_and_grown(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("lineage.retrieval.yaml", "search_app.py", "pyproject.toml"):
        shutil.copy(DATA / name, pytester.path / name)
    shutil.copy(DATA / "retrieval-baseline.json", pytester.path / "retrieval-baseline.json")
    history = pytester.path / ".retrieval-gate" / "history"
    history.mkdir(parents=True)
    shutil.copy(DATA / "history-v1.jsonl", history / "lineage.jsonl")
    old_baseline = (pytester.path / "retrieval-baseline.json").read_bytes()
    pytester.syspathinsert()
    monkeypatch.setenv("STEP", "2")
    monkeypatch.setenv("GITHUB_SHA", "abc" + "4".rjust(37, "0"))
    result = pytester.runpytest("--retrieval-gate", "-v", "--rg-record")
    result.assert_outcomes(passed=12)
    result.stdout.fnmatch_lines(
        [
            "*lineage.retrieval.yaml::keyword::regression::P@1 PASSED*",
            "*lineage.retrieval.yaml::keyword::history-drift::P@1 PASSED*",
            "*recorded 2 runs in the retrieval gate history*",
        ]
    )
    assert "\nhistory: " not in result.stdout.str()  # nothing of the old files unreadable
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text())
    drift = [g for g in report["gates"] if g["scope"] == "history-drift"]
    # The window's anchor is the oldest of the four records 0x wrote, read with its values.
    assert drift and all("shared queries" in g["detail"][1] for g in drift)
    assert (pytester.path / "retrieval-baseline.json").read_bytes() == old_baseline
    lines = (history / "lineage.jsonl").read_bytes().splitlines()
    assert lines[:8] == (DATA / "history-v1.jsonl").read_bytes().splitlines()  # as they were
    assert [json.loads(line)["v"] for line in lines[8:]] == [2, 2]  # then this version's
