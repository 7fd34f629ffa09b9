"""Index noise (docs/verdicts.md): a regression item of a system whose identity is unchanged and
whose index may rank differently each run is decided on exact search over the same vectors, and
states the index's part; a changed identity, or a side without exact-search values, gets none."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from retrieval_gate.baseline.align import align
from retrieval_gate.baseline.head import load_baseline, save_baseline
from retrieval_gate.errors import RetrievalGateError
from retrieval_gate.gates.compared import RegressionCheck
from retrieval_gate.gates.regressions import check_regressions
from retrieval_gate.gates.rule import headline
from retrieval_gate.index import INDEXES
from retrieval_gate.records import QueryRecord, RunRecord
from tests.baseline.test_baseline import base_of, figures, query, record


def noisy(qid: str, *, index: float, exact: float) -> QueryRecord:
    """A query whose index found P@1 ``index`` and exact search ``exact`` (a different ranking
    when they differ)."""
    found = query(qid, metrics={"P@1": index}, ranking=[f"{qid}-doc" if index else "other"])
    return dataclasses.replace(
        found,
        exact_metrics={"P@1": exact},
        exact_ranking=(f"{qid}-doc",) if exact else ("other",),
    )


def _decide(now: RunRecord, then: RunRecord, tolerance: float, **kw: Any) -> Any:
    base = base_of(then)
    alignment = align(now, base)
    [out] = check_regressions(
        now,
        base,
        alignment.shared,
        [RegressionCheck("suite", "P@1", tolerance)],
        alpha=0.05,
        steady=kw.get("steady", alignment.steady),
    )
    return out


def test_the_index_alone_moving_passes_at_tolerance_0_and_says_so() -> None:
    # Ten queries, exact search finds every one at rank 1 in both runs; today the index missed
    # three (P@1 1 -> 0). Observed P@1 1 -> 0.7: a drop of 0.3, all of it the index's
    # (change -0.3 - exact change 0 = -0.3); exact search dropped 0: the item passes at 0.
    then = record([noisy(f"q{i}", index=1.0, exact=1.0) for i in range(10)])
    now = record(
        [noisy(f"q{i}", index=0.0, exact=1.0) for i in range(3)]
        + [noisy(f"q{i}", index=1.0, exact=1.0) for i in range(3, 10)]
    )
    out = _decide(now, then, 0.0)
    assert out.passed
    noise = (
        "index noise: 3 of 10 queries ranked differently from exact search (0 in the "
        "baseline), P@1 -0.3000 of the change"
    )
    assert out.detail[0].startswith("ok: P@1 under exact search: no compared query changed")
    assert out.detail[0].endswith(f"; {noise}")
    assert out.detail[1].startswith("exact search: baseline 1 -> now 1 (drop 0, tolerance 0)")
    assert out.detail[2].startswith(f"{noise}: the system's identity is unchanged")
    assert "under the index's own ranking P@1 went 1 -> 0.7" in out.detail[2]
    # The item shows the system's values as searched, and the figures of the decision.
    assert (out.value, figures(out).baseline) == (pytest.approx(0.7), 1.0)
    assert figures(out).index_part == pytest.approx(-0.3)
    assert figures(out).decided_drop == 0.0
    assert headline(out).endswith(f"n=10); {noise}")
    assert ("index_noise", noise) in out.properties()
    # Without the exact-search decision the same runs fail: 0.3 > 0.
    plain = _decide(now, then, 0.0, steady=False)
    assert not plain.passed
    assert figures(plain).index_noise is None
    assert plain.detail[0].startswith("regressed: P@1 dropped 0.3 > tolerance 0")


def test_a_drop_under_exact_search_still_fails_and_the_index_part_is_stated_apart() -> None:
    # Exact search itself lost two queries (P@1 1 -> 0.8, a drop of 0.2 > 0.1: fails); the index
    # lost those two and one more (observed 1 -> 0.7): the index's part is -0.3 - (-0.2) = -0.1.
    then = record([noisy(f"q{i}", index=1.0, exact=1.0) for i in range(10)])
    now = record(
        [noisy(f"q{i}", index=0.0, exact=0.0) for i in range(2)]
        + [noisy("q2", index=0.0, exact=1.0)]
        + [noisy(f"q{i}", index=1.0, exact=1.0) for i in range(3, 10)]
    )
    out = _decide(now, then, 0.1)
    assert not out.passed
    assert out.detail[0].startswith("regressed: P@1 under exact search dropped 0.2 > tolerance 0.1")
    # Two queries rank as exact search does (both missed), so one ranked differently.
    assert out.detail[0].endswith(
        "; index noise: 1 of 10 queries ranked differently from exact search (0 in the "
        "baseline), P@1 -0.1000 of the change"
    )
    assert figures(out).index_part == pytest.approx(-0.1)
    assert figures(out).decided_drop == pytest.approx(0.2)
    # The worse queries named are exact search's: q0 and q1, not q2.
    assert [qid for qid, _ in out.worst] == ["q0", "q1"]


def test_a_changed_identity_or_a_side_without_exact_search_gets_no_allowance() -> None:
    then = record([noisy(f"q{i}", index=1.0, exact=1.0) for i in range(10)])
    today = [noisy("q0", index=0.0, exact=1.0)] + [
        noisy(f"q{i}", index=1.0, exact=1.0) for i in range(1, 10)
    ]
    changed: tuple[tuple[str, Any], ...] = (
        ("model_identity", "other-model"),
        ("system", {"retriever": "app:other"}),
        ("corpus_digest", "changed"),
        ("suite_digest", "changed"),
    )
    for key, value in changed:
        fingerprint: dict[str, Any] = {key: value}
        now = record(today, **fingerprint)
        assert not align(now, base_of(then)).steady
        out = _decide(now, then, 0.0)
        assert not out.passed and figures(out).index_noise is None, key
    # A baseline saved before exact search was kept (or by a reproducible index): none either.
    plain = record([query(f"q{i}") for i in range(10)])
    out = _decide(record(today), plain, 0.0)
    assert align(record(today), base_of(plain)).steady
    assert not out.passed and figures(out).index_noise is None


def test_exact_search_values_survive_the_baseline_file_and_the_report_json(
    tmp_path: Path,
) -> None:
    then = record([noisy("q0", index=0.0, exact=1.0), noisy("q1", index=1.0, exact=1.0)])
    back = base_of(then).query("q0")
    assert (back.exact_metrics, back.exact_ranking) == ({"P@1": 1.0}, ("q0-doc",))
    assert back.differs_from_exact
    assert not base_of(then).query("q1").differs_from_exact
    again = RunRecord.from_json(json.loads(json.dumps(then.to_json())))
    assert again.queries == then.queries
    # A query of a reproducible index keeps the JSON it had.
    assert "exact_metrics" not in query("q2").to_json()
    assert base_of(record([query("q2")])).query("q2").exact_ranking is None


@pytest.mark.parametrize(
    ("exact", "message"),
    [
        ("not an object", "'exact_metrics' must be an object and 'exact_ranking' a list"),
        ({"P@1": 5.0}, "P@1 of suite 's', system 'sys' is 5.0, outside its bounds"),
        ({"P@1": "x"}, "query metric values must be numbers"),
    ],
)
def test_a_corrupt_exact_search_value_in_a_baseline_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exact: Any, message: str
) -> None:
    from retrieval_gate.baseline import entry
    from retrieval_gate.metrics.registry import bounds_by_name, format_bounds

    # As the plugin sets it when the gate is on (plugin.py).
    monkeypatch.setattr(entry, "_bounds", (bounds_by_name, format_bounds))
    path = tmp_path / "b.json"
    save_baseline(path, [record([noisy("q0", index=1.0, exact=1.0)])], None)
    data = json.loads(path.read_text())
    data["runs"]["s::sys"]["queries"]["q0"]["exact_metrics"] = exact
    path.write_text(json.dumps(data))
    with pytest.raises(RetrievalGateError, match="corrupt baseline") as caught:
        load_baseline(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_each_index_declares_whether_it_ranks_the_same_every_run() -> None:
    assert INDEXES["exact"].reproducible_for({})
    assert INDEXES["chroma"].reproducible_for({"build": "reproducible"})
    assert not INDEXES["chroma"].reproducible_for({"build": "batched"})
    assert not INDEXES["chroma-server"].reproducible_for({})
    for name in ("pgvector", "lancedb"):
        backend = INDEXES[name]
        ann = "hnsw" if name == "pgvector" else "ivf_flat"
        assert backend.reproducible_for({"ann_index": "none", "table": "docs"})
        assert not backend.reproducible_for({"ann_index": ann, "table": "docs"})  # a team's
    # The gate's own ANN table: LanceDB's IVF indexes are trained by the gate, seeded, so a
    # rebuild ranks the same; its HNSW and the hosted service's training are not, nor is any
    # pgvector ANN build (PostgreSQL's unseedable generator), docs/embedding.md.
    lancedb, pgvector = INDEXES["lancedb"], INDEXES["pgvector"]
    assert lancedb.reproducible_for({"ann_index": "ivf_pq", "table": None})
    assert lancedb.reproducible_for({"ann_index": "ivf_flat", "table": None})
    assert not lancedb.reproducible_for({"ann_index": "ivf_hnsw_sq", "table": None})
    assert not lancedb.reproducible_for({"ann_index": "ivf_pq", "table": None, "uri": "db://x"})
    assert not pgvector.reproducible_for({"ann_index": "hnsw", "table": None})
    assert not pgvector.reproducible_for({"ann_index": "ivfflat", "table": None})


# -- slow drift against the history's anchor ----------------------------------------------------


def _anchor(run: RunRecord) -> Any:
    from retrieval_gate.baseline.entry import Entry
    from retrieval_gate.baseline.provenance import Provenance
    from retrieval_gate.gates.anchor import Anchor

    at = Provenance(commit="a" * 40, time="2026-11-01T00:00:00+00:00")
    record = Entry.of_run(
        run, at=at, source="baseline", decided=False, session="s", tolerance={"P@1": 0.0}
    )
    # As the history file keeps it, read back.
    return Anchor(Entry.from_json(json.loads(json.dumps(record.to_json()))), "window", ())


def test_slow_drift_of_an_unchanged_system_is_decided_on_exact_search_too() -> None:
    from retrieval_gate.gates.history import DriftCheck, drift_outcomes

    then = record([noisy(f"q{i}", index=1.0, exact=1.0) for i in range(10)])
    now = record(
        [noisy(f"q{i}", index=0.0, exact=1.0) for i in range(3)]
        + [noisy(f"q{i}", index=1.0, exact=1.0) for i in range(3, 10)]
    )
    anchor = _anchor(then)
    assert sorted(anchor.record.per_query("P@1", exact=True).values()) == [1.0] * 10
    check = [DriftCheck("P@1", 0.0, 0.0)]
    found = drift_outcomes(now, anchor, check, level=0.05, alpha=0.05)["P@1"]
    assert not isinstance(found, str)
    # Exact search 1 -> 1: level with the anchor; the index's own 1 -> 0.7 is said beside.
    assert found.passed and (found.value, found.threshold) == (1.0, 1.0)
    assert found.detail[-1] == (
        "index noise: 3 of 10 queries ranked differently from exact search today; decided on "
        "exact search over the same vectors (the system's identity is unchanged since the "
        "anchor); under the index's own ranking P@1 went 1 -> 0.7 (docs/verdicts.md, "
        '"Index noise")'
    )
    # Another model since the anchor: the index's values decide, 1 -> 0.7 fails at 0.
    moved = record(list(now.queries), model_identity="other-model")
    other = drift_outcomes(moved, anchor, check, level=0.05, alpha=0.05)["P@1"]
    assert not isinstance(other, str)
    assert not other.passed and other.value == pytest.approx(0.7)
    assert not any(line.startswith("index noise") for line in other.detail)
    # A record of a reproducible index keeps the line it had: no "exact" key.
    assert "exact" not in _anchor(record([query("q0")])).record.to_json()


def test_the_margin_rule_decides_on_exact_search_too() -> None:
    # The same three index misses as above: exact search changed no query, so "ok" (no compared
    # query changed) where the index's 1 -> 0.7 alone would be tested.
    then = record([noisy(f"q{i}", index=1.0, exact=1.0) for i in range(10)])
    now = record(
        [noisy(f"q{i}", index=0.0, exact=1.0) for i in range(3)]
        + [noisy(f"q{i}", index=1.0, exact=1.0) for i in range(3, 10)]
    )
    base = base_of(then)
    shared = align(now, base).shared
    check = [RegressionCheck("suite", "P@1", 0.0)]
    [out] = check_regressions(now, base, shared, check, alpha=0.05, policy="margin", steady=True)
    assert out.passed and figures(out).verdict == "ok"
    assert out.detail[0] == (
        "ok: no compared query changed; index noise: 3 of 10 queries ranked differently from "
        "exact search (0 in the baseline), P@1 -0.3000 of the change"
    )
    [plain] = check_regressions(now, base, shared, check, alpha=0.05, policy="margin")
    assert figures(plain).verdict != "ok" and figures(plain).index_noise is None
