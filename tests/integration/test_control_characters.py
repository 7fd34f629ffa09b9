"""User text is inert where it is shown: a suite whose name, query id, query text and document
file name hold a terminal escape sequence (retitle the window, clear the screen), a bidi
override and a control character reaches the terminal, the markdown report (its mermaid charts
included) and JUnit XML escaped (``\\x1b``, ``\\u202e``), never raw; a category label holding
them is refused with the label escaped.
"""

from __future__ import annotations

import json
import re

import pytest

from .conftest import only_system

# ESC ] 0 ; title BEL (retitles a terminal window), ESC [ 2 J (clears the screen), a right-to-left
# override, and SOH beside the NUL it follows.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\u202e\x01"
ESCAPED = "\\x1b]0;pwned\\x07\\x1b[2J\\u202e\\x01"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

DOC = f"doc{HOSTILE}.sql"

RETRIEVER = f"""
def retrieve(query, k):
    return [({DOC!r}, 2.0), ("plain.sql", 1.0)][:k]
"""


def _quoted(text: str) -> str:
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


SUITE = f"""name: {_quoted(f"lineage{HOSTILE}")}
k: [1]
gates:
  P@1: 1.0
queries:
  - id: {_quoted(f"q{HOSTILE}1")}
    query: {_quoted(f"which tables{HOSTILE} join orders")}
    relevant: [plain.sql]
    expect: {{found_within: 1}}
"""

LABELLED = f"""name: labels
k: [1]
gates:
  P@1: 0.0
queries:
  - id: q
    query: q
    relevant: [plain.sql]
    category: {_quoted(f"joins{HOSTILE}")}
"""


def _raw(text: str) -> list[str]:
    """The lines of ``text`` that hold a control character (tabs and newlines aside)."""
    return [line for line in text.splitlines() if RAW.search(line)]


def test_control_characters_reach_no_output_raw(pytester: pytest.Pytester) -> None:
    only_system(pytester, "kw", "hostile_app:retrieve", hostile_app=RETRIEVER)
    with open(pytester.path / "pyproject.toml", "a", encoding="utf-8") as handle:
        handle.write('\n[tool.retrieval_gate]\ncorpus = "corpus"\n')
    (pytester.path / "corpus").mkdir()
    (pytester.path / "corpus" / DOC).write_text("orders", encoding="utf-8")
    (pytester.path / "corpus" / "plain.sql").write_text("tables", encoding="utf-8")
    (pytester.path / "lineage.retrieval.yaml").write_text(SUITE, encoding="utf-8")
    (pytester.path / "labels.retrieval.yaml").write_text(LABELLED, encoding="utf-8")

    result = pytester.runpytest(
        "--retrieval-gate", "--junitxml=junit.xml", "--continue-on-collection-errors", "-rA"
    )
    terminal = result.stdout.str() + result.stderr.str()
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    junit = (pytester.path / "junit.xml").read_text(encoding="utf-8")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for name, text in (("terminal", terminal), ("markdown", markdown), ("junit", junit)):
        assert _raw(text) == [], name
    # Shown escaped where it is shown: the failing expectation names the query, its text and
    # the documents; the summary and the report name the suite; the collection error the label.
    assert f'expect on query[q{ESCAPED}1] "which tables{ESCAPED} join orders"' in terminal
    assert f"top results: doc{ESCAPED}.sql, plain.sql" in terminal
    assert f"lineage{ESCAPED} (1 query)" in terminal
    assert f"joins{ESCAPED}" in terminal
    assert f"## Suite `lineage{ESCAPED}`" in markdown
    charts = re.findall(r"```mermaid\n(.*?)```", markdown, flags=re.S)
    assert charts and all(f"lineage{ESCAPED}: kw" in chart for chart in charts)
    assert f"query[q{ESCAPED}1]" in markdown
    assert f'name="query[q{ESCAPED}1]"' in junit
    assert f"top results: doc{ESCAPED}.sql" in junit
    # The JSON report keeps the values as they are: JSON escapes them itself.
    report = json.loads((pytester.path / "retrieval-gate-report.json").read_text("utf-8"))
    (run,) = report["runs"]
    assert run["suite"] == f"lineage{HOSTILE}"
    assert run["queries"][0]["id"] == f"q{HOSTILE}1"


