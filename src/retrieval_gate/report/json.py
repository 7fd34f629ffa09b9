"""The JSON twin of the report: a versioned contract other tools read (docs/report.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval_gate import __version__

if TYPE_CHECKING:
    from retrieval_gate.report import ReportData

VERSION = 1


def render(data: ReportData) -> dict[str, Any]:
    return {
        "version": VERSION,
        "generator": f"pytest-retrieval-gate {__version__}",
        "passed": data.passed,
        "runs": list(data.runs),
        "gates": list(data.gates),
        "errors": list(data.errors),
    }
