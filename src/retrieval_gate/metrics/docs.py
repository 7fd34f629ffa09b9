"""Render docs/metrics.md from the registry: ``python -m retrieval_gate.metrics.docs``.

``python -m retrieval_gate.metrics.docs`` prints the page, ``--write docs/metrics.md`` writes it
and ``--check docs/metrics.md`` exits 1 when the file differs from what the registry renders
(tests/metrics/test_docs.py does the same check). The table and the per-family sections come from
each built-in family's declaration; the conventions above them and the API notes below them are
fixed text kept here. Families added by plugins are not rendered: the page documents this
package.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from retrieval_gate.metrics.registry import MetricFamily, builtin_families, format_bounds

__all__ = ["REGENERATE", "render"]

REGENERATE = "python -m retrieval_gate.metrics.docs --write docs/metrics.md"

HEADER = f"""\
# Metrics

<!-- Generated from the metric registry: edit the families' declarations
(src/retrieval_gate/metrics/) or the fixed text in metrics/docs.py, not this file, then run
`{REGENERATE}`. -->

Every trec_eval metric here agrees with **trec_eval 10** to 1e-9 on the same run (see
[How it is verified](#how-it-is-verified)). The definitions live in one registry
(`retrieval_gate.metrics.REGISTRY`), one declaration per family; error messages, floor checks,
the baseline fingerprint's metric versions and this page are built from it.

## Conventions

- **Relevant** means grade >= 1 (trec_eval's default `-l 1`).
- **Ranking order**: score descending; ties broken by document id **descending**, in byte order
  (trec_eval's `strcmp`; Python's string order is the same for UTF-8 ids). So among documents
  tied at 0.5, `doc9` comes before `doc10`, and `c` before `b` before `a`. A rank column in a TREC
  run file is ignored, exactly as trec_eval ignores it. Scores are 64-bit floats (pytrec_eval
  keeps 32-bit ones, so two scores closer than about 1e-7 are a tie there but not here). This is
  the plugin's one tie policy: `rank_scored()` defines it, and `evaluate()`'s rank counting
  implements the same order without sorting (a property test checks they agree on runs full of
  ties).
- **Per query, then aggregated** over every query of the scope, by the family's aggregation (the
  mean for every ranking metric). A query whose ranking is empty, or that is absent from the run
  altogether, scores 0 on every metric and still counts in the mean (trec_eval `-c`,
  ir_measures, PyTerrier). It never drops out.
- A query **without relevant documents** scores 0 on every metric (never NaN).
- **Grades**: `0` is judged non-relevant (no gain, not in the ideal ranking). A **negative**
  grade is what trec_eval calls "in the pool but unjudged" (`form_res_rels.c`: a qrels entry with
  `rel < 0` gets `RELVALUE_UNJUDGED` and is left out of the per-level counts): not relevant, gain
  0, not in the ideal ranking, i.e. the same as a document nobody judged.
- A document listed twice in one ranking is an error (trec_eval refuses it too): it would be
  counted twice. Runs given as dicts cannot contain duplicates.
- **Floors** must lie within the metric's range (the table's "range" column); latency gates are
  ceilings and must be > 0 ms.
- **Versions**: each family carries its own definition version; the baseline fingerprint stores
  `"<family>/<version>"` per metric (`metric_versions()`), so a changed definition makes only
  that family's metrics "not comparable".

## The metrics

`k` is a cutoff, an integer >= 1. Names are case-insensitive and accept the aliases listed; the
canonical name is what reports, the JSON twin and `evaluate()` return.
"""

NOTATION = """\
Below, `rel_i` is 1 when the document at rank `i` (1-based) is relevant, `g_i` its grade (0 when
unjudged or negative), `R` the number of relevant documents of the query (judged, grade >= 1,
retrieved or not) and `n` the number retrieved.
"""

FOOTER = """\
## Python API

The metrics work without pytest, in the shapes pytrec_eval, ranx and ir_measures share:

```python
from retrieval_gate import evaluate

qrels = {"q1": {"d1": 2, "d2": 1, "d3": 0}, "q2": {"d9": 1}}
run = {"q1": {"d1": 0.9, "d4": 0.8, "d2": 0.7}}          # q2 retrieved nothing
evaluate(qrels, run, ["nDCG@10", "P@2", "MRR", "R-Prec"])
# {'q1': {'nDCG@10': 0.9502..., 'P@2': 0.5, 'MRR': 1.0, 'R-Prec': 0.5},
#  'q2': {'nDCG@10': 0.0, 'P@2': 0.0, 'MRR': 0.0, 'R-Prec': 0.0}}
```

- `qrels: {qid: {doc_id: grade}}`, `run: {qid: {doc_id: score}}`, `metrics`: names (any alias)
  or `Metric` objects. Keyword `gain="linear" | "exponential"` (nDCG only).
- Returns `{qid: {metric: value}}` for **every query in qrels**, in qrels order, keyed by
  canonical metric name (`"ndcg@10"` comes back as `"nDCG@10"`; duplicates are dropped). Run
  queries without judgments are ignored. pytrec_eval, by contrast, silently drops qrels queries
  missing from the run.
- NaN scores raise `ValueError`; unknown metrics raise `UnknownMetricError` (a `ValueError`).

`evaluate()` is the plugin's own code path: both build the same `Judged` arrays (grade of the
document at each rank, number retrieved, number relevant, ideal grades) and call the same
`compute()`, which runs each family's own vectorised function over a shared kernel of memoised
per-query arrays (cumulative relevant counts, precisions, DCG). The plugin ranks each query with
`rank_scored()` and calls `judge()`; `evaluate()` builds the arrays straight from the score
dicts: only documents with grade > 0 need a rank, and that rank is 1 + (documents scored higher)
+ (tied documents with a larger id), which numpy counts for all of them at once. Unjudged
documents never go through Python.