def test_a_line_break_or_a_bar_in_an_id_breaks_no_line_and_no_table(
    pytester: pytest.Pytester,
) -> None:
    # A forged "PASSED" line in the terminal, a "|" that would end a markdown table cell.
    only_system(pytester, "kw", "hostile_app:retrieve", hostile_app=RETRIEVER)
    suite = SUITE.replace(_quoted(f"q{HOSTILE}1"), _quoted("a|b\nPASSED everything"))
    (pytester.path / "lineage.retrieval.yaml").write_text(suite, encoding="utf-8")
    result = pytester.runpytest("--retrieval-gate")
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    for text in (result.stdout.str(), markdown):
        assert not any(line.startswith("PASSED everything") for line in text.splitlines())
    assert "FAILED lineage.retrieval.yaml::kw::query[a|b\\x0aPASSED everything]" in (
        result.stdout.str()
    )
    rows = [line for line in markdown.splitlines() if "::query[" in line]
    assert rows and all("query[a\\|b\\x0aPASSED everything]" in row for row in rows)


def test_markdown_in_ids_and_texts_renders_as_text_in_the_report(
    pytester: pytest.Pytester,
) -> None:
    # An HTML comment would hide the rest of a pull request's summary (the failure included);
    # an image would be fetched from someone's server each time the summary is read.
    from markdown_it import MarkdownIt

    only_system(pytester, "kw", "hostile_app:retrieve", hostile_app=RETRIEVER)
    suite = SUITE.replace(_quoted(f"q{HOSTILE}1"), _quoted("q<!--1")).replace(
        _quoted(f"which tables{HOSTILE} join orders"),
        _quoted("![p](https://tracker.invalid/p.png) <details> [x](https://phish.invalid)"),
    )
    (pytester.path / "lineage.retrieval.yaml").write_text(suite, encoding="utf-8")
    result = pytester.runpytest("--retrieval-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    markdown = (pytester.path / "retrieval-gate-report.md").read_text(encoding="utf-8")
    assert "q&lt;!--1" in markdown  # the failing query is named, its markdown made inert
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    tags = {m.lower() for m in re.findall(r"<(?:/?)([a-zA-Z][a-zA-Z0-9-]*|!--)", html)}
    own = {"h1", "h2", "h3", "h4", "p", "ul", "li", "code", "pre", "table", "thead", "tbody"}
    own |= {"tr", "th", "td", "em", "strong", "br", "hr"}
    assert tags <= own, sorted(tags - own)
    # The suite's section, after the failures that name the id, is still there for a reader.
    assert html.index("q&lt;!--1") < html.index("<h2>Suite <code>lineage")


def test_a_warning_quoting_a_hostile_path_reaches_the_warnings_summary_escaped(
    pytester: pytest.Pytester,
) -> None:
    """pytest prints a warning's message as it is: the plugin's warnings are shown (escaped,
    masked) when made (errors.GateWarning). A damaged vector shard in a cache folder whose name
    holds an escape sequence: the warning names the shard."""
    from .bad_inputs import LENIENT, corpus, settings, static_model, static_system

    root = pytester.path
    static_model(root)
    for name, text in corpus().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(str(text), encoding="utf-8")
    (root / "pyproject.toml").write_text(
        settings('[tool.retrieval_gate]\ncorpus = "corpus"\n', static_system()), encoding="utf-8"
    )
    (root / "lineage.retrieval.yaml").write_text(LENIENT, encoding="utf-8")
    cache = f"cache{HOSTILE}"
    pytester.runpytest("--retrieval-gate", f"--rg-cache-dir={cache}").assert_outcomes(passed=4)
    (shard,) = (root / cache / "embeddings").glob("*/shard-*.npz")
    shard.write_bytes(b"not a shard")
    result = pytester.runpytest(
        "--retrieval-gate", f"--rg-cache-dir={cache}", "-W", "default::UserWarning"
    )
    terminal = result.stdout.str() + result.stderr.str()
    assert _raw(terminal) == []
    assert f"embedding cache shard {root}/cache{ESCAPED}/embeddings/" in terminal
