"""The GitHub Actions step summary: the markdown report appended to ``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from retrieval_gate.report import Writer

if TYPE_CHECKING:
    from retrieval_gate.report import ReportData, Targets


def write(data: ReportData, targets: Targets) -> list[Path]:
    """Append the markdown report; the step summary is GitHub's file, so nothing is announced."""
    if not targets.step_summary:
        return []
    from retrieval_gate.report import markdown

    with open(targets.step_summary, "a", encoding="utf-8") as handle:
        handle.write(markdown.render(data) + "\n")
    return []


WRITER = Writer(name="step-summary", write=write)