Lower-level pieces, for the plugin and for anyone who already has rankings:

| function | what |
|---|---|
| `parse_metric("nDCG@10") -> Metric` | parse a name; `Metric.name`, `.family`, `.k`, `.spec`, `.is_latency`, `.higher_is_better`, `.bounds`, `.version` |
| `rank_scored({doc: score}) -> [doc, ...]` | trec_eval order, the one tie policy |
| `judge(qrels, qids, rankings) -> Judged` | grade arrays from ordered rankings |
| `compute(judged, metrics, gain=...) -> {name: ndarray}` | per-query values, float64, one per query |
| `Metric.aggregate(values, components=None) -> float` | the family's aggregation of per-query values (0.0 for none) |
| `cutoff_metrics([1, 5, 10]) -> [Metric, ...]` | P, R, MRR, nDCG, MAP, Hit at each k (family by family), then R-Prec: what the JSON report stores per query |
| `compute_latency(metric, times_ms) -> ndarray` | a latency metric's per-query series; `.aggregate()` gives its value |
| `latency_stats(ms) -> {"p50", "p95", "p99", "mean"}` | latency summary, through the latency families |
| `metric_versions(metrics) -> {name: "<family>/<version>"}` | definition versions for the baseline fingerprint |
| `register_metric(family)` | add a `MetricFamily` (or several) at run time |

## Adding a metric

A metric family is one `MetricFamily(...)` declaration: name, aliases, cutoff grammar, input
(`"ranking"` or `"latency"`), `compute(kernel, k)` returning one value per query, aggregation,
bounds, trec_eval name, version, title and description. Inside this package, a new module that
defines `FAMILIES = (MetricFamily(...),)` is registered automatically, with its own test file
`tests/metrics/test_<module>.py`; then

    {regenerate}

adds its row and section here. Outside it, a package declares an entry point in the
`retrieval_gate.metrics` group, pointing at a family, a sequence of families or a callable
returning either:

```toml
[project.entry-points."retrieval_gate.metrics"]
my_metrics = "my_package.metrics:FAMILIES"
```

Entry points are loaded the first time any metric name is looked up. A name or alias that is
already taken is an error, never a silent override.

## How it is verified

- `tests/metrics/test_trec_eval_conformance.py` reads trec_eval's own conformance files
  (`../shared/data/trec_eval`, skipped with a reason when absent) and compares every per-query
  and `all` value we have an equivalent for, to trec_eval's 4 printed decimals:
  - `out.test.aq` (`-m all_trec -q`): `P_*`, `recall_*`, `ndcg_cut_*`, `map_cut_*` at 5 ... 1000,
    `success_1/5/10`, `recip_rank`, `Rprec`, `map`, `ndcg`, `set_recall`. `results.test` has a
    rank column that contradicts its scores and tied scores, so this checks the tie order.
  - `out.test.meas_params`: `P_3,5,7`, `recall_20,2000`, `ndcg_cut_10,20,23`, `success_2,5,20`.
  - `out.test.aqc` (`-c`, `results.trunc`): query 302 retrieved nothing and scores 0; the mean
    over all three queries matches.
  - `out.test.aql` (`-l2`, `qrels.rel_level`, grades -1 ... 4): nDCG on the graded, partly
    negative qrels (this checks the negative-grade and grade-0 handling); the other measures on
    relevance >= 2.
  - `out.test`, `out.test.a`: the `all` lines.
