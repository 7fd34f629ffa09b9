"""Every case of the bad-input table (bad_inputs.py) through pytest --retrieval-gate, and the
documentation generated from it is current."""

from __future__ import annotations

from pathlib import Path

import pytest

from .bad_inputs import CASES, BadInput, render
from .conftest import lit

DOC = Path(__file__).parents[2] / "docs" / "bad-input.md"

_CODES = {
    "collection error": pytest.ExitCode.INTERRUPTED,
    "usage error": pytest.ExitCode.USAGE_ERROR,
    "failed items": pytest.ExitCode.TESTS_FAILED,
}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_the_documented_line(project: pytest.Pytester, case: BadInput) -> None:
    for name, text in case.files.items():
        path = project.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    result = project.runpytest("--retrieval-gate", *case.args)
    assert result.ret == _CODES[case.outcome]
    seen = result.stderr if case.outcome == "usage error" else result.stdout
    seen.fnmatch_lines(["*" + lit(case.line).replace("[*]", "*")])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_the_documented_table_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/bad-input.md is stale: python -m tests.integration.bad_inputs > docs/bad-input.md"
    )
