"""report/: the report of gathered payloads (whatever order workers hand them in) and its
markdown: failing gates first, each suite's kind's headline and sections, every writer run."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval_gate.records import (
    GroupRecord,
    ItemPayload,
    RunFailure,
    RunRecord,
    Undecided,
)
from retrieval_gate.report import ReportData, Targets, item_properties, markdown, write_reports
from retrieval_gate.suites.pairs import PairExtras

from .builders import gate as _gate
from .builders import run_record as _run


def test_the_report_does_not_depend_on_the_order_items_arrive_in() -> None:
    arrived = [
        ItemPayload(runs=(_run("s", "y", 0.5),), gates=(_gate("s::y::P@1", True, system="y"),)),
        ItemPayload(runs=(_run("s", "x", 0.5),), gates=(_gate("s::x::P@1", False),)),
        # A run handed in twice (two workers read it): the first is kept.
        ItemPayload(runs=(_run("s", "y", 0.9),)),
        ItemPayload(runs=(_run("a", "x", 0.5),), gates=(_gate("a::x::P@1", True, suite="a"),)),
    ]
    forward = ReportData.gathered(sum(arrived, ItemPayload()))
    backward = ReportData.gathered(sum(reversed(arrived[:2] + arrived[3:]), ItemPayload()))
    # Runs by suite then system, whatever order they came in.
    assert [r.key for r in forward.runs] == [("a", "x"), ("s", "x"), ("s", "y")]
    assert forward.runs == backward.runs
    assert forward.runs[2].metrics["P@1"] == 0.5
    # Failing gates first, then by node id.
    assert [g.nodeid for g in forward.gates] == ["s::x::P@1", "a::x::P@1", "s::y::P@1"]
    assert markdown.render(forward) == markdown.render(backward)


def test_failing_gates_come_first_in_the_markdown() -> None:
    data = ReportData.gathered(
        ItemPayload(
            runs=(_run("s", "x", 0.1),),
            gates=(_gate("s::x::a", True), _gate("s::x::b", False)),
        )
    )
    text = markdown.render(data)
    assert text.index("## Failing gates") < text.index("## Suite `s`") < text.index("## All gates")
    all_gates = text[text.index("## All gates") :].splitlines()
    assert all_gates[4].startswith("| **FAIL** | `s::x::b`")
    assert all_gates[5].startswith("| pass | `s::x::a`")
    assert text.startswith("# Retrieval gate report\n\n**FAILED**: 1 of 2 gates passed")


def test_each_kind_contributes_its_headline_and_sections() -> None:
    ranking = markdown.render(ReportData.gathered(ItemPayload(runs=(_run("s", "x", 1.0),))))
    # The ranking kind's headline (nDCG, R, MRR at the largest cutoff, P at the smallest) in the
    # chart, and its worst queries by the first of them.
    assert 'x-axis ["nDCG@3", "R@3", "MRR@3", "P@1"]' in ranking
    assert "### Worst queries by nDCG@3" in ranking
    pairs_run = _run("p", "x", 0.0, kind="pairs")
    pairs_run = RunRecord.from_json(
        {
            **pairs_run.to_json(),
            "metrics": {"pearson": 0.4, "spearman": 0.3},
            "queries": [
                {**q.to_json(), "metrics": {"cosine": c, "gold_score": g}, "text_b": "other"}
                for q, c, g in zip(pairs_run.queries, (0.9, 0.1), (1.0, 2.0), strict=True)
            ],
        }
    )
    assert pairs_run.queries[0].extras == PairExtras(text_b="other")
    text = markdown.render(ReportData.gathered(ItemPayload(runs=(pairs_run,))))
    assert 'x-axis ["pearson", "spearman"]' in text
    assert "### Pairs furthest from the gold order" in text
    assert "| `q0` | query 0 | other | 1.0000 | 0.9000 | 1 |" in text
    assert "2 pairs from `p.retrieval.yaml`" in text


def test_runs_that_failed_and_undecided_gates_are_reported() -> None:
    data = ReportData.gathered(
        ItemPayload(
            failures=(RunFailure("s", "x", "s.yaml [queries[0]]: bad"),),
            undecided=(Undecided("s", "x", "s::x::P@1"),),
        )
    )
    assert not data.passed
    text = markdown.render(data)
    assert "- `s` x `x`: s.yaml [queries[0]]: bad" in text
    # The failed run was run: its suite and system count.
    assert (
        "0 of 1 gate passed; 1 not decided because their run failed, over 1 suite and "
        "1 system." in text
    )


def test_every_writer_writes_and_items_get_their_properties(tmp_path: Path) -> None:
    run = _run("s", "x", 0.5)
    run = RunRecord(**{**run.__dict__, "categories": {"c": GroupRecord(n=1, metrics={"P@1": 1.0})}})
    data = ReportData.gathered(ItemPayload(runs=(run,), gates=(_gate("s::x::P@1", True),)))
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    written = write_reports(
        data,
        Targets(markdown=tmp_path / "r.md", json=tmp_path / "r.json", step_summary=str(summary)),
    )
    assert written.files == [tmp_path / "r.md", tmp_path / "r.json"]
    assert written.failed == []
    assert json.loads((tmp_path / "r.json").read_text())["runs"][0]["system"] == "x"
    assert summary.read_text() == "earlier step\n" + (tmp_path / "r.md").read_text() + "\n"
    assert ("metric", "P@1") in item_properties(data.gates[0])


def test_charts_have_one_bar_series_each() -> None:
    # Two systems: one chart per summary metric, the systems on the x axis, one series (mermaid
    # draws several series of a chart in the same slot, hiding the shorter bars).
    two = "\n".join(markdown._chart("s", [_run("s", "x", 0.25), _run("s", "y", 0.75)], ["P@1"]))
    assert two.count("```mermaid") == 1
    assert '    title "s: P@1"' in two
    assert '    x-axis ["x", "y"]' in two
    assert two.count("    bar [") == 1 and "    bar [0.2500, 0.7500]" in two
    # One system: its metrics on the x axis, one chart.
    one = "\n".join(markdown._chart("s", [_run("s", "x", 0.25)], ["P@1", "R@3"]))
    assert '    x-axis ["P@1", "R@3"]' in one and "    bar [0.2500, 0.5000]" in one
    assert "Bars left to right" not in two + one


def test_a_lone_surrogate_and_a_credential_in_the_records_are_written_inert(
    tmp_path: Path,
) -> None:
    # A lone surrogate cannot be encoded as UTF-8: the markdown shows it escaped, the JSON twin
    # writes it as JSON escapes it; a credential in a failure is masked in both.
    failure = RunFailure("s\ud800", "y", "cannot reach postgresql://gate:hunter2pw@db")
    data = ReportData.gathered(ItemPayload(runs=(_run("s\ud800", "x", 0.5),), failures=(failure,)))
    written = write_reports(data, Targets(markdown=tmp_path / "r.md", json=tmp_path / "r.json"))
    assert written.failed == []
    text = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "## Suite `s\\ud800`" in text
    assert "- `s\\ud800` x `y`: cannot reach postgresql://gate:***@db" in text
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["runs"][0]["suite"] == "s\ud800"
    assert report["errors"][0]["error"] == "cannot reach postgresql://gate:***@db"


def test_means_equal_but_for_float_noise_are_bold_together() -> None:
    # Two systems' P@3 over 15 queries, both 4/15, summed in other orders: 0.26666666666666666
    # and 0.2666666666666667. Both are the best; bolding one would name a winner that is not one.
    data = ReportData.gathered(
        ItemPayload(
            runs=(
                _run("s", "x", 0.26666666666666666),
                _run("s", "y", 0.2666666666666667),
                _run("s", "z", 0.1),
            )
        )
    )
    assert 0.26666666666666666 != 0.2666666666666667
    text = markdown.render(data)
    assert "| P@1 | **0.2667** | **0.2667** | 0.1000 |" in text
    # Systems that differ only by float noise: no bold at all.
    alone = ReportData.gathered(
        ItemPayload(runs=(_run("s", "x", 0.26666666666666666), _run("s", "y", 0.2666666666666667)))
    )
    assert "| P@1 | 0.2667 | 0.2667 |" in markdown.render(alone)
