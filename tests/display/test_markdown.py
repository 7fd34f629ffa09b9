"""User text in the markdown report is inert: rendered by a CommonMark parser with raw HTML
allowed (as GitHub allows some), a line holding an HTML comment, a tag, an image, a link or a
backslash trick renders no element but the plugin's own (paragraphs, lists, tables, code spans),
and the plugin's own text reads as it did."""

from __future__ import annotations

import random
import re

import pytest
from markdown_it import MarkdownIt

from retrieval_gate.display.markdown import inert

# What the report itself renders to, and block formatting a line of user text may get (a quote,
# a heading, a rule, an indented code line): anything else came from user text.
OWN_TAGS = {"p", "ul", "li", "code", "table", "thead", "tbody", "tr", "th", "td", "em", "strong"}
OWN_TAGS |= {"blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "pre"}
TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*|!--)")


# Built once: building the parser cost more than rendering a report's lines with it.
_PARSER = MarkdownIt("commonmark", {"html": True}).enable("table")


def _render(markdown: str) -> str:
    return str(_PARSER.render(markdown))


def _tags(html: str) -> set[str]:
    return {name.lower() for _, name in TAG.findall(html)}


def _report_lines(text: str) -> str:
    """A list item, a prose line and a table, each holding ``text`` where the report puts ids
    (code spans) and messages (prose)."""
    cell = text.replace("|", "\\|")
    return "\n".join(
        inert(line)
        for line in (
            f"- `{text}` x `kw`: {text}",
            "",
            f"regressed queries: {text} (drop 0.5); category[{text}]",
            "",
            text,
            "",
            f"- {text}",
            "",
            "| query | drop |",
            "|---|---:|",
            f"| `{cell}` {cell} | 0.5000 |",
        )
    )


HOSTILE = [
    "<!-- the rest of the report is hidden",
    "<details><summary>ok</summary>",
    "<img src=x onerror=alert(1)>",
    "![pixel](https://tracker.invalid/p.png)",
    "[click](https://phish.invalid)",
    "[x][y]\n\n[y]: https://phish.invalid",
    "[^1]\n\n[^1]: https://phish.invalid",
    "\\`<!--`",
    "\\\\`<script>`",
    "\\[x\\](https://phish.invalid)",
    "``<b>`",
    "<https://autolink.invalid>",
    "a\\|b<i>",
    "~~~ the rest of the report is code",
    "``` the rest of the report is code",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_renders_no_element_of_its_own(text: str) -> None:
    # A line break never reaches inert (the escaper writes it as \x0a first), but a definition
    # on a line of its own is tried too: a reference elsewhere would link to it.
    for line in (text.replace("\n", "\\x0a"), *text.split("\n")):
        html = _render(_report_lines(line))
        assert _tags(html) <= OWN_TAGS
        assert "<table>" in html  # the lines after it were not swallowed


def test_random_punctuation_renders_no_element_of_its_own() -> None:
    rng = random.Random(20261126)
    alphabet = "`\\[]()<>!:|-~a "
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
        html = _render(_report_lines(text))
        assert _tags(html) <= OWN_TAGS, (text, html)
        assert "<table>" in html, (text, html)


@pytest.mark.parametrize(
    "line",
    [
        "## Suite `lineage`",
        "- `q1`: relevant a.txt ranked 3 -> 7; category[rare] lost 2 of 4",
        "| `lineage.retrieval.yaml::kw::query[a\\|b]` | 0.5000 |",
        "lineage\\x1b]0;pwned\\x07 (1 queries)",
        "resolution +-0.0612 at 95 % reliability",
        "regressed: nDCG@10 dropped 0.142 > tolerance 0.01; a drop <= 0.05 passes",
    ],
)
def test_the_plugins_own_text_is_unchanged(line: str) -> None:
    assert inert(line) == line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("a <!-- b", "a &lt;!-- b"),
        ("drop <= 0.01, p < 0.05", "drop <= 0.01, p < 0.05"),
        ("![x](https://e.invalid/p.png)", "![x\\](https://e.invalid/p.png)"),
        ("[y]: https://e.invalid", "\\[y]: https://e.invalid"),
        ("- > [y]: https://e.invalid", "- > \\[y]: https://e.invalid"),
        ("- `s` x `x`: s.yaml [queries[0]]: bad", "- `s` x `x`: s.yaml [queries[0]]: bad"),
        ("x `y", "x \\`y"),
        ("\\`<!--`", "\\\\`<!--`"),
        ("`<!--` stays in its span", "`<!--` stays in its span"),
        ("``a`b`` <c", "``a`b`` &lt;c"),
    ],
)
def test_exact_text(line: str, expected: str) -> None:
    assert inert(line) == expected
