"""What a baseline saved in a pull request records as accepted against its target branch
(baseline/head.py ``accepted``): written at the top of the file, read back checked, and every
hand edit that could silence the slow-drift check refused in one line naming the change."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.baseline.entry import use_metric_bounds
from retrieval_gate.baseline.head import (
    Accepted,
    AcceptedChange,
    BaselineError,
    load_baseline,
    save_baseline,
)
from retrieval_gate.metrics.registry import bounds_by_name, format_bounds

from .test_baseline import query, record

COMMIT = "a1b2c3d" + "0" * 33


@pytest.fixture(autouse=True)
def _bounds() -> None:
    use_metric_bounds(bounds_by_name, format_bounds)  # as the plugin does when the gate is on


def _accepted(**change: Any) -> Accepted:
    fields = {"before": 1.0, "after": 0.5, "n": 2, "history_at": COMMIT, **change}
    return Accepted("origin/main", COMMIT, (AcceptedChange("s", "sys", "P@1", **fields),))


def _saved(path: Path, accepted: Accepted | None) -> dict[str, Any]:
    run = record([query("q1", metrics={"P@1": 1.0}), query("q2", metrics={"P@1": 0.0})])
    save_baseline(path, [dataclasses.replace(run, metrics={"P@1": 0.5})], None, accepted=accepted)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_an_acceptance_is_written_at_the_top_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    data = _saved(path, _accepted())
    assert list(data) == ["version", "generator", "accepted", "runs"]
    assert data["accepted"] == {
        "base": "origin/main",
        "commit": COMMIT,
        "changes": [
            {
                "suite": "s",
                "system": "sys",
                "metric": "P@1",
                "from": 1.0,
                "to": 0.5,
                "n": 2,
                "history_at": COMMIT,
            }
        ],
    }
    loaded = load_baseline(path)
    assert loaded is not None and loaded.accepted == _accepted()
    assert loaded.accepted.change("s", "sys", "P@1") == _accepted().changes[0]
    assert loaded.accepted.change("s", "sys", "R@1") is None
    # Saved again (on main after the merge, no target branch): no acceptance is carried over,
    # whatever the previous file held; an empty one is not written.
    save_baseline(path, list(loaded.runs.values()), loaded)
    assert "accepted" not in json.loads(path.read_text())
    save_baseline(
        path, list(loaded.runs.values()), loaded, accepted=Accepted("origin/main", None, ())
    )
    assert "accepted" not in json.loads(path.read_text())


#: Hand edits of ``accepted`` and the line each is refused with (after "corrupt baseline: ").
HOSTILE = [
    pytest.param(lambda a: [], "'accepted' must be an object with a list 'changes'", id="a-list"),
    pytest.param(
        lambda a: {**a, "changes": "P@1"},
        "'accepted' must be an object with a list 'changes'",
        id="changes-a-string",
    ),
    pytest.param(
        lambda a: {**a, "base": 7},
        "'accepted' base must be a name of 1 to 256 characters",
        id="base-a-number",
    ),
    pytest.param(
        lambda a: {**a, "base": "x" * 300},
        "'accepted' base must be a name of 1 to 256 characters",
        id="base-too-long",
    ),
    pytest.param(
        lambda a: {**a, "commit": "--output=x"},
        "'accepted' commit must be a commit id or null",
        id="commit-an-option",
    ),
    pytest.param(
        lambda a: {**a, "changes": [7]}, "'accepted' change is not an object", id="change-a-number"
    ),
    pytest.param(
        lambda a: _change(a, system="other"),
        "'accepted' names s x other, which has no run here",
        id="no-such-run",
    ),
    pytest.param(
        lambda a: _change(a, metric="nDCG@10"),
        "'accepted' names nDCG@10, which the run of s::sys lacks",
        id="no-such-metric",
    ),
    pytest.param(
        lambda a: _change(a, to="0.5"),
        "'accepted' 'from' and 'to' must be numbers",
        id="to-a-string",
    ),
    pytest.param(
        lambda a: _change(a, to=True),
        "'accepted' 'from' and 'to' must be numbers",
        id="to-a-boolean",
    ),
    pytest.param(
        lambda a: _change(a, **{"from": 5.0}),
        "P@1 of suite 's', system 'sys' is 5.0, outside its bounds [0, 1]",
        id="from-out-of-bounds",
    ),
    pytest.param(
        lambda a: _change(a, to=float("nan")),
        "P@1 is nan; metric values must be finite",
        id="to-nan",
    ),
    pytest.param(
        lambda a: _change(a, to=0.1),
        "'accepted' says P@1 of s::sys is 0.1 over all 2 of its queries, but the run holds 0.5",
        id="a-drop-the-run-does-not-hold",
    ),
    pytest.param(
        lambda a: _change(a, n=0),
        "'accepted' n must be a whole number from 1 to 1,000,000,000",
        id="n-zero",
    ),
    pytest.param(
        lambda a: _change(a, n=10**400),
        "'accepted' n must be a whole number from 1 to 1,000,000,000",
        id="n-of-400-digits",
    ),
    pytest.param(
        lambda a: _change(a, n=2.0),
        "'accepted' n must be a whole number from 1 to 1,000,000,000",
        id="n-a-float",
    ),
    pytest.param(
        lambda a: _change(a, history_at="../x"),
        "'accepted' history_at must be a commit id or null",
        id="history-at-a-path",
    ),
    pytest.param(
        lambda a: {**a, "changes": a["changes"] * 100_001},
        "'accepted' holds more than 100,000 changes",
        id="too-many-changes",
    ),
]


def _change(accepted: dict[str, Any], **fields: Any) -> dict[str, Any]:
    (change,) = accepted["changes"]
    return {**accepted, "changes": [{**change, **fields}]}


@pytest.mark.parametrize(("edit", "message"), HOSTILE)
def test_a_hand_edited_acceptance_is_refused_in_one_line(
    tmp_path: Path, edit: Any, message: str
) -> None:
    path = tmp_path / "b.json"
    data = _saved(path, _accepted())
    data["accepted"] = edit(copy.deepcopy(data["accepted"]))
    path.write_text(json.dumps(data))
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    said = info.value.format()
    assert "\n" not in said and len(said) < 600
    assert said.startswith(f"{path} [") and "corrupt baseline" in said
    assert f"]: corrupt baseline: {message}; restore it from version control " in said, said
