"""The markdown report: verdict and failing gates first, then each suite's systems side by side."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from retrieval_gate.report import ReportData

WORST = 5


def render(data: ReportData) -> str:
    return "\n".join(lines(data)) + "\n"


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def headline_metrics(runs: list[dict[str, Any]], gates: list[dict[str, Any]]) -> list[str]:
    """The metrics a suite's summary shows: what its gates name, then nDCG, R and MRR at max k."""
    available = list(runs[0]["metrics"])
    top = max(runs[0]["k"])
    wanted = [g["metric"] for g in gates if g["metric"] in available]
    wanted += [f"nDCG@{top}", f"R@{top}", f"MRR@{top}", f"P@{min(runs[0]['k'])}"]
    return [m for m in dict.fromkeys(wanted) if m in available]


def _numeric(cell: str) -> bool:
    return cell.strip("*").replace(".", "", 1).lstrip("-").isdigit() or cell == "-"


def _table(header: list[str], rows: list[list[str]]) -> Iterator[str]:
    # Numbers align right so decimals line up; text columns stay left.
    right = [bool(rows) and all(_numeric(row[i]) for row in rows) for i in range(len(header))]
    yield "| " + " | ".join(header) + " |"
    yield "|" + "|".join("---:" if r else "---" for r in right) + "|"
    for row in rows:
        yield "| " + " | ".join(row) + " |"


def lines(data: ReportData) -> Iterator[str]:
    yield "# Retrieval gate report"
    yield ""
    n_failed = len(data.failed)
    verdict = "PASSED" if data.passed else "FAILED"
    yield (
        f"**{verdict}**: {len(data.gates) - n_failed} of {len(data.gates)} gates passed"
        f" over {len(data.suites())} suite(s) and {len({r['system'] for r in data.runs})} system(s)."
    )
    yield ""
    if data.errors:
        yield "## Runs that failed"
        yield ""
        for error in data.errors:
            yield f"- `{error['suite']}` x `{error['system']}`: {error['error']}"
        yield ""
    if data.failed:
        yield "## Failing gates"
        yield ""
        rows = [
            [
                f"`{g['nodeid']}`",
                fmt(g["value"]),
                f"{g['comparison']} {fmt(g['threshold'])}",
                str(g["n"]),
                ", ".join(f"{w['id']} ({fmt(w['value'])})" for w in g["worst"]) or "-",
            ]
            for g in data.failed
        ]
        yield from _table(["gate", "value", "needs", "n", "worst queries"], rows)
        yield ""
    for suite in data.suites():
        yield from _suite(data, suite)
    if data.gates:
        yield "## All gates"
        yield ""
        rows = [
            [
                "pass" if g["passed"] else "**FAIL**",
                f"`{g['nodeid']}`",
                fmt(g["value"]),
                f"{g['comparison']} {fmt(g['threshold'])}",
                str(g["n"]),
            ]
            for g in data.gates
        ]
        yield from _table(["status", "gate", "value", "needs", "n"], rows)
        yield ""


def _suite(data: ReportData, suite: str) -> Iterator[str]:
    runs = data.runs_of(suite)
    gates = [g for g in data.gates if g["suite"] == suite]
    systems = [run["system"] for run in runs]
    yield f"## Suite `{suite}`"
    yield ""
    first = runs[0]
    yield f"{first['n']} queries from `{first['suite_path']}`, cutoffs {first['k']}."
    yield ""

    yield "### Metrics"
    yield ""
    rows = []
    for metric in first["metrics"]:
        values = [run["metrics"].get(metric) for run in runs]
        best = max((v for v in values if v is not None), default=None)
        cells = [
            f"**{fmt(v)}**" if len(runs) > 1 and v is not None and v == best else fmt(v)
            for v in values
        ]
        rows.append([metric, *cells])
    yield from _table(["metric", *systems], rows)
    yield ""

    shown = headline_metrics(runs, gates)
    yield from _chart(suite, runs, shown)

    for kind, key in (("category", "categories"), ("difficulty", "difficulties")):
        labels = list(dict.fromkeys(label for run in runs for label in run[key]))
        if not labels:
            continue
        yield f"### By {kind}"
        yield ""
        rows = []
        for label in labels:
            for run in runs:
                group = run[key].get(label)
                if group is None:
                    continue
                rows.append(
                    [label, run["system"], str(group["n"])]
                    + [fmt(group["metrics"].get(m)) for m in shown]
                )
        yield from _table([kind, "system", "n", *shown], rows)
        yield ""

    yield "### Latency (ms per query)"
    yield ""
    rows = [
        [run["system"]] + [f"{run['latency_ms'][s]:.2f}" for s in ("p50", "p95", "p99", "mean")]
        for run in runs
    ]
    yield from _table(["system", "p50", "p95", "p99", "mean"], rows)
    yield ""
    stats_rows = []
    for run in runs:
        stats = run.get("stats", {})
        parts = []
        if "embedded_documents" in stats:
            parts.append(
                f"embedded {stats['embedded_documents']}, from cache {stats['cached_documents']}"
            )
        if "index_recall" in stats:
            parts.append(
                f"index recall@{stats['index_recall_k']} vs exact search {stats['index_recall']:.4f}"
            )
        if parts:
            stats_rows.append(f"- `{run['system']}`: " + "; ".join(parts))
    if stats_rows:
        yield "### Indexing"
        yield ""
        yield from stats_rows
        yield ""

    if shown:
        metric = shown[0]
        yield f"### Worst queries by {metric}"
        yield ""
        for run in runs:
            ordered = sorted(run["queries"], key=lambda q: q["metrics"].get(metric, 0.0))[:WORST]
            rows = []
            for q in ordered:
                ranks = q.get("relevant_ranks", {})
                found = sorted(r for r in ranks.values() if r is not None)
                rows.append(
                    [
                        f"`{q['id']}`",
                        fmt(q["metrics"].get(metric)),
                        str(found[0]) if found else "not retrieved",
                        ", ".join(f"`{d}`" for d in q["ranking"][:3]) or "-",
                    ]
                )
            yield f"`{run['system']}`:"
            yield ""
            yield from _table(["query", metric, "first relevant at", "top 3"], rows)
            yield ""


def _chart(suite: str, runs: list[dict[str, Any]], metrics: list[str]) -> Iterator[str]:
    """A mermaid bar chart (GitHub renders it): metrics on x, one bar series per system."""
    if not metrics:
        return
    labels = ", ".join(f'"{m}"' for m in metrics)
    yield "```mermaid"
    yield "xychart-beta"
    yield f'    title "{suite}"'
    yield f"    x-axis [{labels}]"
    yield '    y-axis "value" 0 --> 1'
    for run in runs:
        values = ", ".join(f"{run['metrics'].get(m, 0.0):.4f}" for m in metrics)
        yield f"    bar [{values}]"
    yield "```"
    yield ""
    if len(runs) > 1:
        yield "Bars left to right: " + ", ".join(f"`{run['system']}`" for run in runs) + "."
        yield ""
