"""The bad-input table: each mistake a user makes and the one line they see.

One table serves twice: ``test_bad_input_table.py`` runs every case through ``pytest
--retrieval-gate`` and checks the line, and :func:`render` writes docs/bad-input.md from the same
rows, so the documentation shows exactly what the tests saw (a test fails when it is stale):

    python -m tests.integration.bad_inputs > docs/bad-input.md
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .conftest import SUITE

QUERY = "  - id: q\n    query: q\n    relevant: [sql/orders.sql]\n"


@dataclass(frozen=True)
class BadInput:
    """A mistake: the files it takes (on top of the test project), the options, how pytest
    reports it, and the line the user reads (``*`` stands for the rest of a long line, and a
    leading path is the project's).

    Besides text files (``files``; bytes for binary ones), a case may make symbolic links
    (``links``: link -> target), named pipes (``fifos``), sparse files of a given size
    (``sparse``), or anything else in ``setup`` (called with the project folder). Every file
    the project holds before the run must hold the same bytes after it: nothing written over.
    """

    id: str
    what: str
    line: str
    # "collection error" | "usage error" | "failed items" | "session failed" | "warning" | "passes"
    outcome: str
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    links: Mapping[str, str] = field(default_factory=dict)
    fifos: tuple[str, ...] = ()
    sparse: Mapping[str, int] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None


def settings(*tables: str, pytest_ini: str = 'addopts = "-p no:cacheprovider"') -> str:
    """A pyproject.toml with ``tables`` (TOML text) after the pytest ini options."""
    return f"[tool.pytest.ini_options]\n{pytest_ini}\n\n" + "\n".join(tables)


def retriever_system(name: str = "keyword", ref: str = "search_app:retrieve", **extra: str) -> str:
    """A ``[tool.retrieval_gate.system.NAME]`` table of a retriever system (values as TOML)."""
    lines = [f"[tool.retrieval_gate.system.{name}]", f'retriever = "{ref}"']
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


CASES: tuple[BadInput, ...] = (
    BadInput(
        "yaml-syntax",
        "malformed YAML",
        "lineage.retrieval.yaml: invalid YAML at line 3, column 1: expected ',' or '}', but got "
        "'<stream end>'",
        "collection error",
        {"lineage.retrieval.yaml": "queries: [\n  {query: a, relevant: [x]\n"},
    ),
    BadInput(
        "json-syntax",
        "malformed JSON",
        "lineage.retrieval.json: invalid JSON at line 1, column 28: Expecting property name "
        "enclosed in double quotes",
        "collection error",
        {"lineage.retrieval.json": '{"queries": [{"query": "a",}]}'},
    ),
    BadInput(
        "duplicate-key",
        "a key given twice (the last would silently win)",
        "lineage.retrieval.yaml: key 'P@1' is given twice at line 7; keep one",
        "collection error",
        {
            "lineage.retrieval.yaml": SUITE.replace(
                "  P@1: 0.5\n", "  P@1: 0.99\n  R@1: 0.1\n  P@1: 0.1\n"
            )
        },
    ),
    BadInput(
        "unknown-metric",
        "a metric name that does not exist",
        "lineage.retrieval.yaml [gates.nDGC@10]: unknown metric 'nDGC@10'; known: P@k, *",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("P@1: 0.5", "nDGC@10: 0.5")},
    ),
    BadInput(
        "k-zero",
        "a cutoff below 1",
        "lineage.retrieval.yaml [k]: cutoff k must be an integer >= 1, got 0",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("k: [1, 3]", "k: [0, 3]")},
    ),
    BadInput(
        "k-huge",
        "an absurd cutoff",
        "lineage.retrieval.yaml [k]: cutoff k must be at most 100000 (every system retrieves that "
        "many results per query), got 1000000000000",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("k: [1, 3]", "k: [1, 1000000000000]")},
    ),
    BadInput(
        "floor-out-of-range",
        "a floor outside the metric's range",
        "lineage.retrieval.yaml [gates.P@1]: P@1 floor must be within [0, 1], got 1.5",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("P@1: 0.5", "P@1: 1.5")},
    ),
    BadInput(
        "duplicate-id",
        "two queries with one id",
        "lineage.retrieval.yaml [queries[2] (id join_orders)]: duplicate query id 'join_orders' "
        "(first at queries[0])",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("id: refunds", "id: join_orders")},
    ),
    BadInput(
        "empty-relevant",
        "a query with nothing relevant",
        "lineage.retrieval.yaml [queries[2] (id refunds)]: empty relevant set (no document with "
        "grade >= 1)",
        "collection error",
        {"lineage.retrieval.yaml": SUITE.replace("relevant: [docs/faq.md]", "relevant: []")},
    ),
    BadInput(
        "not-in-corpus",
        "a relevant id the corpus does not have",
        "lineage.retrieval.yaml [queries[2] (id refunds)]: relevant ids not in corpus *corpus: "
        "docs/faq.md",
        "collection error",
        {
            "lineage.retrieval.yaml": "corpus: corpus\n" + SUITE,
            "corpus/sql/orders.sql": "select 1",
            "corpus/sql/payments.sql": "select 1",
            "corpus/sql/customers.sql": "select 1",
        },
    ),
    BadInput(
        "missing-corpus",
        "a corpus that is not there",
        "no-such-folder: corpus not found",
        "collection error",
        {"lineage.retrieval.yaml": "corpus: no-such-folder\n" + SUITE},
    ),
    BadInput(
        "unknown-system",
        "an unknown system on the command line",
        "ERROR: --rg-system 'bm25': unknown system; known systems: keyword, reverse",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-system", "bm25"),
    ),
    BadInput(
        "report-over-suite",
        "a report path that would overwrite a suite",
        "ERROR: --rg-report *lineage.retrieval.yaml matches the suite pattern '*.retrieval.yaml': "
        "writing there would overwrite or add a suite; choose another path",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-report=lineage.retrieval.yaml",),
    ),
    BadInput(
        "missing-baseline",
        "a baseline file that does not exist",
        "ERROR: --rg-baseline *missing.json: no such file; save one with --rg-save-baseline, or "
        "drop the option to run without a baseline",
        "usage error",
        {"lineage.retrieval.yaml": SUITE},
        ("--rg-baseline=missing.json",),
    ),
    BadInput(
        "corrupt-baseline",
        "a corrupt baseline",
        "ERROR: *retrieval-baseline.json: corrupt baseline (invalid JSON at line 1, column 2: "
        "Expecting property name enclosed in double quotes); restore it from version control or "
        "save a new one with --rg-save-baseline",
        "usage error",
        {"lineage.retrieval.yaml": SUITE, "retrieval-baseline.json": "{oops"},
    ),
    BadInput(
        "retriever-raises",
        "a retriever that raises",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve raised "
        "ValueError: index offline",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "def retrieve(query, k):\n    raise ValueError('index offline')\n",
        },
    ),
    BadInput(
        "retriever-garbage",
        "a retriever that returns something else than results",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve returned "
        "NoneType, expected a list of (doc_id, score)",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "def retrieve(query, k):\n    return None\n",
        },
    ),
    BadInput(
        "retriever-nan",
        "a NaN score",
        "lineage.retrieval.yaml [query join_orders]: retriever search_app:retrieve returned score "
        "nan for 'sql/orders.sql'; scores must be finite numbers",
        "failed items",
        {
            "lineage.retrieval.yaml": SUITE,
            "search_app.py": "def retrieve(query, k):\n    return [('sql/orders.sql', float('nan'))]\n",
        },
    ),
)


def render() -> str:
    """docs/bad-input.md from the table."""
    lines = [
        "# Bad input: what you see",
        "",
        "Every mistake in a suite, the settings, an option or a retriever is one line naming the",
        "file and the entry, never a traceback. This table is generated from the cases the tests",
        "run (`tests/integration/bad_inputs.py`): each line is what the test saw, with `*` for the",
        "rest of a long line or the project's path. Regenerate with",
        "`python -m tests.integration.bad_inputs > docs/bad-input.md`.",
        "",
        "| input | how pytest reports it | the line you read |",
        "|---|---|---|",
    ]
    for case in CASES:
        shown = case.line.replace("|", "\\|")
        lines.append(f"| {case.what} | {case.outcome} | `{shown}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
