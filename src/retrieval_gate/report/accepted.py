"""What a session accepts, in words (gates/accept.py): the changes a pull request's baseline
accepts against its target branch, and what a baseline saved over failing items accepts, for
the terminal summary and the markdown report (and so the GitHub step summary)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval_gate.gates.accept import AcceptanceReport


def terminal_lines(acceptance: AcceptanceReport | None) -> Iterator[str]:
    """The terminal summary's lines: a heading and a line per change, then the lines of what a
    saved baseline accepts; a target branch that could not be read is one warning line."""
    if acceptance is None:
        return
    if acceptance.problem:
        yield f"retrieval gate: warning: {acceptance.problem}"
    if acceptance.changes:
        yield acceptance.heading()
        for change in acceptance.changes:
            mark = "" if change.recorded or not change.drop else " (not recorded as accepted)"
            yield f"  {change.line()}{mark}"
    if acceptance.unrecorded:
        yield f"retrieval gate: warning: {acceptance.unrecorded}"
    for over in acceptance.saved_over:
        yield over.line()


def markdown_lines(acceptance: AcceptanceReport | None) -> Iterator[str]:
    """The report's "Accepted" section (before the suites: a reviewer reads it first)."""
    if acceptance is None or acceptance.empty:
        return
    yield "## Accepted"
    yield ""
    if acceptance.problem:
        yield f"**Target branch not read**: {acceptance.problem}."
        yield ""
    if acceptance.changes:
        yield acceptance.heading()
        yield ""
        for change in acceptance.changes:
            mark = "" if change.recorded or not change.drop else " (**not recorded as accepted**)"
            yield f"- {change.line()}{mark}"
        yield ""
    if acceptance.unrecorded:
        yield f"**Not recorded**: {acceptance.unrecorded}."
        yield ""
    for over in acceptance.saved_over:
        yield f"- {over.line()}"
    if acceptance.saved_over:
        yield ""
