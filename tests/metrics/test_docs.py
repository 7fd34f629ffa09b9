"""docs/metrics.md is generated from the registry and must not go stale."""

from __future__ import annotations

from pathlib import Path

from retrieval_gate.metrics.docs import REGENERATE, main, render
from retrieval_gate.metrics.registry import builtin_families

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_docs_metrics_md_is_up_to_date() -> None:
    current = DOCS.read_text(encoding="utf-8")
    assert current == render(), f"docs/metrics.md is stale; regenerate it with: {REGENERATE}"


def test_every_builtin_family_has_a_row_and_a_section() -> None:
    page = render()
    for family in builtin_families():
        assert f"| {', '.join(f'`{form}`' for form in family.forms)} |" in page
        assert f"### `{family.forms[0]}`: {family.title}" in page
        assert f"`{family.name}/{family.version}`" in page


def test_check_mode_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "metrics.md"
    stale.write_text("# Metrics\n", encoding="utf-8")
    assert main(["--check", str(stale)]) == 1
    assert main(["--write", str(stale)]) == 0
    assert main(["--check", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == render()
