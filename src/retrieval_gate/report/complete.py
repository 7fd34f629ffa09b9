"""The CI check that a gate session reached its end: ``python -m
retrieval_gate.report.complete [retrieval-gate-report.json]``.

Code under test can end the interpreter at once (``os._exit(0)`` in a retriever, a library's
fatal error handler that exits 0): no hook runs after it, so pytest reports nothing and the
process exits with the status that code chose, and a CI job that reads only the exit status
passes without a gate. The JSON twin is written at the session's end and carries ``"complete":
true`` only when the session was not interrupted; this check, run after pytest (the documented
workflow in docs/ci.md removes any earlier report first), exits 1 with one line when the report
is missing, is not the gate's, is incomplete or says the gate failed, and 0 when it is complete
and passed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from retrieval_gate.display import shown

DEFAULT_REPORT = "retrieval-gate-report.json"


def problem(path: Path) -> str | None:
    """Why the JSON report at ``path`` does not show a complete, passing gate session, or None."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return (
            f"{path} was not written: the session did not reach its end (an interpreter exit "
            "such as os._exit in the code under test, a crash or a kill), so no gate decided"
        )
    except (OSError, UnicodeDecodeError) as exc:
        return f"{path} cannot be read: {getattr(exc, 'strerror', None) or exc}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{path} is not JSON (line {exc.lineno}: {exc.msg}): not the gate's report"
    if not isinstance(data, dict) or not str(data.get("generator", "")).startswith(
        "pytest-retrieval-gate"
    ):
        return f"{path} is not a JSON report of pytest-retrieval-gate"
    if data.get("complete") is not True:
        return (
            f"{path} has no completion marker: the session that wrote it was interrupted "
            "before its end"
        )
    if data.get("passed") is not True:
        return f"{path} says the gate failed: see its markdown twin for the failing gates"
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(
            "usage: python -m retrieval_gate.report.complete [REPORT.json] (default "
            f"{DEFAULT_REPORT})",
            file=sys.stderr,
        )
        return 2
    path = Path(args[0] if args else DEFAULT_REPORT)
    found = problem(path)
    # The path is the caller's and an error's text the system's: shown as display shows them.
    if found is not None:
        print(shown(f"retrieval gate: {found}"), file=sys.stderr)
        return 1
    print(shown(f"retrieval gate: {path} is complete and passed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