- The same file compares with **pytrec_eval** to 1e-9 on generated runs (200 queries x 100
  results, scores rounded to 1e-3 so ties are everywhere, grades -1 ... 3, queries with nothing
  relevant, relevant documents never retrieved, a query missing from the run): every family at
  cutoffs 1, 3, 5, 10, 20, 100, 150; `MRR@k` against `recip_rank` on the cut ranking; exponential
  nDCG against trec_eval's nDCG on qrels holding `2**g - 1`; and the plugin path
  (`rank_scored` + `judge` + `compute`) against `evaluate()`, value for value, for every
  registered ranking family.
- `tests/metrics/test_metrics.py` checks each family against hand arithmetic written in the test, tie
  order, linear and exponential nDCG, empty rankings, missing queries, the parser's aliases and
  every error, `cutoff_metrics` and `latency_stats`; each family outside trec_eval has its own
  `tests/metrics/test_<module>.py` doing the same; `tests/metrics/test_ranking.py` checks
  `evaluate()`'s rank counting against `rank_scored()` on random runs full of ties;
  `tests/metrics/test_registry.py` covers registration, entry points, bounds, aggregation and
  versions; `tests/metrics/test_docs.py` fails when this page is stale.
""".replace("{regenerate}", REGENERATE)


def _code(text: str) -> str:
    return f"`{text}`"


def _trec(name: str | None) -> str | None:
    """``ndcg_cut_{k}`` -> ```ndcg_cut_k```; words after the measure stay plain text."""
    if not name:
        return None
    measure, _, rest = name.replace("{k}", "k").partition(" ")
    return f"`{measure}` {rest}".rstrip()


def _trec_names(family: MetricFamily) -> str:
    names = [_trec(family.trec_name)]
    if family.takes_k and not family.needs_k:
        names.append(_trec(family.trec_name_full))
    shown = list(dict.fromkeys(n for n in names if n))
    return ", ".join(shown) if shown else "none"


def _heading_name(family: MetricFamily) -> str:
    return family.forms[0]


def _table(families: Sequence[MetricFamily]) -> str:
    rows = [
        "| metric | trec_eval | aliases | range | aggregation | version |",
        "|---|---|---|---|---|---|",
    ]
    for f in families:
        rows.append(
            "| "
            + " | ".join(
                [
                    ", ".join(map(_code, f.forms)),
                    _trec_names(f),
                    ", ".join(map(_code, f.alias_forms)),
                    format_bounds(f.bounds),
                    f.aggregation.name,
                    _code(f"{f.name}/{f.version}"),
                ]
            )
            + " |"
        )
    return "\n".join(rows) + "\n"


def _grammar(families: Sequence[MetricFamily]) -> str:
    need = [f.name for f in families if f.needs_k]
    none = [f.name for f in families if not f.takes_k]
    known = ", ".join(form for f in families for form in f.forms)
    text = (
        f"Need a cutoff: {', '.join(map(_code, need))}. Take none: "
        f"{', '.join(map(_code, none))}. Anything else is an `UnknownMetricError` whose one-line "
        "message quotes what was written and lists the registry, e.g."
    )
    wrapped = textwrap.fill(text, width=100, break_long_words=False, break_on_hyphens=False)
    return f"{wrapped}\n\n    unknown metric 'nDGC@10'; known: {known}\n"


def _section(family: MetricFamily) -> str:
    trec = _trec_names(family)
    heading = f"### {_code(_heading_name(family))}: {family.title}"
    if trec != "none":
        heading += f" ({trec})"
    facts = [
        f"- Forms: {', '.join(map(_code, family.forms))}"
        + (f"; aliases {', '.join(map(_code, family.alias_forms))}" if family.alias_forms else ""),
        f"- trec_eval: {trec}",
        f"- Range: {format_bounds(family.bounds)}; "
        + ("higher is better" if family.higher_is_better else "lower is better (a ceiling)"),
        f"- Input: {family.input}; aggregation over queries: {family.aggregation.name}"
        + (
            f" (reads {', '.join(family.aggregation.components)})"
            if family.aggregation.components
            else ""
        ),
        f"- Definition version: {_code(f'{family.name}/{family.version}')}",
    ]
    return f"{heading}\n\n{family.description.rstrip()}\n\n" + "\n".join(facts) + "\n"


def render() -> str:
    """The whole of docs/metrics.md, from the built-in families."""
    families = builtin_families()
    parts = [
        HEADER,
        _table(families),
        _grammar(families),
        NOTATION,
        *(_section(f) for f in families),
        FOOTER,
    ]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="PATH", type=Path, help="write the page to PATH")
    group.add_argument("--check", metavar="PATH", type=Path, help="exit 1 if PATH is stale")
    args = parser.parse_args(argv)
    page = render()
    if args.write is not None:
        args.write.write_text(page, encoding="utf-8")
    elif args.check is not None:
        current = args.check.read_text(encoding="utf-8") if args.check.exists() else ""
        if current != page:
            print(f"{args.check} is stale; run: {REGENERATE}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
