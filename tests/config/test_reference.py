"""The generated references in the docs are current, and the declared tables they show are
complete: every key the settings and suite parsers accept is documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_gate.config.reference import END, REFERENCES, begin_marker

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_generated_reference_in_the_docs_is_current(name: str) -> None:
    doc, make = REFERENCES[name]
    text = (DOCS / doc).read_text(encoding="utf-8")
    start = text.index(begin_marker(name))
    end = text.index(END, start) + len(END)
    assert text[start:end] + "\n" == make(), (
        f"docs/{doc} is stale: python -m retrieval_gate.config.reference --write"
    )


def test_every_settings_key_and_table_is_in_the_docs() -> None:
    from retrieval_gate.config.settings import SETTINGS_OPTIONS

    reference = REFERENCES["settings"][1]()
    for key, option in SETTINGS_OPTIONS.items():
        assert f"| `{key}` |" in reference
        assert option.doc, key
        if option.nested is not None:
            assert f"#### The table of `{key}`" in reference
            assert all(f"| `{inner}` |" in reference for inner in option.nested())


def test_every_suite_kind_and_its_keys_are_in_the_docs() -> None:
    from retrieval_gate.suites import kinds

    reference = REFERENCES["suites"][1]()
    for kind in kinds().values():
        assert f"### Kind `{kind.name}`" in reference
        assert all(f"| `{key}` |" in reference and o.doc for key, o in kind.options.items())
